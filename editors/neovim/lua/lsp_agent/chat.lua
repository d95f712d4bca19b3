--- The chat: `:LspAgent chat` shows the conversation of the current session in a read-only
--- Markdown buffer (its history from `lspAgent.history`, then each turn as it streams), and a
--- small input buffer below it where the user writes the next prompt.
---
--- Typing in the input is only text: the one insert-mode key is `<C-s>` (send); `<CR>` sends in
--- normal mode. A prompt goes to the server with `lspAgent.start` in the shown session, with the
--- selection added by `:'<,'>LspAgent chat`; reviews and questions open beside it as everywhere
--- (decisions.lua). The input's statusline says what runs or waits; the conversation's, the
--- tokens used and the context's fill.
local client = require("lsp_agent.client")
local config = require("lsp_agent.config")
local decisions = require("lsp_agent.decisions")
local layout = require("lsp_agent.layout")
local protocol = require("lsp_agent.protocol")
local references = require("lsp_agent.references")
local render = require("lsp_agent.render")
local selection = require("lsp_agent.selection")
local state = require("lsp_agent.state")

local M = {}

local function notify(message, level)
  vim.notify("lsp-agent: " .. message, level or vim.log.levels.INFO)
end

local function valid(bufnr)
  return bufnr ~= nil and vim.api.nvim_buf_is_valid(bufnr)
end

--- Highlight the buffer as Markdown with Tree-sitter where Neovim has the parser (0.8+ with
--- `markdown`), else with the `markdown` syntax the filetype brings. Recorded in
--- `b:lsp_agent_highlight` ("treesitter" or "syntax").
local function highlight(bufnr)
  local started = vim.treesitter.start ~= nil and pcall(vim.treesitter.start, bufnr, "markdown")
  vim.b[bufnr].lsp_agent_highlight = started and "treesitter" or "syntax"
end

--- A scratch buffer of the chat.
local function scratch(name, root, modifiable)
  local bufnr = vim.api.nvim_create_buf(false, true)
  if vim.fn.bufnr(name) ~= -1 then
    name = name .. "/" .. vim.fn.fnamemodify(root, ":t")
  end
  pcall(vim.api.nvim_buf_set_name, bufnr, name)
  vim.bo[bufnr].buftype = "nofile"
  vim.bo[bufnr].bufhidden = "hide"
  vim.bo[bufnr].swapfile = false
  vim.bo[bufnr].filetype = "markdown"
  vim.bo[bufnr].modifiable = modifiable
  vim.b[bufnr][client.ROOT_VAR] = root
  highlight(bufnr)
  return bufnr
end

--- The chat whose conversation or input is `bufnr`, if any.
--- @return lsp_agent.Chat|nil
local function chat_of(bufnr)
  for _, chat in pairs(state.chats) do
    if chat.conversation == bufnr or chat.input == bufnr then
      return chat
    end
  end
  return nil
end

--- The running server of the chat's workspace (started when `create`), and its state.
local function server(chat, create)
  local id = client.for_root(chat.root, create)
  return id, id and state.get(id) or nil
end

local function map_keys(chat)
  local keys = config.options.chat.keys
  local function map(mode, bufnr, lhs, fn, desc)
    vim.keymap.set(mode, lhs, fn, { buffer = bufnr, nowait = true, desc = "lsp-agent: " .. desc })
  end
  local function to_input()
    M.focus_input(chat, true)
  end
  map("n", chat.input, keys.send, function()
    M.send(chat)
  end, "send the prompt")
  map("i", chat.input, keys.send_insert, function()
    M.send(chat)
  end, "send the prompt")
  for _, bufnr in ipairs({ chat.input, chat.conversation }) do
    map("n", bufnr, keys.cancel, function()
      require("lsp_agent").cancel()
    end, "cancel the running turn")
    map("n", bufnr, keys.review, function()
      decisions.focus()
    end, "go to the edit or question that waits")
  end
  map("n", chat.conversation, keys.close, function()
    M.close(chat)
  end, "close the chat")
  map("n", chat.conversation, keys.input, to_input, "write in the chat input")
end

--- The chat of `root`, made (again, for a buffer the user wiped) on first use.
--- @param root string
--- @return lsp_agent.Chat
local function chat_for(root)
  local chat = state.chats[root]
  if chat and valid(chat.conversation) and valid(chat.input) then
    return chat
  end
  chat = chat or { root = root }
  if not valid(chat.conversation) then
    chat.conversation = scratch("lsp-agent://chat", root, false)
    chat.loaded = false -- drawn again from the history
  end
  if not valid(chat.input) then
    chat.input = scratch("lsp-agent://chat-input", root, true)
    -- <C-x><C-o> completes #buffer and #file:path (references.lua).
    vim.bo[chat.input].omnifunc = "v:lua.require'lsp_agent.chat'.omnifunc"
  end
  state.chats[root] = chat
  map_keys(chat)
  return chat
end

--- True when the chat of `root` is on screen in the current tab page.
--- @param root string
function M.visible(root)
  local chat = state.chats[root]
  return chat ~= nil and valid(chat.conversation) and #render.windows(chat.conversation) > 0
end

--- A window's 'statusline': a function of this module with the buffer and the window (whose
--- width it fits).
local function statusline_of(kind, bufnr, win)
  return ("%%{v:lua.require'lsp_agent.chat'.%s(%d,%d)}"):format(kind, bufnr, win)
end

--- Set window options for the buffer the window shows now (`:setlocal`): another buffer shown
--- in that window later gets the usual values, not the chat's statusline.
local function set_local(win, options)
  vim.api.nvim_win_call(win, function()
    for name, value in pairs(options) do
      vim.opt_local[name] = value
    end
  end)
end

--- Open the chat's windows (where they are not open) and put the cursor in the input.
local function show(chat)
  local options = config.options.chat
  local conversation_win = render.windows(chat.conversation)[1]
  local input_win = render.windows(chat.input)[1]
  if not conversation_win then
    if input_win then
      vim.api.nvim_set_current_win(input_win)
      vim.cmd(("aboveleft %dsplit"):format(math.max(3, math.floor(vim.o.lines * 0.3))))
    elseif options.position == "tab" then
      vim.cmd("tab split")
    elseif options.position == "bottom" or (not options.size and layout.narrow()) then
      vim.cmd(("botright %dsplit"):format(options.size or math.floor(vim.o.lines * 0.45)))
    else
      vim.cmd(
        ("botright %dvsplit"):format(options.size or math.max(60, math.floor(vim.o.columns * 0.4)))
      )
    end
    conversation_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(conversation_win, chat.conversation)
    set_local(conversation_win, {
      wrap = true,
      linebreak = true,
      number = false,
      relativenumber = false,
      statusline = statusline_of("title", chat.conversation, conversation_win),
    })
    -- Opened at the end, and following it from there (render.lua).
    render.to_end(chat.conversation, { conversation_win })
  end
  if not input_win then
    vim.api.nvim_set_current_win(conversation_win)
    vim.cmd(("belowright %dsplit"):format(options.input_height))
    input_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(input_win, chat.input)
    set_local(input_win, {
      wrap = true,
      linebreak = true,
      number = false,
      relativenumber = false,
      winfixheight = true,
      statusline = statusline_of("statusline", chat.input, input_win),
    })
  end
  vim.api.nvim_set_current_win(input_win)
end

--- Put the cursor in the chat's input (showing the chat if needed), at the end of its text.
--- @param insert boolean start insert mode there
function M.focus_input(chat, insert)
  show(chat)
  local win = render.windows(chat.input)[1]
  local count = vim.api.nvim_buf_line_count(chat.input)
  local last = vim.api.nvim_buf_get_lines(chat.input, count - 1, count, false)[1]
  vim.api.nvim_win_set_cursor(win, { count, #last })
  if insert then
    vim.cmd("startinsert!")
  end
end

--- Close the chat's windows (the conversation and what is typed stay for the next open).
function M.close(chat)
  for _, bufnr in ipairs({ chat.input, chat.conversation }) do
    for _, win in ipairs(render.windows(bufnr)) do
      if #vim.api.nvim_tabpage_list_wins(0) > 1 then
        pcall(vim.api.nvim_win_close, win, true)
      end
    end
  end
end

local function redraw()
  pcall(vim.cmd, "redrawstatus!")
end

--- Add the figures of a `usage` event (or of `lspAgent.status`'s session usage) to `into`.
local function add_usage(into, input, cached, output, cost)
  into.input = (into.input or 0) + (tonumber(input) or 0)
  into.cached = (into.cached or 0) + (tonumber(cached) or 0)
  into.output = (into.output or 0) + (tonumber(output) or 0)
  if type(cost) == "number" then
    into.cost = (into.cost or 0) + cost
  end
end

--- Fetch the session's token use and context fill (after its history: it is loaded by then).
local function fetch_usage(chat, lsp_client, session)
  client.execute(lsp_client, protocol.STATUS, { session = session }, function(err, result)
    if err or type(result) ~= "table" or chat.session ~= session then
      return
    end
    for _, item in ipairs(type(result.sessions) == "table" and result.sessions or {}) do
      if item.session == session and type(item.usage) == "table" then
        local usage = item.usage
        chat.total = {}
        add_usage(
          chat.total,
          usage.inputTokens,
          usage.cachedInputTokens,
          usage.outputTokens,
          usage.cost
        )
        chat.context_tokens = tonumber(item.contextTokens)
        chat.context_window = tonumber(item.contextWindow)
      end
    end
    redraw()
  end)
end

--- The conversation is drawn: send the prompt that waited for it.
local function done_loading(chat)
  chat.loading = false
  local queued = chat.queued
  chat.queued = nil
  if queued then
    queued()
  end
  redraw()
end

--- Draw the conversation of `session` from its history (nil: a conversation not begun).
local function load(chat, id, session)
  chat.session = session
  chat.loaded = true
  chat.turn, chat.total, chat.context_tokens, chat.context_window = nil, nil, nil, nil
  render.clear(chat.conversation)
  redraw()
  if not session then
    done_loading(chat)
    return
  end
  chat.loading = true
  client.when_ready(id, function(lsp_client)
    client.execute(lsp_client, protocol.HISTORY, { session = session }, function(err, items)
      if chat.session ~= session then
        return -- another session was chosen meanwhile
      end
      if err then
        render.lines(chat.conversation, {
          "**error**: the conversation could not be read: " .. (err.message or tostring(err)),
        }, true)
      else
        for _, item in ipairs(type(items) == "table" and items or {}) do
          render.item(chat.conversation, item)
        end
        render.to_end(chat.conversation, render.windows(chat.conversation))
        fetch_usage(chat, lsp_client, session)
      end
      done_loading(chat)
    end)
  end)
end

--- The session the chat shows when it opens: the one `:LspAgent ask` continues, else the
--- workspace's newest stored one (which the server would continue), else none yet.
local function resolve(id, entry, done)
  if entry.session then
    done(entry.session)
    return
  end
  client.when_ready(id, function(lsp_client)
    client.execute(lsp_client, protocol.SESSIONS, nil, function(err, result)
      if entry.session then
        done(entry.session)
      elseif err or type(result) ~= "table" or not result[1] then
        done(nil)
      else
        entry.session = result[1].session
        done(entry.session)
      end
    end)
  end)
end

--- `:LspAgent chat`: show the chat of the server's workspace and go to its input.
--- @param id integer the client
--- @param entry lsp_agent.ClientState
--- @param target lsp_agent.Target|nil a selection to send with the next prompt
--- @param origin integer|nil the buffer the user was in (what `#buffer` names)
function M.open(id, entry, target, origin)
  local chat = chat_for(entry.root)
  if target then
    chat.context = target
  end
  if origin and selection.of(origin, entry.root) then
    chat.origin = origin
  end
  M.focus_input(chat, true)
  if not chat.loaded then
    chat.loaded, chat.loading = true, true
    resolve(id, entry, function(session)
      load(chat, id, session)
    end)
  elseif entry.session and entry.session ~= chat.session then
    load(chat, id, entry.session)
  elseif not entry.session and chat.session then
    entry.session = chat.session -- a restarted server: the chat says which session goes on
  end
  redraw()
end

--- The current session changed (`:LspAgent new`, `:LspAgent sessions`): show it.
--- @param id integer
--- @param entry lsp_agent.ClientState
function M.show_session(id, entry)
  local chat = state.chats[entry.root]
  if chat and valid(chat.conversation) and chat.loaded and chat.session ~= entry.session then
    load(chat, id, entry.session)
  end
end

--- Put a prompt that could not be sent back into the input: nothing typed is lost.
local function restore(chat, lines, target)
  local now = vim.api.nvim_buf_get_lines(chat.input, 0, -1, false)
  local empty = #now == 1 and now[1] == ""
  local back = vim.list_extend({}, lines)
  if not empty then
    back[#back + 1] = ""
  end
  vim.api.nvim_buf_set_lines(chat.input, 0, empty and -1 or 0, false, back)
  chat.context = chat.context or target
end

--- The file `#buffer` names: the one in the window the user works in, else the one they were in
--- when they opened the chat; its path relative to the workspace, or nil.
local function buffer_name(chat)
  local work = layout.work_window()
  local bufnr = work and vim.api.nvim_win_get_buf(work) or nil
  local target = bufnr and selection.of(bufnr, chat.root)
  if not target and chat.origin and vim.api.nvim_buf_is_valid(chat.origin) then
    target = selection.of(chat.origin, chat.root)
  end
  return target and target.name or nil
end

--- The files the prompt's `#buffer` and `#file:path` name, each once; nil and why when one
--- names no file.
--- @return string[]|nil, string|nil
local function named_files(chat, prompt)
  local files, seen = {}, {}
  for _, ref in ipairs(references.parse(prompt)) do
    local name = ref.path
    if ref.kind == "buffer" then
      name = buffer_name(chat)
      if not name then
        return nil, "#buffer: go to a file of the workspace first"
      end
    else
      local path = chat.root .. "/" .. name
      if vim.fn.filereadable(path) == 0 and vim.fn.bufnr(path) == -1 then
        -- One short line: a longer one would stop the typing at a hit-enter prompt.
        local shown = vim.fn.strchars(name) > 40
            and ("…" .. vim.fn.strcharpart(name, vim.fn.strchars(name) - 39))
          or name
        return nil, ("#file:%s: no such file here"):format(shown)
      end
    end
    if not seen[name] then
      seen[name] = true
      files[#files + 1] = name
    end
  end
  return files, nil
end

--- 'omnifunc' of the chat's input: completes `#buffer` and `#file:path` (<C-x><C-o>).
--- @param findstart integer
--- @param base string
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local line = vim.api.nvim_get_current_line()
    local before = line:sub(1, vim.api.nvim_win_get_cursor(0)[2])
    local start = before:find("#[%w:_./%-~]*$")
    return start and (start - 1) or -3
  end
  local chat = chat_of(vim.api.nvim_get_current_buf())
  if not chat then
    return {}
  end
  return references.complete(base, chat.root, buffer_name(chat))
end

--- Send what the input holds as the next prompt of the chat's session (once the conversation
--- is drawn, if it is still loading: the input is free at once for the next prompt). The files
--- it names with `#` go along, listed after it.
--- @param chat lsp_agent.Chat|nil the chat of the current buffer when nil
function M.send(chat)
  chat = chat or chat_of(vim.api.nvim_get_current_buf())
  if not chat then
    return
  end
  local lines = vim.api.nvim_buf_get_lines(chat.input, 0, -1, false)
  local prompt = vim.trim(table.concat(lines, "\n"))
  if prompt == "" then
    notify("write your question in the chat input first")
    return
  end
  local files, unknown = named_files(chat, prompt)
  if not files then
    notify(unknown, vim.log.levels.WARN)
    return
  end
  local id, entry = server(chat, true)
  if not id then
    return
  end
  if entry.running then
    notify(
      ("a turn is running: wait for it to end, or %s (:LspAgent cancel) to stop it"):format(
        config.options.chat.keys.cancel
      ),
      vim.log.levels.WARN
    )
    return
  end
  local target = chat.context
  local running = { kind = "chat", view = "chat", prompt = prompt }
  running.where = selection.describe(target)
  entry.running = running
  chat.context = nil
  vim.api.nvim_buf_set_lines(chat.input, 0, -1, false, {})
  local answer = require("lsp_agent.answer")
  answer.set_step(entry, "thinking")
  local function failed(message)
    if entry.running == running then
      entry.running = nil
    end
    answer.set_step(entry, nil)
    restore(chat, lines, target)
    notify(message, vim.log.levels.ERROR)
  end
  local function started(err, result)
    if err then
      failed(err.message or tostring(err))
      return
    end
    local session = type(result) == "table" and result.session or nil
    if session then
      entry.session = session
      chat.session = chat.session or session
      if not running.session then
        running.session = session
        if running.cancel_when_known and entry.running == running then
          require("lsp_agent").cancel()
        end
      end
    end
  end
  local function start(lsp_client)
    running.session = chat.session
    entry.session = chat.session or entry.session
    local argument = selection.add_to(
      { prompt = references.with_files(prompt, files), session = chat.session },
      target,
      lsp_client.offset_encoding or "utf-16"
    )
    local sent, request_id =
      client.execute(lsp_client, protocol.START, argument, started, client.work_done_token())
    if sent then
      running.request_id = request_id
    else
      failed("the server is not running: :LspAgent restart, then send again")
    end
  end
  client.when_ready(id, function(lsp_client)
    if chat.loading then
      -- Sent in the session the chat is about to show, once its history is drawn.
      chat.queued = function()
        start(lsp_client)
      end
    else
      start(lsp_client)
    end
  end)
  redraw()
end

--- One step of a turn (events.lua): written when it belongs to the session the chat shows.
--- @param entry lsp_agent.ClientState
--- @param event table
function M.on_event(entry, event)
  local chat = state.chats[entry.root]
  if not chat or not valid(chat.conversation) or chat.loading or not chat.loaded then
    return
  end
  local running = entry.running
  if chat.session == nil and running and running.view == "chat" then
    chat.session = event.session -- the first turn of a new conversation
  end
  if event.session ~= chat.session then
    return
  end
  local kind = event.kind
  if kind == "start" then
    chat.turn = {}
    render.prompt(chat.conversation, event.prompt or "", running and running.where or nil)
  elseif kind == "usage" then
    chat.turn = chat.turn or {}
    chat.total = chat.total or {}
    add_usage(chat.turn, event.inputTokens, event.cachedTokens, event.outputTokens, event.cost)
    add_usage(chat.total, event.inputTokens, event.cachedTokens, event.outputTokens, event.cost)
    chat.context_tokens = tonumber(event.contextTokens)
    chat.context_window = tonumber(event.contextWindow)
  else
    render.event(chat.conversation, event)
  end
  if kind == "start" or kind == "usage" then
    redraw() -- the figures of the conversation's statusline changed
  end
end

--- A turn of `session` was undone (`:LspAgent undo`): say so in the conversation showing it.
function M.undone(entry, session, undid, files)
  local chat = state.chats[entry.root]
  if chat and valid(chat.conversation) and chat.session == session and not chat.loading then
    render.undo(chat.conversation, undid, files)
  end
end

--- The conversation of `session` was rewound (`:LspAgent rewind`): draw it again from its
--- history (the turns gone back over marked) and put the prompt back into the input.
function M.rewound(id, entry, session, prompt)
  local chat = state.chats[entry.root]
  if not (chat and valid(chat.conversation) and chat.session == session) then
    return
  end
  load(chat, id, session)
  if type(prompt) == "string" and prompt ~= "" then
    local text = require("lsp_agent.references").split(prompt)
    restore(chat, vim.split(text, "\n", { plain = true }))
  end
end

--- The server exited while the chat's turn ran.
function M.server_exited(entry, code, signal)
  local chat = state.chats[entry.root]
  if chat and valid(chat.conversation) then
    render.lines(
      chat.conversation,
      { ("**the server exited** (code %s, signal %s)"):format(code, signal) },
      true
    )
  end
end

--- A token count in a few characters: 950, 1.2k, 12k, 1.3M.
local function count(n)
  n = tonumber(n) or 0
  if n >= 1e6 then
    return ("%.1fM"):format(n / 1e6)
  elseif n >= 1e4 then
    return ("%dk"):format(math.floor(n / 1e3 + 0.5))
  elseif n >= 1e3 then
    return ("%.1fk"):format(n / 1e3)
  end
  return tostring(math.floor(n))
end

local function usage_text(label, usage)
  local text = ("%s %s in"):format(label, count(usage.input))
  if (usage.cached or 0) > 0 then
    text = text .. (" (%s cached)"):format(count(usage.cached))
  end
  text = text .. (", %s out"):format(count(usage.output))
  if usage.cost then
    text = text .. (", $%.4f"):format(usage.cost)
  end
  return text
end

--- The parts of the input window's statusline: what waits or runs, and the selection that
--- goes along with the next prompt.
--- @param chat lsp_agent.Chat
--- @return string[]
function M.input_parts(chat)
  local keys = config.options.chat.keys
  local parts = {}
  local first = decisions.pending()[1]
  local _, entry = server(chat, false)
  if first then
    parts[#parts + 1] = ("%s waits: %s to go there"):format(
      first.kind == "question" and "a question" or "an edit to review",
      keys.review
    )
  elseif entry and entry.running then
    parts[#parts + 1] = ("%s… (%s cancels)"):format(entry.step or "thinking", keys.cancel)
  else
    parts[#parts + 1] = ("%s sends (%s in insert mode)"):format(keys.send, keys.send_insert)
  end
  if chat.context then
    parts[#parts + 1] = "with " .. selection.describe(chat.context)
  end
  return parts
end

--- The parts of the conversation window's statusline: the tokens of the last turn, the
--- context's fill, the tokens of every turn of the session, and the session.
--- @param chat lsp_agent.Chat
--- @return string[]
function M.title_parts(chat)
  local parts = { "lsp-agent chat" .. (chat.loading and " (loading…)" or "") }
  if chat.turn and chat.turn.input then
    parts[#parts + 1] = usage_text("turn", chat.turn)
  end
  if chat.context_tokens and chat.context_window and chat.context_window > 0 then
    parts[#parts + 1] = ("context %d%% of %s"):format(
      math.floor(100 * chat.context_tokens / chat.context_window + 0.5),
      count(chat.context_window)
    )
  end
  if chat.total and chat.total.input then
    parts[#parts + 1] = usage_text("total", chat.total)
  end
  parts[#parts + 1] = chat.session and ("session " .. chat.session) or "a new conversation"
  return parts
end

--- `parts` joined, as many as fit in the width of `win` (all without a window), in order.
local function fit(parts, win)
  local width = (win and vim.api.nvim_win_is_valid(win)) and vim.api.nvim_win_get_width(win)
    or math.huge
  local text = " " .. parts[1]
  for i = 2, #parts do
    local longer = text .. " │ " .. parts[i]
    if vim.fn.strdisplaywidth(longer) < width then
      text = longer
    end
  end
  return text
end

--- The statusline of the input window (`%{}` of its 'statusline').
--- @param bufnr integer the input buffer
--- @param win integer|nil its window, whose width the text fits
function M.statusline(bufnr, win)
  local chat = chat_of(bufnr)
  return chat and fit(M.input_parts(chat), win) or ""
end

--- The statusline of the conversation window.
--- @param bufnr integer the conversation buffer
--- @param win integer|nil its window, whose width the text fits
function M.title(bufnr, win)
  local chat = chat_of(bufnr)
  return chat and fit(M.title_parts(chat), win) or ""
end

return M
