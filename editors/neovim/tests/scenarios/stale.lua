-- While the review is open, the user's buffer changes (they type): accepting then must not
-- apply the edit, and the server must hear `applied = false`, not Neovim's default `true`.
-- The server then merges its edit onto the typed text and sends it again for review.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  local hello = vim.api.nvim_get_current_buf()
  vim.cmd("LspAgent ask change the greeting")
  H.wait_review(1)
  vim.api.nvim_buf_set_lines(hello, 0, 0, false, { "# typed by the user" })
  H.feed("ga")
  H.wait_review(2)
  H.feed("ga")
  H.wait_turn()
  H.result.answer = H.answer_lines()
  H.result.hello_buffer = vim.api.nvim_buf_get_lines(hello, 0, -1, false)
end)
