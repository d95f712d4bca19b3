-- The model is slow; the user writes the next prompt meanwhile, and <CR> while the turn runs
-- sends nothing (it says why, and the text stays). <C-c> in the chat cancels the turn; then <CR>
-- sends the prompt.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("LspAgent chat")
  H.wait_chat_loaded()
  local chat = H.chat()
  H.wait_for("insert mode in the chat input", function()
    return vim.api.nvim_get_current_buf() == chat.input and vim.api.nvim_get_mode().mode == "i"
  end)
  H.feed("think hard<C-s>")
  H.wait_for("the model to start answering", function()
    return vim.tbl_contains(H.chat_lines(), "Let me think")
  end)
  H.feed("then briefly<Esc><CR>")
  H.result.refused_while_running = H.wait_for("the refusal", function()
    local last = H.result.notifications[#H.result.notifications]
    return last and last.message:match("^lsp%-agent: a turn is running") and last.message
  end)
  H.result.input_while_running = H.input_lines()
  H.feed("<C-c>")
  H.wait_chat_turn(1, "cancelled")
  H.feed("<CR>")
  H.wait_chat_turn(1, "completed")
  H.result.conversation = H.chat_lines()
end)
