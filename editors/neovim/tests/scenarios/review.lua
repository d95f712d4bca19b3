-- The agent proposes three edits: the user goes to each review (:LspAgent review), accepts an
-- edit to an open file and the creation of a new one with `ga`, and rejects an edit to a third
-- file with `gr` and a reason.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  vim.cmd("LspAgent ask tidy up")

  H.wait_review(1)
  H.feed("ga")
  H.wait_review(2)
  H.feed("ga")
  H.wait_review(3)
  H.answer_input("keep other.py as it is<CR>")
  H.feed("gr")

  H.wait_turn()
  H.wait_for("the edit counts", function()
    return H.answer_has("_edits:")
  end)
  H.result.answer = H.answer_lines()
  local hello = vim.fn.bufnr("hello.py")
  H.result.hello_buffer = vim.api.nvim_buf_get_lines(hello, 0, -1, false)
  H.result.hello_modified = vim.bo[hello].modified
  H.result.windows = #vim.api.nvim_list_wins()
  H.result.current_buffer = vim.fn.expand("%:t")
end)
