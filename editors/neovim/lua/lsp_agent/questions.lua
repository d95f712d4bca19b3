--- The `window/showMessageRequest` handler: the agent's permission questions ("run this
--- command?") with the answers `Deny`, `Allow` and `Allow for this session`, in the order the
--- server sends them (the refusal first).
---
--- The question opens in a small floating window at the bottom right, without taking the
--- cursor, and waits (see decisions.lua). The user goes to it with `:LspAgent review` and answers
--- with `<CR>` on a choice; the cursor starts on the question, not on a choice, so a stray
--- `<CR>` answers nothing, and the choice under the cursor is marked, so that <CR> answers the
--- one the user sees. No `inputlist()`, `confirm()` or picker ever reads keys typed for a
--- buffer. When the server withdraws the question (`$/cancelRequest`: it timed out, the turn
--- ended), the window closes.
local compat = require("lsp_agent.compat")
local decisions = require("lsp_agent.decisions")
local highlights = require("lsp_agent.highlights")

local M = {}

local HINT = "j/k to a choice, <CR> answers · q closes (it still waits: :LspAgent review)"

local Question = {}
Question.__index = Question

--- Namespace of the mark on the choice under the cursor.
local MARK = vim.api.nvim_create_namespace("lsp_agent_question_mark")

--- The float's lines, the line of each choice, and the highlight of each line. The choices
--- follow the question directly, one a line, each named in full.
function Question:render()
  local lines, groups, choices = {}, {}, {}
  for _, line in ipairs(vim.split(self.message, "\n", { plain = true })) do
    lines[#lines + 1] = line
    groups[#lines] = "LspAgentQuestion"
  end
  for i, action in ipairs(self.actions) do
    lines[#lines + 1] = "    " .. tostring(action.title)
    groups[#lines] = "LspAgentChoice"
    choices[#lines] = i
  end
  lines[#lines + 1] = HINT
  groups[#lines] = "LspAgentHint"
  return lines, groups, choices
end

--- Mark the choice under the cursor (`▶`, highlighted, and what <CR> answers), so that the
--- answer is the one the user sees; nothing is marked while the cursor is on the question.
function Question:mark()
  if not (self.bufnr and vim.api.nvim_buf_is_valid(self.bufnr)) then
    return
  end
  vim.api.nvim_buf_clear_namespace(self.bufnr, MARK, 0, -1)
  local win = self.win
  if not (win and vim.api.nvim_win_is_valid(win)) then
    return
  end
  local line = vim.api.nvim_win_get_cursor(win)[1]
  local index = self.choices[line]
  self.marked = index
  if not index then
    return
  end
  vim.api.nvim_buf_set_extmark(self.bufnr, MARK, line - 1, 0, {
    virt_text = { { "  ▶ ", "LspAgentChoiceSelected" } },
    virt_text_pos = "overlay",
    end_row = line - 1,
    end_col = #self.lines[line],
    hl_group = "LspAgentChoiceSelected",
  })
  vim.api.nvim_buf_set_extmark(self.bufnr, MARK, line - 1, 0, {
    virt_text = { { "  <CR> answers this", "LspAgentHint" } },
    virt_text_pos = "eol",
  })
end

function Question:buffer()
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
  vim.bo[bufnr].bufhidden = "hide"
  vim.bo[bufnr].swapfile = false
  pcall(vim.api.nvim_buf_set_name, bufnr, ("lsp-agent://question/%d"):format(bufnr))
  local lines, groups, choices = self:render()
  self.lines, self.choices = lines, choices
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].modifiable = false
  highlights.apply(bufnr, groups)
  local function map(lhs, fn, desc)
    vim.keymap.set("n", lhs, fn, { buffer = bufnr, nowait = true, desc = "lsp-agent: " .. desc })
  end
  map("<CR>", function()
    self:choose_at_cursor()
  end, "answer with the choice under the cursor")
  map("q", function()
    pcall(vim.cmd, "close")
  end, "close; the question still waits")
  vim.api.nvim_create_autocmd("CursorMoved", {
    buffer = bufnr,
    desc = "lsp-agent: mark the choice under the cursor",
    callback = function()
      self:mark()
    end,
  })
  return bufnr
end

--- The float's size and place: the bottom right corner, above the command line.
function Question:layout()
  local width = 20
  for _, line in ipairs(self.lines) do
    width = math.max(width, vim.fn.strdisplaywidth(line) + 1)
  end
  -- At most half the screen (long lines wrap), so that less of the user's text is covered.
  width = math.min(width, math.max(40, math.floor(vim.o.columns / 2)), vim.o.columns - 4)
  local height = 0
  for _, line in ipairs(self.lines) do
    height = height + math.max(1, math.ceil(vim.fn.strdisplaywidth(line) / width))
  end
  height = math.min(height, vim.o.lines - vim.o.cmdheight - 4)
  return {
    relative = "editor",
    anchor = "SE",
    row = vim.o.lines - vim.o.cmdheight - 1,
    col = vim.o.columns,
    width = width,
    height = height,
    border = "rounded",
    style = "minimal",
    focusable = true,
    zindex = 60,
  }
end

--- Show the question. Without `focus` the cursor stays where it is (in insert mode too).
function Question:show(focus)
  local bufnr = self:buffer()
  if not (self.win and vim.api.nvim_win_is_valid(self.win)) then
    self.win = vim.api.nvim_open_win(bufnr, false, self:layout())
    vim.wo[self.win].wrap = true
    vim.wo[self.win].linebreak = true
  end
  if focus then
    self.previous_win = vim.api.nvim_get_current_win()
    vim.api.nvim_set_current_win(self.win)
    -- On the question, not on a choice: answering takes a move and a <CR>.
    vim.api.nvim_win_set_cursor(self.win, { 1, 0 })
  end
  self:mark()
end

function Question:close()
  local was_current = self.win ~= nil and self.win == vim.api.nvim_get_current_win()
  if self.win and vim.api.nvim_win_is_valid(self.win) then
    pcall(vim.api.nvim_win_close, self.win, true)
  end
  if self.bufnr and vim.api.nvim_buf_is_valid(self.bufnr) then
    pcall(vim.api.nvim_buf_delete, self.bufnr, { force = true })
  end
  if was_current and self.previous_win and vim.api.nvim_win_is_valid(self.previous_win) then
    vim.api.nvim_set_current_win(self.previous_win)
  end
end

--- Answer with `action` (nil: no answer, which the server counts as Deny).
function Question:decide(action)
  if self.decided then
    return
  end
  self.decided = true
  decisions.done(self)
  self.later.answer(action or vim.NIL)
end

function Question:withdraw()
  self:decide(nil)
end

function Question:choose_at_cursor()
  local index = self.choices[vim.api.nvim_win_get_cursor(0)[1]]
  if not index then
    vim.notify("lsp-agent: move to a choice (j/k), then <CR>", vim.log.levels.INFO)
    return
  end
  self:decide(self.actions[index])
end

--- Handler of `window/showMessageRequest` for the lsp-agent client.
function M.handler(_, params, ctx)
  local actions = params.actions
  local message = params.message or ""
  if type(actions) ~= "table" or #actions == 0 then
    vim.notify("lsp-agent: " .. message, vim.log.levels.WARN)
    return vim.NIL
  end
  local later = compat.answer_later()
  if not later then
    vim.notify(
      "lsp-agent: this Neovim cannot ask without blocking (update Neovim): denied: " .. message,
      vim.log.levels.ERROR
    )
    return vim.NIL
  end
  -- "a question (run `make` in the sandbox…)": the gist, short enough to announce.
  local gist = vim.split(message, "\n", { plain = true })[1]:gsub("^lsp%-agent wants to ", "")
  if vim.fn.strchars(gist) > 40 then
    gist = vim.fn.strcharpart(gist, 0, 39) .. "…"
  end
  local question = setmetatable({
    kind = "question",
    client_id = ctx.client_id,
    request_id = later.id,
    message = message,
    actions = actions,
    later = later,
    title = "a question (" .. gist .. ")",
  }, Question)
  decisions.add(question)
  return later.wait()
end

return M
