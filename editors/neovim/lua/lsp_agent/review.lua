--- The `workspace/applyEdit` handler: every edit the agent proposes is shown as a unified diff,
--- hunk by hunk, and applied only as far as the user accepts it. The answer tells the server
--- what really happened: `applied = false` with a reason when the user rejects the edit or when
--- the buffer changed after the edit was made.
---
--- The review opens beside the user's window without taking the cursor, and waits (see
--- decisions.lua): the user goes to it with `:LspAgent review` and decides there with two-key
--- maps (`ga` accept, `gr` reject), which typing text does not produce.
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local decisions = require("lsp_agent.decisions")
local highlights = require("lsp_agent.highlights")
local inline = require("lsp_agent.inline")
local layout = require("lsp_agent.layout")
local state = require("lsp_agent.state")
local text = require("lsp_agent.text")
local workspace_edit = require("lsp_agent.workspace_edit")

local M = {}

local HELP = {
  accept = "accept the ticked hunks",
  reject = "reject the edit (asks why)",
  toggle = "tick/untick the hunk under the cursor",
  next_hunk = "next hunk",
  prev_hunk = "previous hunk",
  close = "close; the edit still waits (:LspAgent review)",
  help = "show these keys",
}
local ORDER = { "accept", "reject", "toggle", "next_hunk", "prev_hunk", "close", "help" }

local Review = {}
Review.__index = Review

--- @param params table ApplyWorkspaceEditParams
--- @param changes lsp_agent.FileChange[]
local function new_review(params, changes, client_id, request_id)
  local self = setmetatable({
    kind = "review",
    params = params,
    changes = changes,
    client_id = client_id,
    request_id = request_id,
    hunks = {}, -- {change = i, hunk = lsp_agent.Hunk, keep = true, line = header line}
    decision = nil,
  }, Review)
  local names = {}
  for i, change in ipairs(changes) do
    names[#names + 1] = vim.fn.fnamemodify(change.path, ":t")
    for _, hunk in ipairs(change.hunks) do
      self.hunks[#self.hunks + 1] = { change = i, hunk = hunk, keep = true }
    end
  end
  self.title = "an edit to " .. table.concat(names, ", ")
  return self
end

local function key_hint()
  local keys = config.options.review.keys
  local parts = {}
  for _, action in ipairs(ORDER) do
    parts[#parts + 1] = ("%s %s"):format(keys[action], (action:gsub("_hunk", "")))
  end
  return table.concat(parts, "  ")
end

--- A hunk's `@@` line with its mark: [x] applied on accept, [ ] left out.
local function hunk_line(item)
  return ("%s %s"):format(text.hunk_header(item.hunk), item.keep and "[x]" or "[ ]")
end

--- The review text: a header, then each file's diff with a mark on each hunk; and the
--- highlight group of each line.
function Review:render()
  local lines = { "# " .. (self.params.label or "lsp-agent: edit") }
  local groups = { [1] = "LspAgentReviewFile" }
  local description
  local annotations = self.params.edit.changeAnnotations
  if type(annotations) == "table" then
    for _, annotation in pairs(annotations) do
      description = description or annotation.description
    end
  end
  if description and description ~= vim.NIL then
    lines[#lines + 1] = "# " .. description
  end
  lines[#lines + 1] = "# " .. key_hint()
  groups[#lines] = "LspAgentHint"
  for i, change in ipairs(self.changes) do
    local name = vim.fn.fnamemodify(change.path, ":~:.")
    lines[#lines + 1] = ""
    vim.list_extend(lines, {
      ("diff --lsp-agent a/%s b/%s"):format(name, name),
      change.create and "--- /dev/null" or ("--- a/" .. name),
      "+++ b/" .. name,
    })
    for line = #lines - 2, #lines do
      groups[line] = "LspAgentReviewFile"
    end
    for _, item in ipairs(self.hunks) do
      if item.change == i then
        item.line = #lines + 1
        lines[#lines + 1] = hunk_line(item)
        groups[#lines] = "LspAgentReviewChange"
        for _, line in ipairs(item.hunk.lines) do
          lines[#lines + 1] = line
          local mark = line:sub(1, 1)
          if not item.keep then
            groups[#lines] = "LspAgentReviewSkipped"
          elseif mark == "+" then
            groups[#lines] = "LspAgentReviewAdd"
          elseif mark == "-" then
            groups[#lines] = "LspAgentReviewDelete"
          end
        end
      end
    end
  end
  return lines, groups
end

--- Write the review into its buffer.
function Review:draw()
  local lines, groups = self:render()
  vim.bo[self.bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(self.bufnr, 0, -1, false, lines)
  vim.bo[self.bufnr].modifiable = false
  highlights.apply(self.bufnr, groups)
end

--- The review buffer, made (again, if the user wiped it) with its keys.
function Review:buffer()
  if self.bufnr and vim.api.nvim_buf_is_loaded(self.bufnr) then
    return self.bufnr
  end
  -- Made anew if the user unloaded it (:bdelete): a scratch buffer's text is gone with it.
  if self.bufnr and vim.api.nvim_buf_is_valid(self.bufnr) then
    pcall(vim.api.nvim_buf_delete, self.bufnr, { force = true })
  end
  local bufnr = vim.api.nvim_create_buf(false, true)
  self.bufnr = bufnr
  vim.bo[bufnr].buftype = "nofile"
  -- Closing the window keeps the buffer: the edit still waits, `:LspAgent review` shows it.
  vim.bo[bufnr].bufhidden = "hide"
  vim.bo[bufnr].swapfile = false
  pcall(vim.api.nvim_buf_set_name, bufnr, ("lsp-agent://review/%d"):format(bufnr))
  self:draw()
  vim.bo[bufnr].filetype = "diff"
  -- The plugin colours every line itself (highlights.apply): the diff syntax would keep the
  -- red and green of a hunk the user unticked.
  vim.bo[bufnr].syntax = "OFF"
  local actions = self:actions()
  for action, lhs in pairs(config.options.review.keys) do
    if actions[action] then
      vim.keymap.set(
        "n",
        lhs,
        actions[action],
        { buffer = bufnr, nowait = true, desc = "lsp-agent: " .. HELP[action] }
      )
    end
  end
  return bufnr
end

--- Show the review. Without `focus` the cursor stays where it is (in insert mode too).
--- @param focus boolean
function Review:show(focus)
  local entry = state.get(self.client_id)
  local answer = require("lsp_agent.answer")
  if self.inline then
    self.key_actions = self.key_actions or self:actions()
    inline.show(self, focus)
    answer.set_step(entry, "review")
    return
  end
  local bufnr = self:buffer()
  if focus then
    self.previous_win = vim.api.nvim_get_current_win()
  end
  if not (self.win and vim.api.nvim_win_is_valid(self.win)) then
    local position = config.options.review.position
    if position == "tab" and not focus then
      return -- a tab page cannot open without being entered: the announcement says where
    end
    -- A floating answer window would cover the review.
    self.answer_float = answer.hide_float(entry) or self.answer_float
    local previous = vim.api.nvim_get_current_win()
    local work = position ~= "tab" and layout.work_window() or nil
    if work then
      -- Inside the column of the user's window: its rows, given back to it on close.
      self.sizes = layout.save()
      if position == "right" then
        local width = math.max(20, math.floor(vim.api.nvim_win_get_width(work) / 2))
        self.win = layout.split(work, bufnr, width, true)
      else
        local room = math.floor(vim.api.nvim_win_get_height(work) * 0.6)
        local height = math.min(vim.api.nvim_buf_line_count(bufnr) + 1, room)
        self.win = layout.split(work, bufnr, math.max(height, 3), false)
      end
    else
      vim.cmd(position == "tab" and "tab split" or "botright split")
      self.win = vim.api.nvim_get_current_win()
      vim.api.nvim_win_set_buf(self.win, bufnr)
    end
    vim.wo[self.win].wrap = false
    vim.wo[self.win].number = false
    vim.wo[self.win].relativenumber = false
    if self.hunks[1] then
      vim.api.nvim_win_set_cursor(self.win, { self.hunks[1].line, 0 })
    end
    if not focus and vim.api.nvim_win_is_valid(previous) then
      vim.api.nvim_set_current_win(previous)
    end
  end
  if focus then
    vim.api.nvim_set_current_win(self.win)
  end
  answer.set_step(entry, "review")
end

--- Close the review's window and buffer (the decision, if any, is elsewhere); every window
--- gets back the size it had before the review opened.
function Review:close()
  if self.inline then
    inline.close(self)
    return
  end
  local was_current = self.win ~= nil and self.win == vim.api.nvim_get_current_win()
  if self.win and vim.api.nvim_win_is_valid(self.win) then
    if #vim.api.nvim_list_wins() > 1 then
      pcall(vim.api.nvim_win_close, self.win, true)
    end
  end
  layout.restore(self.sizes)
  self.sizes = nil
  if self.bufnr and vim.api.nvim_buf_is_valid(self.bufnr) then
    pcall(vim.api.nvim_buf_delete, self.bufnr, { force = true })
  end
  -- Back to where the user came from, if they were in the review (and only then).
  if was_current and self.previous_win and vim.api.nvim_win_is_valid(self.previous_win) then
    vim.api.nvim_set_current_win(self.previous_win)
  end
  if self.answer_float then
    require("lsp_agent.answer").show(state.get(self.client_id), false)
  end
end

--- Close the review's window; the edit still waits (`:LspAgent review` shows it again).
function Review:hide()
  if self.inline then
    inline.hide(self)
    return
  end
  if self.win and vim.api.nvim_win_is_valid(self.win) and #vim.api.nvim_list_wins() > 1 then
    pcall(vim.api.nvim_win_close, self.win, true)
  end
  layout.restore(self.sizes)
  self.sizes = nil
end

--- The hunk whose lines hold the cursor, or nil.
function Review:hunk_at_cursor()
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local found
  for _, item in ipairs(self.hunks) do
    if item.line <= line and line <= item.line + #item.hunk.lines then
      found = item
    end
  end
  return found
end

function Review:toggle()
  local item = self.inline and inline.hunk_at_cursor(self) or self:hunk_at_cursor()
  if not item then
    vim.notify("lsp-agent: put the cursor on a hunk to tick or untick it", vim.log.levels.INFO)
    return
  end
  item.keep = not item.keep
  local cursor = vim.api.nvim_win_get_cursor(0)
  if self.inline then
    inline.draw(self)
  else
    self:draw()
  end
  vim.api.nvim_win_set_cursor(0, cursor)
end

function Review:jump(direction)
  if self.inline then
    inline.jump(self, direction)
    return
  end
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local target
  for _, item in ipairs(self.hunks) do
    if direction > 0 and item.line > line and not target then
      target = item.line
    elseif direction < 0 and item.line < line then
      target = item.line
    end
  end
  if target then
    vim.api.nvim_win_set_cursor(0, { target, 0 })
  end
end

local function show_help()
  local keys = config.options.review.keys
  local lines = {}
  for _, action in ipairs(ORDER) do
    lines[#lines + 1] = ("%-4s %s"):format(keys[action], HELP[action])
  end
  vim.api.nvim_echo({ { "lsp-agent review\n" .. table.concat(lines, "\n") } }, false, {})
end

--- Record the decision, close the review and answer the server.
function Review:decide(decision)
  if self.decision then
    return
  end
  self.decision = decision
  decisions.done(self)
  local entry = state.get(self.client_id)
  require("lsp_agent.answer").set_step(entry, entry.running and "thinking" or nil)
  self.on_decided()
end

--- Decide on the user's behalf: the turn ended, was cancelled, or the server withdrew the edit.
function Review:withdraw(reason)
  self:decide({ accept = false, reason = reason })
end

--- Ask why (optional), then reject. Cancelling the question goes back to the review.
function Review:reject()
  compat.flush_typeahead()
  vim.ui.input({ prompt = "Why reject this edit? (optional) " }, function(reason)
    if reason == nil then
      return
    end
    reason = vim.trim(reason)
    self:decide({ accept = false, reason = reason ~= "" and reason or nil })
  end)
end

--- The actions by key.
function Review:actions()
  return {
    accept = function()
      self:decide({ accept = true })
    end,
    reject = function()
      self:reject()
    end,
    toggle = function()
      self:toggle()
    end,
    next_hunk = function()
      self:jump(1)
    end,
    prev_hunk = function()
      self:jump(-1)
    end,
    close = function()
      self:hide()
    end,
    help = show_help,
  }
end

local function notify(message, level)
  vim.schedule(function()
    vim.notify("lsp-agent: " .. message, level or vim.log.levels.WARN)
  end)
end

--- Apply what the user kept and say what happened.
local function conclude(review, encoding)
  local decision = review.decision
  if not decision.accept then
    return { applied = false, failureReason = decision.reason }
  end
  local stale = workspace_edit.stale(review.changes)
  if stale then
    notify("the edit was not applied: " .. stale)
    return { applied = false, failureReason = stale .. ": nothing was applied" }
  end
  local keep = {}
  local kept = 0
  for _, item in ipairs(review.hunks) do
    if item.keep then
      keep[item.change] = keep[item.change] or {}
      table.insert(keep[item.change], item.hunk.edit)
      kept = kept + 1
    end
  end
  if kept == 0 and #review.hunks > 0 then
    return { applied = false, failureReason = "the user unticked every hunk" }
  end
  local ok, result, failures = pcall(workspace_edit.apply, review.changes, keep, encoding)
  if not ok then
    notify("applying the edit failed: " .. tostring(result), vim.log.levels.ERROR)
    return {
      applied = false,
      failureReason = "applying the edit failed in Neovim: " .. tostring(result),
    }
  end
  if #failures > 0 then
    notify("applied, but could not write: " .. table.concat(failures, "; "), vim.log.levels.ERROR)
  end
  return { applied = true }
end

--- Handler of `workspace/applyEdit` for the lsp-agent client.
function M.handler(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local encoding = client and client.offset_encoding or "utf-16"
  local changes, unsupported = workspace_edit.parse(params.edit or {})
  if not changes then
    notify(unsupported)
    return { applied = false, failureReason = unsupported }
  end
  workspace_edit.prepare(changes, encoding, config.options.review.context)
  local stale = workspace_edit.stale(changes)
  if stale then
    notify("an edit arrived for an older text and was not applied: " .. stale)
    return { applied = false, failureReason = stale }
  end
  if not workspace_edit.needs_confirmation(params.edit) then
    local review = new_review(params, changes, ctx.client_id)
    review.decision = { accept = true }
    return conclude(review, encoding)
  end
  local later = compat.answer_later()
  if not later then
    local why = "this Neovim cannot keep a review open without blocking: update Neovim"
    notify(why, vim.log.levels.ERROR)
    return { applied = false, failureReason = why }
  end
  local review = new_review(params, changes, ctx.client_id, later.id)
  -- In the real buffer when the user chose that and every file exists (a new file has no
  -- buffer to show it in: it is reviewed as a diff).
  review.inline = config.options.review.style == "inline" and inline.can_show(changes)
  review.on_decided = function()
    later.answer(conclude(review, encoding))
  end
  decisions.add(review)
  return later.wait()
end

return M
