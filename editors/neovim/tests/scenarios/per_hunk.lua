-- One edit changes two places of a file: the user unticks the second hunk, closes the review
-- (which decides nothing: it still waits, ticks kept), goes back to it and accepts, so only the
-- first change lands.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("LspAgent ask number the lines")
  H.wait_review(1)
  H.feed("]c")
  H.feed("t")
  H.wait_for("the second hunk unticked", function()
    local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    for _, line in ipairs(lines) do
      if line:match("^@@.*%[ %]$") then
        return true
      end
    end
    return false
  end)
  H.result.after_toggle = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  -- What colours each line of the unticked hunk: the syntax (none), and the plugin's group.
  local ns = require("lsp_agent.highlights").namespace
  H.result.unticked = {}
  local in_unticked = false
  for row, line in ipairs(H.result.after_toggle) do
    if line:match("^@@") then
      in_unticked = line:match("%[ %]$") ~= nil
    elseif in_unticked and line:match("^[+-]") then
      local marks = vim.api.nvim_buf_get_extmarks(0, ns, { row - 1, 0 }, { row - 1, -1 }, {
        details = true,
      })
      table.insert(H.result.unticked, {
        line = line,
        syntax = vim.fn.synIDattr(vim.fn.synID(row, 1, 1), "name"),
        group = marks[1] and marks[1][4].hl_group or "",
      })
    end
  end
  local review = H.current_decision()
  H.feed("q")
  H.wait_for("the review window closed", function()
    return not vim.api.nvim_win_is_valid(review.win)
  end)
  H.result.waiting_after_close = #require("lsp_agent.decisions").pending()
  H.go_to_decision("review")
  H.result.reopened = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  H.feed("ga")
  H.wait_turn()
  H.result.answer = H.answer_lines()
end)
