--- The inline review: an edit shown in the real buffer instead of a diff window
--- (`review.style = "inline"`, as avante.nvim and claudecode.nvim show theirs). The lines a hunk
--- removes are marked where they are, the lines it adds are shown below them as virtual lines,
--- and nothing in the buffer changes until the user accepts.
---
--- It is as safe to type around as the diff review: the marks appear without taking the cursor,
--- and the decision keys (`ga`, `gr`, `t`, `]c`, `[c`, `q`, `?`) exist in the buffer only once
--- the user went there with `:LspAgent review` (keys typed before are dropped), until they
--- decide or press `q`; typing in the buffer meanwhile makes the edit stale, and it is not
--- applied over the new text (review.lua's conclusion, as for the diff review).
local layout = require("lsp_agent.layout")

local M = {}

--- Namespace of the marks.
M.namespace = vim.api.nvim_create_namespace("lsp_agent_inline")

--- True when the edit can be shown in real buffers: every change edits a file that exists.
--- @param changes lsp_agent.FileChange[]
function M.can_show(changes)
  for _, change in ipairs(changes) do
    if change.create or vim.fn.filereadable(change.path) == 0 then
      return false
    end
  end
  return #changes > 0
end

--- The buffer of a change's file, loaded (hidden) if it was not.
local function buffer_of(change)
  local bufnr = vim.fn.bufadd(change.path)
  if not vim.api.nvim_buf_is_loaded(bufnr) then
    vim.fn.bufload(bufnr)
  end
  return bufnr
end

--- Where a hunk is in its buffer: the rows it removes, the row the added lines go after (-1:
--- above the first line), and the lines it adds.
local function geometry(hunk)
  local row = hunk.old_count > 0 and hunk.old_start - 1 or hunk.old_start
  local removed, added, first = {}, {}, nil
  local after = row - 1
  for _, line in ipairs(hunk.lines) do
    local mark, body = line:sub(1, 1), line:sub(2)
    if mark == " " then
      row = row + 1
      if #removed == 0 and #added == 0 then
        after = row - 1
      end
    elseif mark == "-" then
      removed[#removed + 1] = row
      first = first or row
      after = row
      row = row + 1
    else
      added[#added + 1] = body
      first = first or (after + 1)
    end
  end
  return { removed = removed, added = added, after = after, first = first or math.max(after, 0) }
end

--- Draw the marks of every hunk (again: after a toggle).
--- @param review table the review (review.lua)
function M.draw(review)
  local total = #review.hunks
  for _, bufnr in pairs(review.inline_bufs or {}) do
    if vim.api.nvim_buf_is_valid(bufnr) then
      vim.api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
    end
  end
  review.inline_bufs = review.inline_bufs or {}
  for number, item in ipairs(review.hunks) do
    local change = review.changes[item.change]
    local bufnr = review.inline_bufs[item.change] or buffer_of(change)
    review.inline_bufs[item.change] = bufnr
    local where = geometry(item.hunk)
    item.row = where.first
    local count = vim.api.nvim_buf_line_count(bufnr)
    local removed_group = item.keep and "LspAgentInlineDelete" or "LspAgentReviewSkipped"
    for _, row in ipairs(where.removed) do
      if row < count then
        local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
        vim.api.nvim_buf_set_extmark(bufnr, M.namespace, row, 0, {
          end_row = row,
          end_col = #line,
          hl_group = removed_group,
          hl_eol = true,
          priority = 200,
        })
      end
    end
    local added_group = item.keep and "LspAgentInlineAdd" or "LspAgentReviewSkipped"
    local virt = vim.tbl_map(function(line)
      return { { line == "" and " " or line, added_group } }
    end, where.added)
    local header = {
      {
        ("  lsp-agent: hunk %d/%d %s · :LspAgent review"):format(
          number,
          total,
          item.keep and "[x]" or "[ ]"
        ),
        "LspAgentHint",
      },
    }
    local anchor = math.min(math.max(where.first, 0), math.max(count - 1, 0))
    vim.api.nvim_buf_set_extmark(bufnr, M.namespace, anchor, 0, {
      virt_text = header,
      virt_text_pos = "eol",
    })
    if #virt > 0 then
      if where.after < 0 then
        vim.api.nvim_buf_set_extmark(bufnr, M.namespace, 0, 0, {
          virt_lines = virt,
          virt_lines_above = true,
        })
      else
        vim.api.nvim_buf_set_extmark(bufnr, M.namespace, math.min(where.after, count - 1), 0, {
          virt_lines = virt,
        })
      end
    end
  end
end

--- The buffer of hunk `item`.
local function hunk_buffer(review, item)
  return review.inline_bufs and review.inline_bufs[item.change]
end

--- The hunk under the cursor (its rows, or the row its lines are added after), or nil.
function M.hunk_at_cursor(review)
  local bufnr = vim.api.nvim_get_current_buf()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, item in ipairs(review.hunks) do
    if hunk_buffer(review, item) == bufnr then
      local where = geometry(item.hunk)
      local last = math.max(where.first, where.removed[#where.removed] or where.after)
      if where.first <= row and row <= last then
        return item
      end
    end
  end
  return nil
end

--- Put the cursor on hunk `item`, in its buffer (shown in the current window if it is not).
local function go_to(review, item)
  local bufnr = hunk_buffer(review, item)
  if vim.api.nvim_get_current_buf() ~= bufnr then
    vim.api.nvim_win_set_buf(0, bufnr)
    M.map(review, bufnr)
  end
  local count = vim.api.nvim_buf_line_count(bufnr)
  vim.api.nvim_win_set_cursor(0, { math.min(item.row, count - 1) + 1, 0 })
end

--- Move to the next (`direction` 1) or previous (-1) hunk, across the edit's files.
function M.jump(review, direction)
  local current = M.hunk_at_cursor(review)
  local index = 0
  for i, item in ipairs(review.hunks) do
    if item == current then
      index = i
    end
  end
  if index == 0 then
    -- Between hunks: the first one below the cursor, or above it.
    local row = vim.api.nvim_win_get_cursor(0)[1] - 1
    local bufnr = vim.api.nvim_get_current_buf()
    for i, item in ipairs(review.hunks) do
      if hunk_buffer(review, item) == bufnr and item.row > row and index == 0 then
        index = direction > 0 and i - 1 or i
      end
    end
  end
  local target = review.hunks[index + direction]
  if target then
    go_to(review, target)
  end
end

--- Map the decision keys in `bufnr` for the time of the review (its own maps there are put back
--- afterwards).
function M.map(review, bufnr)
  review.mapped = review.mapped or {}
  if review.mapped[bufnr] then
    return
  end
  local saved = {}
  for action, lhs in pairs(require("lsp_agent.config").options.review.keys) do
    local handler = review.key_actions[action]
    if handler then
      local existing = vim.fn.maparg(lhs, "n", false, true)
      if type(existing) == "table" and existing.buffer == 1 then
        saved[lhs] = existing
      end
      vim.keymap.set("n", lhs, handler, {
        buffer = bufnr,
        nowait = true,
        desc = "lsp-agent: " .. action .. " (the inline review)",
      })
    end
  end
  review.mapped[bufnr] = saved
end

--- Remove the decision keys from every buffer, putting back what they replaced.
function M.unmap(review)
  for bufnr, saved in pairs(review.mapped or {}) do
    if vim.api.nvim_buf_is_valid(bufnr) then
      for _, lhs in pairs(require("lsp_agent.config").options.review.keys) do
        pcall(vim.keymap.del, "n", lhs, { buffer = bufnr })
        local old = saved[lhs]
        if old then
          vim.keymap.set("n", lhs, old.callback or old.rhs, {
            buffer = bufnr,
            silent = old.silent == 1,
            expr = old.expr == 1,
            nowait = old.nowait == 1,
            remap = old.noremap == 0,
            desc = old.desc,
          })
        end
      end
    end
  end
  review.mapped = {}
end

--- Show the marks; with `focus`, go to the first hunk and map the decision keys there.
function M.show(review, focus)
  if not review.inline_bufs then
    M.draw(review)
  end
  if not focus then
    return
  end
  local first = review.hunks[1]
  if not first then
    return
  end
  local bufnr = hunk_buffer(review, first)
  local shown = vim.fn.bufwinid(bufnr)
  if shown ~= -1 then
    vim.api.nvim_set_current_win(shown)
  else
    local work = layout.work_window() or vim.api.nvim_get_current_win()
    review.restore = { win = work, buf = vim.api.nvim_win_get_buf(work), to = bufnr }
    vim.api.nvim_set_current_win(work)
    vim.api.nvim_win_set_buf(work, bufnr)
  end
  M.map(review, bufnr)
  go_to(review, first)
  review.win = vim.api.nvim_get_current_win()
end

--- Leave the review for later: the keys go, the marks stay.
function M.hide(review)
  M.unmap(review)
  review.win = nil
end

--- The review is over: marks and keys go, and a window switched to the file gets back the
--- buffer it showed.
function M.close(review)
  M.unmap(review)
  for _, bufnr in pairs(review.inline_bufs or {}) do
    if vim.api.nvim_buf_is_valid(bufnr) then
      vim.api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
    end
  end
  local back = review.restore
  if
    back
    and vim.api.nvim_win_is_valid(back.win)
    and vim.api.nvim_buf_is_valid(back.buf)
    and vim.api.nvim_win_get_buf(back.win) == back.to
  then
    vim.api.nvim_win_set_buf(back.win, back.buf)
  end
  review.restore, review.win = nil, nil
end

return M
