-- The user types a line in the file while its review is open, then rejects the edit with a
-- reason: the rejection is final (no second review of the same edit opens) and the reason
-- reaches the model.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  local hello = vim.api.nvim_get_current_buf()
  vim.cmd("LspAgent ask change the greeting")
  H.wait_review(1)
  vim.api.nvim_buf_set_lines(hello, 0, 0, false, { "# typed by the user" })
  H.answer_input("keep the greeting<CR>")
  H.feed("gr")
  H.wait_turn()
  H.wait_for("the edit counts", function()
    return H.answer_has("_edits:")
  end)
  H.result.answer = H.answer_lines()
  H.result.hello_buffer = vim.api.nvim_buf_get_lines(hello, 0, -1, false)
end)
