-- Neovim starts again in the same workspace (after the chat scenario): :LspAgent chat shows the
-- conversation that went on before, from the server's history, with the session's token use,
-- and the next prompt continues that session. :LspAgent new then empties the chat for a new one.
local H = require("harness")

H.run(function()
  H.setup()
  local chat_module = require("lsp_agent.chat")
  vim.cmd("LspAgent chat")
  H.wait_chat_loaded()
  local chat = H.chat()
  H.wait_for("the session's token use", function()
    return chat.total ~= nil
  end)
  H.result.restored = H.chat_lines()
  H.result.session = chat.session
  H.result.title = chat_module.title(chat.conversation)
  H.wait_for("insert mode in the chat input", function()
    return vim.api.nvim_get_current_buf() == chat.input and vim.api.nvim_get_mode().mode == "i"
  end)
  H.feed("and in German?<C-s>")
  H.wait_chat_turn(4)
  H.result.conversation = H.chat_lines()
  H.result.session_after = chat.session
  vim.cmd("stopinsert")
  vim.cmd("LspAgent new")
  H.wait_for("the new session in the chat", function()
    return chat.session ~= H.result.session and not chat.loading
  end)
  H.result.new_conversation = H.chat_lines()
  H.result.new_session = chat.session
end)
