-- After :LspAgent restart, the next question goes to a new server and its answer to the same
-- answer buffer and window: no second answer window.
local H = require("harness")

local function answer_windows()
  local found = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local name = vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))
    if name:match("lsp%-agent://answer") then
      found[#found + 1] = { win = win, buf = vim.api.nvim_win_get_buf(win) }
    end
  end
  return found
end

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  vim.cmd("LspAgent ask one")
  H.wait_turn("completed", 1)
  local before = answer_windows()
  local server = next(require("lsp_agent.state").clients)
  vim.cmd("LspAgent restart")
  vim.cmd("LspAgent ask two")
  H.wait_turn("completed", 2)
  local after = answer_windows()
  H.result.windows_before, H.result.windows_after = #before, #after
  H.result.same_window = before[1].win == after[1].win and before[1].buf == after[1].buf
  H.result.new_server = next(require("lsp_agent.state").clients) ~= server
  H.result.answer = H.answer_lines()
end)
