--- Where the plugin's windows open, so that each gives its rows back where it took them.
---
--- A review opens inside the column of the window the user works in (a split of that window),
--- never as a split of the whole screen: a full-width split takes rows from every column, the
--- chat's too, and its rows go back to whichever window Vim picks when it closes (the chat's
--- input, which grew while the conversation shrank, review after review). What every window's
--- size was before is also put back when the review closes, if the same windows are there.
local M = {}

--- Below this width the answer and the chat open below the code, not beside it: a window of
--- 60 columns beside 80 would leave the code 20.
M.NARROW_COLUMNS = 100

--- True when the screen is too narrow for a window beside the code.
function M.narrow()
  return vim.o.columns <= M.NARROW_COLUMNS
end

--- True for a window of the user's: not floating, not one of the plugin's buffers.
--- @param win integer
function M.users(win)
  if not vim.api.nvim_win_is_valid(win) or vim.api.nvim_win_get_config(win).relative ~= "" then
    return false
  end
  local bufnr = vim.api.nvim_win_get_buf(win)
  local name = vim.api.nvim_buf_get_name(bufnr)
  return not name:match("^lsp%-agent://")
end

--- The window the user works in: the current one if it is theirs, else the one they were in
--- before, else the largest of theirs in this tab page; nil when there is none.
--- @return integer|nil
function M.work_window()
  local current = vim.api.nvim_get_current_win()
  if M.users(current) then
    return current
  end
  local previous = vim.fn.win_getid(vim.fn.winnr("#"))
  if previous ~= 0 and M.users(previous) then
    return previous
  end
  local best, area = nil, -1
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local size = vim.api.nvim_win_get_width(win) * vim.api.nvim_win_get_height(win)
    if M.users(win) and size > area then
      best, area = win, size
    end
  end
  return best
end

--- Open a window for `bufnr` below `win` (or beside it, right, when `vertical`) inside `win`'s
--- own column, without moving the cursor; its size is at most `size` rows (columns).
--- @return integer the new window
function M.split(win, bufnr, size, vertical)
  local new
  vim.api.nvim_win_call(win, function()
    vim.cmd(("belowright %d%s"):format(size, vertical and "vsplit" or "split"))
    new = vim.api.nvim_get_current_win()
  end)
  vim.api.nvim_win_set_buf(new, bufnr)
  return new
end

--- The windows of this tab page and their sizes, to put back later with `restore`.
--- @return table
function M.save()
  local wins = vim.api.nvim_tabpage_list_wins(0)
  table.sort(wins)
  return { tab = vim.api.nvim_get_current_tabpage(), wins = wins, cmd = vim.fn.winrestcmd() }
end

--- Put back the sizes `saved` recorded, when the same windows are there (a layout the user
--- changed since is theirs).
--- @param saved table|nil
function M.restore(saved)
  if not saved or vim.api.nvim_get_current_tabpage() ~= saved.tab then
    return
  end
  local wins = vim.api.nvim_tabpage_list_wins(0)
  table.sort(wins)
  if vim.deep_equal(wins, saved.wins) then
    pcall(vim.cmd, saved.cmd)
  end
end

return M
