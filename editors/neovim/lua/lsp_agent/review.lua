--- The `workspace/applyEdit` handler: every edit the agent proposes is shown as a unified diff,
--- hunk by hunk, and applied only as far as the user accepts it. The answer tells the server
--- what really happened: `applied = false` with a reason when the user rejects the edit or when
--- the buffer changed after the edit was made.
---
--- On Neovim 0.10+ the handler runs in a coroutine: the review is an ordinary buffer with
--- buffer-local keys, and the handler yields until a key decides. Neovim 0.7 to 0.9 answer a
--- server request as soon as its handler returns, so there the review reads its keys itself
--- (modal, like `:s///c`) until the user decides.
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local state = require("lsp_agent.state")
local text = require("lsp_agent.text")
local workspace_edit = require("lsp_agent.workspace_edit")

local M = {}

--- Reviews on screen, so that a cancelled turn can close them.
--- @type table<table, boolean>
M.open = {}

--- Reviews waiting for the one on screen to be decided (coroutine mode shows one at a time).
local queue = {}
local showing = false

local HELP = {
  accept = "accept the ticked hunks",
  reject = "reject the edit (asks why)",
  toggle = "tick/untick the hunk under the cursor",
  next_hunk = "next hunk",
  prev_hunk = "previous hunk",
  quit = "reject without a reason",
  help = "show these keys",
}
local ORDER = { "accept", "reject", "toggle", "next_hunk", "prev_hunk", "quit", "help" }

local Review = {}
Review.__index = Review

--- @param params table ApplyWorkspaceEditParams
--- @param changes lsp_agent.FileChange[]
local function new_review(params, changes, client_id)
  local self = setmetatable({
    params = params,
    changes = changes,
    client_id = client_id,
    hunks = {}, -- {change = i, hunk = lsp_agent.Hunk, keep = true, line = header line}
    decision = nil,
  }, Review)
  for i, change in ipairs(changes) do
    for _, hunk in ipairs(change.hunks) do
      self.hunks[#self.hunks + 1] = { change = i, hunk = hunk, keep = true }
    end
  end
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

--- The review text: a header, then each file's diff with a mark on each hunk.
function Review:render()
  local lines = { "# " .. (self.params.label or "lsp-agent: edit") }
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
  for i, change in ipairs(self.changes) do
    local name = vim.fn.fnamemodify(change.path, ":~:.")
    lines[#lines + 1] = ""
    lines[#lines + 1] = ("diff --lsp-agent a/%s b/%s"):format(name, name)
    lines[#lines + 1] = change.create and "--- /dev/null" or ("--- a/" .. name)
    lines[#lines + 1] = "+++ b/" .. name
    for _, item in ipairs(self.hunks) do
      if item.change == i then
        item.line = #lines + 1
        lines[#lines + 1] = hunk_line(item)
        vim.list_extend(lines, item.hunk.lines)
      end
    end
  end
  return lines
end

local function set_lines(bufnr, first, last, lines)
  vim.bo[bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(bufnr, first, last, false, lines)
  vim.bo[bufnr].modifiable = false
end

--- Open the review window and put the cursor on the first hunk.
function Review:show()
  local answer = require("lsp_agent.answer")
  self.answer_float = answer.hide_float(state.get(self.client_id))
  self.previous_win = vim.api.nvim_get_current_win()
  local bufnr = vim.api.nvim_create_buf(false, true)
  self.bufnr = bufnr
  vim.bo[bufnr].buftype = "nofile"
  vim.bo[bufnr].bufhidden = "wipe"
  vim.bo[bufnr].swapfile = false
  pcall(vim.api.nvim_buf_set_name, bufnr, ("lsp-agent://review/%d"):format(bufnr))
  set_lines(bufnr, 0, -1, self:render())
  vim.bo[bufnr].filetype = "diff"
  -- Keys typed next belong to the review, not to the insert mode of another buffer.
  vim.cmd("stopinsert")
  local position = config.options.review.position
  local height = math.min(vim.api.nvim_buf_line_count(bufnr) + 1, math.floor(vim.o.lines * 0.6))
  if position == "tab" then
    vim.cmd("tab split")
  elseif position == "right" then
    vim.cmd("botright vsplit")
  else
    vim.cmd(("botright %dsplit"):format(math.max(height, 5)))
  end
  self.win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(self.win, bufnr)
  vim.wo[self.win].wrap = false
  vim.wo[self.win].number = false
  vim.wo[self.win].relativenumber = false
  if self.hunks[1] then
    vim.api.nvim_win_set_cursor(self.win, { self.hunks[1].line, 0 })
  end
  M.open[self] = true
  local entry = state.get(self.client_id)
  require("lsp_agent.answer").set_step(entry, "review")
  compat.user_event("LspAgentReview")
end

--- The hunk whose lines hold the cursor, or nil.
function Review:hunk_at_cursor()
  local line = vim.api.nvim_win_get_cursor(self.win)[1]
  local found
  for _, item in ipairs(self.hunks) do
    if item.line <= line and line <= item.line + #item.hunk.lines then
      found = item
    end
  end
  return found
end

function Review:toggle()
  local item = self:hunk_at_cursor()
  if not item then
    vim.notify("lsp-agent: put the cursor on a hunk to tick or untick it", vim.log.levels.INFO)
    return
  end
  item.keep = not item.keep
  set_lines(self.bufnr, item.line - 1, item.line, { hunk_line(item) })
end

function Review:jump(direction)
  local line = vim.api.nvim_win_get_cursor(self.win)[1]
  local target
  for _, item in ipairs(self.hunks) do
    if direction > 0 and item.line > line and not target then
      target = item.line
    elseif direction < 0 and item.line < line then
      target = item.line
    end
  end
  if target then
    vim.api.nvim_win_set_cursor(self.win, { target, 0 })
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

--- Record the decision and close the window; `on_decided` (coroutine mode) resumes the handler.
function Review:decide(decision)
  if self.decision then
    return
  end
  self.decision = decision
  M.open[self] = nil
  if self.win and vim.api.nvim_win_is_valid(self.win) then
    if #vim.api.nvim_list_wins() > 1 then
      pcall(vim.api.nvim_win_close, self.win, true)
    end
  end
  if self.bufnr and vim.api.nvim_buf_is_valid(self.bufnr) then
    pcall(vim.api.nvim_buf_delete, self.bufnr, { force = true })
  end
  if self.previous_win and vim.api.nvim_win_is_valid(self.previous_win) then
    vim.api.nvim_set_current_win(self.previous_win)
  end
  local entry = state.get(self.client_id)
  local answer = require("lsp_agent.answer")
  answer.set_step(entry, entry.running and "thinking" or nil)
  if self.answer_float then
    answer.show(entry, false)
  end
  if self.on_decided then
    self.on_decided()
  end
end

--- Ask why (optional), then reject. Cancelling the question goes back to the review.
function Review:reject()
  local prompt = "Why reject this edit? (optional) "
  local function rejected(reason)
    if reason == nil then
      return
    end
    reason = vim.trim(reason)
    self:decide({ accept = false, reason = reason ~= "" and reason or nil })
  end
  if self.modal then
    -- The modal loop would take the keys of an asynchronous vim.ui.input: ask in place.
    local cancelled = "\1lsp-agent: cancelled"
    local ok, reason = pcall(vim.fn.input, { prompt = prompt, cancelreturn = cancelled })
    rejected(ok and reason ~= cancelled and reason or nil)
  else
    vim.ui.input({ prompt = prompt }, rejected)
  end
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
    quit = function()
      self:decide({ accept = false })
    end,
    help = function()
      show_help()
      self.showing_help = true
    end,
  }
end

--- Coroutine mode: buffer-local keys; the handler yields until one of them decides.
function Review:wait_with_keys()
  local co = coroutine.running()
  self.on_decided = function()
    vim.schedule(function()
      coroutine.resume(co)
    end)
  end
  local actions = self:actions()
  for action, lhs in pairs(config.options.review.keys) do
    if actions[action] then
      vim.keymap.set(
        "n",
        lhs,
        actions[action],
        { buffer = self.bufnr, nowait = true, desc = "lsp-agent: " .. HELP[action] }
      )
    end
  end
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = self.bufnr,
    once = true,
    callback = function()
      -- Closing the review without a decision rejects the edit.
      vim.schedule(function()
        self:decide({ accept = false, reason = "the user closed the review without accepting" })
      end)
    end,
  })
  coroutine.yield()
end

--- Keys that start a longer motion (`gg`, `zz`, `]c`, counts).
local function incomplete_motion(keys)
  return keys:match("^%d*[gz%[%]]?$") ~= nil
end

--- Modal mode (Neovim < 0.10): read keys until one decides; other keys move in the review.
function Review:wait_modal()
  self.modal = true
  local actions = self:actions()
  local bindings = {}
  for action, lhs in pairs(config.options.review.keys) do
    bindings[vim.api.nvim_replace_termcodes(lhs, true, false, true)] = actions[action]
  end
  local escape = vim.api.nvim_replace_termcodes("<Esc>", true, false, true)
  local interrupt = vim.api.nvim_replace_termcodes("<C-c>", true, false, true)
  local pending = ""
  while not self.decision do
    if self.showing_help then
      self.showing_help = false -- leave the help on screen until the next key
    else
      vim.cmd("redraw")
      vim.api.nvim_echo({ { "lsp-agent review: " .. key_hint(), "Question" } }, false, {})
    end
    local ok, key = pcall(vim.fn.getchar)
    key = ok and (type(key) == "number" and vim.fn.nr2char(key) or key) or interrupt
    if key == interrupt then
      self:decide({ accept = false })
      break
    end
    pending = pending .. key
    local action = bindings[pending]
    local is_prefix = false
    for lhs in pairs(bindings) do
      if #lhs > #pending and lhs:sub(1, #pending) == pending then
        is_prefix = true
      end
    end
    if action then
      pending = ""
      action()
    elseif pending == escape then
      pending = ""
    elseif not is_prefix and not incomplete_motion(pending) then
      vim.api.nvim_win_call(self.win, function()
        pcall(vim.cmd, "normal! " .. pending)
      end)
      pending = ""
    end
  end
  vim.api.nvim_echo({ { "" } }, false, {})
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

--- Wait for our turn on screen (coroutine mode shows one review at a time).
local function take_screen()
  if showing then
    table.insert(queue, coroutine.running())
    coroutine.yield()
  end
  showing = true
end

local function leave_screen()
  local nxt = table.remove(queue, 1)
  if nxt then
    vim.schedule(function()
      coroutine.resume(nxt)
    end)
  else
    showing = false
  end
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
  local review = new_review(params, changes, ctx.client_id)
  if not workspace_edit.needs_confirmation(params.edit) then
    review.decision = { accept = true }
    return conclude(review, encoding)
  end
  if compat.can_yield() then
    take_screen()
    local ok, err = pcall(function()
      review:show()
      review:wait_with_keys()
    end)
    leave_screen()
    if not ok then
      review:decide({ accept = false })
      error(err)
    end
  else
    local ok, err = pcall(function()
      review:show()
      review:wait_modal()
    end)
    if not ok then
      review:decide({ accept = false })
      error(err)
    end
  end
  return conclude(review, encoding)
end

--- Reject every open review (the turn was cancelled or ended).
--- @param reason string
function M.dismiss_all(reason)
  for review in pairs(M.open) do
    review:decide({ accept = false, reason = reason })
  end
end

return M
