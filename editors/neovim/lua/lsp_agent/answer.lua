--- The answer buffer: a markdown scratch buffer that shows each question, the answer as it
--- streams in (`lspAgent/event` text), one line per tool call, and how the turn ended.
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local state = require("lsp_agent.state")

local M = {}

--- Tool arguments worth showing, in this order, before falling back to the whole object.
local SHOWN_ARGUMENTS = { "path", "pattern", "command", "name", "glob" }

--- Mark a change in what the running turn does: statusline and `User LspAgentStatus`.
--- @param entry lsp_agent.ClientState
--- @param step string|nil
function M.set_step(entry, step)
  if entry.step == step then
    return
  end
  entry.step = step
  pcall(vim.cmd, "redrawstatus!")
  compat.user_event("LspAgentStatus")
end

--- The answer buffer of a client's workspace, created on first use. It belongs to the root, not
--- to the server, so that a restarted server writes on in the same buffer and window.
--- @param entry lsp_agent.ClientState
--- @return integer
local function buffer(entry)
  local existing = state.answer_bufs[entry.root]
  if existing and vim.api.nvim_buf_is_valid(existing) then
    return existing
  end
  local bufnr = vim.api.nvim_create_buf(false, true)
  local name = "lsp-agent://answer"
  if vim.fn.bufnr(name) ~= -1 then
    name = name .. "/" .. vim.fn.fnamemodify(entry.root, ":t")
  end
  pcall(vim.api.nvim_buf_set_name, bufnr, name)
  vim.bo[bufnr].buftype = "nofile"
  vim.bo[bufnr].bufhidden = "hide"
  vim.bo[bufnr].swapfile = false
  vim.bo[bufnr].modifiable = false
  vim.bo[bufnr].filetype = "markdown"
  vim.keymap.set("n", "q", "<cmd>close<CR>", { buffer = bufnr, nowait = true, desc = "close" })
  state.answer_bufs[entry.root] = bufnr
  return bufnr
end

--- Windows of the current tab page that show `bufnr`.
local function windows_of(bufnr)
  local found = {}
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == bufnr then
      found[#found + 1] = win
    end
  end
  return found
end

--- Show the answer buffer (if it is not shown already); returns its window.
--- @param entry lsp_agent.ClientState
--- @param focus boolean|nil move the cursor there
function M.show(entry, focus)
  local bufnr = buffer(entry)
  local win = windows_of(bufnr)[1]
  if not win then
    local options = config.options.answer
    local previous = vim.api.nvim_get_current_win()
    if options.position == "float" then
      local width = options.size or math.floor(vim.o.columns * 0.8)
      local height = math.floor(vim.o.lines * 0.8)
      win = vim.api.nvim_open_win(bufnr, true, {
        relative = "editor",
        width = width,
        height = height,
        row = math.floor((vim.o.lines - height) / 2),
        col = math.floor((vim.o.columns - width) / 2),
        border = "rounded",
        style = "minimal",
      })
    elseif options.position == "bottom" then
      vim.cmd(("botright %dsplit"):format(options.size or math.floor(vim.o.lines * 0.35)))
      win = vim.api.nvim_get_current_win()
      vim.api.nvim_win_set_buf(win, bufnr)
    else
      vim.cmd(
        ("botright %dvsplit"):format(options.size or math.max(60, math.floor(vim.o.columns * 0.4)))
      )
      win = vim.api.nvim_get_current_win()
      vim.api.nvim_win_set_buf(win, bufnr)
    end
    vim.wo[win].wrap = true
    vim.wo[win].linebreak = true
    vim.wo[win].number = false
    vim.wo[win].relativenumber = false
    -- A window opened on the answer shows its end, and follows it from there.
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(bufnr), 0 })
    if not focus and vim.api.nvim_win_is_valid(previous) then
      vim.api.nvim_set_current_win(previous)
    end
  elseif focus then
    vim.api.nvim_set_current_win(win)
  end
  return win
end

--- Close the floating windows that show the answer (a review must not be hidden under one).
--- Returns true if one was closed.
--- @param entry lsp_agent.ClientState
function M.hide_float(entry)
  local closed = false
  local bufnr = state.answer_bufs[entry.root]
  if bufnr and vim.api.nvim_buf_is_valid(bufnr) then
    for _, win in ipairs(windows_of(bufnr)) do
      if vim.api.nvim_win_get_config(win).relative ~= "" then
        vim.api.nvim_win_close(win, true)
        closed = true
      end
    end
  end
  return closed
end

--- The buffer's text as one list of lines.
function M.lines(entry)
  local bufnr = buffer(entry)
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

--- Windows (in every tab page) that follow the end of `bufnr`: their cursor is on its last line.
--- Scrolling up moves the cursor off it, and the window stops following; `G` resumes.
local function following(bufnr)
  local last = vim.api.nvim_buf_line_count(bufnr)
  local found = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == bufnr and vim.api.nvim_win_get_cursor(win)[1] >= last then
      found[#found + 1] = win
    end
  end
  return found
end

--- Move the cursor of `wins` to the last line of `bufnr`, which scrolls them to the end.
local function to_end(bufnr, wins)
  local last = vim.api.nvim_buf_line_count(bufnr)
  for _, win in ipairs(wins) do
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == bufnr then
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
end

--- Change the buffer with `fn(bufnr)`, keeping the windows that follow its end following it.
local function edit(entry, fn)
  local bufnr = buffer(entry)
  local wins = following(bufnr)
  vim.bo[bufnr].modifiable = true
  fn(bufnr)
  vim.bo[bufnr].modifiable = false
  to_end(bufnr, wins)
end

--- Append whole lines, after a blank line when `paragraph` and the buffer does not end in one.
local function append_lines(entry, lines, paragraph)
  edit(entry, function(bufnr)
    local count = vim.api.nvim_buf_line_count(bufnr)
    local last = vim.api.nvim_buf_get_lines(bufnr, count - 1, count, false)[1]
    local empty_buffer = count == 1 and last == ""
    if paragraph and not empty_buffer and last ~= "" then
      table.insert(lines, 1, "")
    end
    if empty_buffer then
      vim.api.nvim_buf_set_lines(bufnr, 0, 1, false, lines)
    else
      vim.api.nvim_buf_set_lines(bufnr, count, count, false, lines)
    end
  end)
  entry.in_text = false
end

--- Append streamed text where the last chunk stopped.
local function append_text(entry, chunk)
  if not entry.in_text then
    append_lines(entry, { "" }, true)
    entry.in_text = true
  end
  edit(entry, function(bufnr)
    local count = vim.api.nvim_buf_line_count(bufnr)
    local last = vim.api.nvim_buf_get_lines(bufnr, count - 1, count, false)[1]
    local pieces = vim.split(chunk, "\n", { plain = true })
    pieces[1] = last .. pieces[1]
    vim.api.nvim_buf_set_lines(bufnr, count - 1, count, false, pieces)
  end)
end

--- A tool call's arguments in one short line.
local function describe_arguments(args)
  if type(args) ~= "table" then
    return args ~= nil and tostring(args) or ""
  end
  for _, key in ipairs(SHOWN_ARGUMENTS) do
    if type(args[key]) == "string" then
      local value = args[key]:gsub("\n", " ")
      return #value > 80 and (value:sub(1, 77) .. "...") or value
    end
  end
  local ok, encoded = pcall(vim.json.encode, args)
  encoded = ok and encoded or ""
  return #encoded > 80 and (encoded:sub(1, 77) .. "...") or encoded
end

--- Start a new question in the buffer and show it.
--- @param entry lsp_agent.ClientState
--- @param prompt string
--- @param where string|nil what the user pointed at ("hello.py, lines 2-4")
function M.begin(entry, prompt, where)
  local lines = {}
  for i, line in ipairs(vim.split(prompt, "\n", { plain = true })) do
    lines[#lines + 1] = (i == 1 and "## " or "   ") .. line
  end
  if where then
    lines[#lines + 1] = "_(" .. where .. ")_"
  end
  append_lines(entry, lines, true)
  local win = M.show(entry, config.options.answer.focus)
  -- A new question is read from its heading down: every window of the buffer follows again.
  to_end(buffer(entry), vim.list_extend({ win }, vim.api.nvim_list_wins()))
end

--- A line of its own, e.g. "new session ...".
function M.note(entry, line)
  append_lines(entry, { line }, true)
end

local STEP_OF = {
  text = "writing",
  compaction = "compacting the context",
}

--- Handler of `lspAgent/event`: one step of a turn.
function M.on_event(_, event, ctx)
  if type(event) ~= "table" then
    return
  end
  local entry = state.get(ctx.client_id)
  if entry.running and not entry.running.session then
    entry.running.session = event.session
  end
  if not entry.session then
    entry.session = event.session
  end
  local kind = event.kind
  if kind == "text" then
    append_text(entry, event.text or "")
  elseif kind == "tool" then
    append_lines(
      entry,
      { ("- `%s` %s"):format(event.name, describe_arguments(event.args)) },
      entry.in_text
    )
    M.set_step(entry, event.name)
    return
  elseif kind == "toolResult" then
    append_lines(
      entry,
      { ("  %s %s"):format(event.ok and "✓" or "✗", event.summary or "") },
      false
    )
  elseif kind == "permission" then
    append_lines(entry, { ("  permission for %s: %s"):format(event.name, event.decision) }, false)
  elseif kind == "compaction" then
    append_lines(entry, {
      ("_context compacted (%s): %s → %s tokens_"):format(
        event.strategy,
        event.before,
        event.after
      ),
    }, true)
  elseif kind == "start" then
    -- The first event of a turn: a conversation continued from before is said, not silent.
    if event.continuing then
      local message = type(event.message) == "string" and event.message
        or ("continuing session %s, %s turns — `:LspAgent new` for a fresh one"):format(
          tostring(event.session),
          tostring(event.turns)
        )
      append_lines(entry, { "_" .. message .. "_" }, false)
    end
  elseif kind == "usage" then
    entry.usage = event
    return
  elseif kind == "question" then
    require("lsp_agent.decisions").on_question_event(ctx.client_id, event)
    local ended = ({
      timedOut = "  no answer in time for %s: denied",
      withdrawn = "  the question for %s was withdrawn",
    })[event.state]
    if ended then
      append_lines(entry, { ended:format(tostring(event.name)) }, false)
    end
    M.set_step(entry, event.state == "open" and "waiting for your answer" or "thinking")
    return
  elseif kind == "status" then
    local line = "_" .. tostring(event.status) .. "_"
    if event.error then
      line = ("**%s**: %s"):format(event.status, event.error)
    end
    append_lines(entry, { line }, true)
    entry.status_shown = true
    -- The turn is over even if its `lspAgent.ask` answer never comes (a cancelled request).
    entry.running = nil
    M.set_step(entry, nil)
    return
  end
  M.set_step(entry, STEP_OF[kind] or "thinking")
end

--- The `lspAgent.ask` answer arrived (or failed): close the question in the buffer.
--- @param entry lsp_agent.ClientState
function M.finish(entry, err, result)
  if err then
    append_lines(entry, { "**error**: " .. (err.message or tostring(err)) }, true)
  elseif type(result) == "table" then
    if not entry.status_shown then
      append_lines(entry, { "_" .. tostring(result.status) .. "_" }, true)
    end
    local edits = result.edits
    if type(edits) == "table" and (edits.proposed or 0) > 0 then
      append_lines(entry, {
        ("_edits: %d proposed, %d applied, %d rejected_"):format(
          edits.proposed,
          edits.applied,
          edits.rejected
        ),
      }, false)
    end
  end
  entry.status_shown = false
  M.set_step(entry, nil)
end

--- The server process ended; say so if a turn was running.
function M.server_exited(client_id, code, signal)
  local entry = state.clients[client_id]
  if not entry then
    return
  end
  if entry.running then
    append_lines(
      entry,
      { ("**the server exited** (code %s, signal %s)"):format(code, signal) },
      true
    )
    entry.running = nil
  end
  M.set_step(entry, nil)
end

return M
