-- No model is set: the server refuses the chat's prompt. The user is told what to do, and the
-- prompt comes back into the input, ahead of what they typed since.
local H = require("harness")

H.run(function()
  H.setup({ model = vim.NIL })
  vim.cmd("LspAgent chat")
  H.wait_chat_loaded()
  local chat = H.chat()
  H.wait_for("insert mode in the chat input", function()
    return vim.api.nvim_get_current_buf() == chat.input and vim.api.nvim_get_mode().mode == "i"
  end)
  H.feed("explain hello.py<CR>line two<C-s>")
  H.result.refusal = H.wait_for("the refusal", function()
    for _, note in ipairs(H.result.notifications) do
      if note.level == vim.log.levels.ERROR then
        return note.message
      end
    end
    return nil
  end)
  H.result.input = H.input_lines()
  H.result.conversation = H.chat_lines()
  H.result.status = require("lsp_agent").status()
  H.result.statusline = require("lsp_agent.chat").statusline(chat.input)
end)
