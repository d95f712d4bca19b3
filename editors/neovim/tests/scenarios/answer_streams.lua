-- The user asks from a file; the answer streams into the answer buffer while the statusline
-- says the agent is working, and the turn ends with its status.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  vim.cmd("LspAgent ask say hello")
  H.wait_for("the first streamed chunk", function()
    return H.answer_has("Hello")
  end)
  H.result.streaming_answer = H.answer_lines()
  H.result.status_while_running = require("lsp_agent").status()
  H.wait_turn()
  H.result.answer = H.answer_lines()
  H.result.status_after = require("lsp_agent").status()
  H.result.answer_window_shown = vim.fn.bufwinnr("lsp-agent://answer") ~= -1
  H.result.current_buffer = vim.fn.expand("%:t")
  H.result.answer_filetype = vim.bo[vim.fn.bufnr("lsp-agent://answer")].filetype
  H.result.answer_buftype = vim.bo[vim.fn.bufnr("lsp-agent://answer")].buftype
end)
