--- lsp-agent for Neovim: ask the agent or chat with it, watch the answer stream in, review every
--- edit, undo a turn.
---
--- The agent lives in the server (`lsp-agent serve`); this plugin is the UI around its LSP
--- commands. `setup()` is optional: the first `:LspAgent` command uses the defaults.
local answer = require("lsp_agent.answer")
local chat = require("lsp_agent.chat")
local client = require("lsp_agent.client")
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local decisions = require("lsp_agent.decisions")
local highlights = require("lsp_agent.highlights")
local protocol = require("lsp_agent.protocol")
local selection = require("lsp_agent.selection")
local state = require("lsp_agent.state")

local M = {}

local configured = false

local function notify(message, level)
  vim.notify("lsp-agent: " .. message, level or vim.log.levels.INFO)
end

local function install_keymaps(keymaps)
  if not keymaps then
    return
  end
  local maps = keymaps == true and config.default_keymaps or keymaps
  local actions = {
    ask = { n = "<cmd>LspAgent ask<CR>", x = ":LspAgent ask<CR>" },
    chat = { n = "<cmd>LspAgent chat<CR>", x = ":LspAgent chat<CR>" },
    undo = { n = "<cmd>LspAgent undo<CR>" },
    cancel = { n = "<cmd>LspAgent cancel<CR>" },
    new = { n = "<cmd>LspAgent new<CR>" },
    sessions = { n = "<cmd>LspAgent sessions<CR>" },
    status = { n = "<cmd>LspAgent status<CR>" },
    model = { n = "<cmd>LspAgent model<CR>" },
    answer = { n = "<cmd>LspAgent answer<CR>" },
    review = { n = "<cmd>LspAgent review<CR>" },
  }
  for action, lhs in pairs(maps) do
    if lhs and actions[action] then
      for mode, rhs in pairs(actions[action]) do
        vim.keymap.set(mode, lhs, rhs, { silent = true, desc = "lsp-agent: " .. action })
      end
    end
  end
end

--- Say the setup problems not said before, in one notification.
local function warn_once(problems)
  local fresh = {}
  for _, problem in ipairs(problems) do
    if not state.warned[problem] then
      state.warned[problem] = true
      fresh[#fresh + 1] = "- " .. problem
    end
  end
  if #fresh > 0 then
    vim.notify(
      "lsp-agent: problems in the setup() options (see :help lsp-agent-setup):\n"
        .. table.concat(fresh, "\n"),
      vim.log.levels.WARN
    )
  end
end

--- Configure the plugin (see `:help lsp-agent-setup`). May be called again to change settings:
--- running servers get the new `settings` through `workspace/didChangeConfiguration`. Never
--- throws: an unknown option or a bad value is a warning, and the default stays.
--- @param opts table|nil
function M.setup(opts)
  local _, problems = config.set(opts, config.project_caller())
  configured = true
  local group = vim.api.nvim_create_augroup("lsp_agent", { clear = true })
  vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile", "BufFilePost" }, {
    group = group,
    desc = "lsp-agent: attach file buffers to the running server of their workspace",
    callback = function(args)
      client.attach(args.buf)
    end,
  })
  vim.api.nvim_create_autocmd("ColorScheme", {
    group = group,
    desc = "lsp-agent: link the plugin's highlight groups again",
    callback = highlights.define,
  })
  highlights.define()
  local ok, err = pcall(install_keymaps, config.options.keymaps)
  if not ok then
    problems[#problems + 1] = "keymaps: " .. tostring(err)
  end
  warn_once(problems)
  for id in pairs(state.clients) do
    local running = vim.lsp.get_client_by_id(id)
    if running then
      compat.set_settings(running, { [protocol.SETTINGS_SECTION] = client.settings() })
      compat.notify(running, "workspace/didChangeConfiguration", { settings = vim.NIL })
    end
  end
end

local function ensure_setup()
  if not configured then
    M.setup({})
  end
end

--- The running (or newly started) server for the current buffer, and its state.
local function current(create)
  ensure_setup()
  local id = client.current(create)
  if not id then
    return nil, nil
  end
  return id, state.get(id)
end

--- The statusline part: what the agent is doing, or "" when idle. Cheap enough for every redraw:
--- `set statusline+=%{v:lua.require'lsp_agent'.status()}`.
function M.status()
  local waiting = decisions.waiting()
  if waiting then
    return "lsp-agent: " .. waiting
  end
  for _, entry in pairs(state.clients) do
    if entry.running or entry.step then
      return "lsp-agent: " .. (entry.step or "thinking") .. "…"
    end
  end
  return ""
end

--- Ask the agent. Without a prompt, asks for one with `vim.ui.input`.
--- @param prompt string|nil
--- @param opts table|nil `range = {line1, line2}` sends the lines (or the visual selection)
function M.ask(prompt, opts)
  opts = opts or {}
  if not prompt or vim.trim(prompt) == "" then
    vim.ui.input({ prompt = "Ask lsp-agent: " }, function(input)
      if input and vim.trim(input) ~= "" then
        M.ask(input, opts)
      end
    end)
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local id, entry = current(true)
  if not id then
    return
  end
  if entry.running then
    notify("a turn is already running: wait for it, or :LspAgent cancel", vim.log.levels.WARN)
    return
  end
  local target = selection.of(bufnr, entry.root, opts.range)
  local where = selection.describe(target)
  -- While the chat is on screen, the turn is shown there, not in the answer window.
  local view = chat.visible(entry.root) and "chat" or "answer"
  local running =
    { kind = "ask", view = view, prompt = prompt, where = where, session = entry.session }
  entry.running = running
  if view == "answer" then
    answer.begin(entry, prompt, where)
  end
  answer.set_step(entry, "thinking")
  client.when_ready(id, function(lsp_client)
    local argument = selection.add_to(
      { prompt = prompt, session = entry.session },
      target,
      lsp_client.offset_encoding or "utf-16"
    )
    local sent, request_id = client.execute(
      lsp_client,
      protocol.ASK,
      argument,
      function(err, result)
        if entry.running == running then
          entry.running = nil
        end
        -- The answer may come after the user moved to another session (:LspAgent new or
        -- sessions while the turn ran, or right after its last event): theirs stays current.
        if type(result) == "table" and result.session and entry.session == running.session then
          entry.session = result.session
        end
        decisions.withdraw_all(id, "the turn ended before the user decided")
        if view == "answer" then
          answer.finish(entry, err, result)
        end
        answer.set_step(entry, nil)
        if err then
          notify(err.message or tostring(err), vim.log.levels.ERROR)
        elseif type(result) == "table" and result.status == "failed" then
          notify("the turn failed: " .. tostring(result.error), vim.log.levels.ERROR)
        end
      end,
      client.work_done_token()
    )
    if sent then
      running.request_id = request_id
    else
      entry.running = nil
      if view == "answer" then
        answer.finish(entry, { message = "the server is not running" })
      end
      answer.set_step(entry, nil)
    end
  end)
end

--- Cancel the running turn of the server `id`.
local function cancel_turn(id, entry)
  decisions.withdraw_all(id, "the user cancelled the turn")
  local running = entry.running
  client.when_ready(id, function(lsp_client)
    if running.session then
      client.execute(
        lsp_client,
        protocol.CANCEL,
        { session = running.session },
        function(err, result)
          if err then
            notify("cancel failed: " .. (err.message or tostring(err)), vim.log.levels.ERROR)
          elseif type(result) == "table" and not result.cancelled and running.request_id then
            compat.cancel_request(lsp_client, running.request_id)
          end
        end
      )
    elseif running.kind == "chat" then
      -- `lspAgent.start` answers at once: the turn is cancelled once its session is known.
      running.cancel_when_known = true
    elseif running.request_id then
      -- No event named the session yet: cancel the request itself (the server treats both alike).
      compat.cancel_request(lsp_client, running.request_id)
    end
  end)
end

--- Cancel the running turn.
function M.cancel()
  local id, entry = current(false)
  if not id or not entry.running then
    notify("nothing is running")
    return
  end
  cancel_turn(id, entry)
end

--- Run `command` (no arguments) on the current buffer's server once it is ready; `on_result`
--- gets its answer with the client's id and state. An error answer is shown, nothing more.
--- @param command string
--- @param on_result fun(result: any, id: integer, entry: lsp_agent.ClientState)
local function on_answer(command, on_result)
  local id, entry = current(true)
  if not id then
    return
  end
  client.when_ready(id, function(lsp_client)
    client.execute(lsp_client, command, nil, function(err, result)
      if err then
        notify(err.message or tostring(err), vim.log.levels.ERROR)
        return
      end
      on_result(result, id, entry)
    end)
  end)
end

--- Start a new conversation; the next questions continue it.
function M.new_session()
  on_answer(protocol.NEW_SESSION, function(result, id, entry)
    entry.session = result.session
    answer.note(entry, ("_new session %s_"):format(result.session))
    chat.show_session(id, entry)
    notify("new session " .. result.session)
  end)
end

--- When a session started, as a person says it: "today 14:02", "yesterday 09:15",
--- "Mon 03 Nov 14:02" this year, "2025-11-03 14:02" before; the text as it came when it is not
--- an ISO 8601 time.
--- @param started any `started` of `lspAgent.sessions` ("2026-12-07T05:16:03.123+00:00")
--- @param now integer|nil the time now (seconds since the epoch)
--- @return string
function M.when(started, now)
  if type(started) ~= "string" then
    return tostring(started)
  end
  local y, mo, d, h, mi, s, zone = started:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)[%.%d]*(.*)$")
  if not y then
    return started
  end
  local east = 0
  local sign, zh, zm = zone:match("^([+-])(%d%d):?(%d%d)$")
  if sign then
    east = (tonumber(zh) * 3600 + tonumber(zm) * 60) * (sign == "-" and -1 or 1)
  end
  -- os.time reads a table as local time: the difference of the two readings of one moment is
  -- the local offset from UTC.
  local as_local = os.time({ year = y, month = mo, day = d, hour = h, min = mi, sec = s })
  local probe = os.time()
  local utc_offset = probe - os.time(os.date("!*t", probe))
  local moment = as_local + utc_offset - east
  now = now or probe
  local day = os.date("%Y-%m-%d", moment)
  if day == os.date("%Y-%m-%d", now) then
    return "today " .. os.date("%H:%M", moment)
  elseif day == os.date("%Y-%m-%d", now - 86400) then
    return "yesterday " .. os.date("%H:%M", moment)
  elseif os.date("%Y", moment) == os.date("%Y", now) then
    return os.date("%a %d %b %H:%M", moment)
  end
  return os.date("%Y-%m-%d %H:%M", moment)
end

local function session_line(item, current_session)
  local title = (item.title and item.title ~= vim.NIL and item.title ~= "") and item.title
    or "(no question yet)"
  local mark = item.session == current_session and "* " or "  "
  local turns = tonumber(item.turns) or 0
  return ("%s%s  (%s, %d turn%s)"):format(
    mark,
    title,
    M.when(item.started),
    turns,
    turns == 1 and "" or "s"
  )
end

--- Pick a stored session with `vim.ui.select` and continue it.
function M.sessions()
  on_answer(protocol.SESSIONS, function(result, id, entry)
    if type(result) ~= "table" or #result == 0 then
      notify("no sessions yet in this workspace: :LspAgent ask starts one")
      return
    end
    vim.ui.select(result, {
      prompt = "Resume an lsp-agent session",
      kind = "lsp_agent.session",
      format_item = function(item)
        return session_line(item, entry.session)
      end,
    }, function(choice)
      if not choice then
        return
      end
      entry.session = choice.session
      chat.show_session(id, entry)
      answer.note(
        entry,
        ("_resumed session %s: %s_"):format(choice.session, tostring(choice.title))
      )
      -- Once the list is gone from the screen (see model()).
      vim.schedule(function()
        vim.cmd("redraw")
        notify("resumed session " .. choice.session)
      end)
    end)
  end)
end

--- The lines `:LspAgent status` shows, from a `lspAgent.status` result.
--- @param result table
--- @param entry lsp_agent.ClientState
function M.format_status(result, entry)
  local settings = type(result.settings) == "table" and result.settings or {}
  local function source(key)
    local described = settings[key]
    return type(described) == "table"
        and described.source
        and (" (from " .. tostring(described.source) .. ")")
      or ""
  end
  local model = result.model ~= vim.NIL and result.model or nil
  local lines = {
    ("lsp-agent %s, workspace %s"):format(tostring(result.version), entry.root),
    model and ("model: %s%s"):format(model, source("model"))
      or "model: none — set it with setup({ settings = { model = … } }) or LSP_AGENT_MODEL",
    ("endpoint: %s (%s)%s"):format(
      tostring(result.baseUrl),
      tostring(result.provider),
      source("baseUrl")
    ),
    ("sandbox: %s"):format(tostring(result.sandbox)),
    ("context window: %s tokens"):format(tostring(result.contextWindow)),
  }
  local usage = entry.usage
  if usage then
    local figures = "last model call: %s input tokens (%s cached), %s output; context %s of %s%s"
    lines[#lines + 1] = figures:format(
      tostring(usage.inputTokens),
      tostring(usage.cachedTokens),
      tostring(usage.outputTokens),
      tostring(usage.contextTokens),
      tostring(usage.contextWindow),
      (usage.cost and usage.cost ~= vim.NIL) and (", cost " .. tostring(usage.cost)) or ""
    )
  end
  for _, session in ipairs(type(result.sessions) == "table" and result.sessions or {}) do
    lines[#lines + 1] = ("session %s%s: %s turns, %s context tokens%s"):format(
      session.session,
      session.session == entry.session and " (current)" or "",
      tostring(session.turns),
      tostring(session.contextTokens),
      session.running and ", running" or ""
    )
  end
  return lines
end

--- Show the model, endpoint, sandbox and sessions in effect.
--- @param callback fun(lines: string[])|nil receives the lines instead of showing them
function M.show_status(callback)
  on_answer(protocol.STATUS, function(result, _, entry)
    local lines = M.format_status(result, entry)
    if callback then
      callback(lines)
    else
      vim.notify(table.concat(lines, "\n"), vim.log.levels.INFO)
    end
  end)
end

--- Use `model` from now on: the plugin's `settings.model`, sent to every running server (the
--- next turn uses it). It lasts until Neovim exits; `setup()` keeps one for good.
--- @param model string
function M.set_model(model)
  ensure_setup()
  config.options.settings = vim.tbl_extend("force", config.options.settings or {}, {
    model = model,
  })
  for id in pairs(state.clients) do
    local running = vim.lsp.get_client_by_id(id)
    if running then
      compat.set_settings(running, { [protocol.SETTINGS_SECTION] = client.settings() })
      compat.notify(running, "workspace/didChangeConfiguration", { settings = vim.NIL })
    end
  end
  notify(("model %s (until Neovim exits: setup() keeps one)"):format(model))
end

--- Choose the model from those the endpoint lists (`lspAgent.models`), with `vim.ui.select`;
--- with `name`, use that one without asking.
--- @param name string|nil
function M.model(name)
  if name and vim.trim(name) ~= "" then
    M.set_model(vim.trim(name))
    return
  end
  on_answer(protocol.MODELS, function(result)
    local models = type(result) == "table" and type(result.models) == "table" and result.models
      or {}
    local in_effect = result.current ~= vim.NIL and result.current or nil
    if #models == 0 then
      notify(("%s lists no models: :LspAgent model {name} sets one"):format(result.baseUrl))
      return
    end
    vim.ui.select(models, {
      prompt = ("Model for lsp-agent (%s)"):format(tostring(result.baseUrl)),
      kind = "lsp_agent.model",
      format_item = function(item)
        return (item == in_effect and "* " or "  ") .. item
      end,
    }, function(choice)
      if choice and choice ~= in_effect then
        -- Once the list is gone from the screen: said over it, the message would wait for
        -- a key at a hit-enter prompt.
        vim.schedule(function()
          vim.cmd("redraw")
          M.set_model(choice)
        end)
      end
    end)
  end)
end

--- Show the answer buffer (and move there).
function M.show_answer()
  local id, entry = current(true)
  if id then
    answer.show(entry, true)
  end
end

--- Open the chat (see `:help lsp-agent-chat`) and go to its input.
--- @param opts table|nil `range = {line1, line2}`: the lines (or the visual selection) go along
---   with the next prompt
function M.chat(opts)
  opts = opts or {}
  local bufnr = vim.api.nvim_get_current_buf()
  local id, entry = current(true)
  if not id then
    return
  end
  local target
  if opts.range then
    target = selection.of(bufnr, entry.root, opts.range)
    if not target then
      notify(
        "only lines of a file in the workspace can go along with a prompt",
        vim.log.levels.WARN
      )
    end
  end
  chat.open(id, entry, target, bufnr)
end

--- What `lspAgent.undoTurn` answered, in a few lines for the user.
--- @param result table
--- @return string message, integer level
function M.format_undo(result)
  local lines = {}
  local level = vim.log.levels.INFO
  local files = type(result.files) == "table" and table.concat(result.files, ", ") or ""
  if result.proposed and result.applied then
    lines[1] = ("undid turn %s: %s"):format(tostring(result.turn), files)
  elseif result.proposed then
    lines[1] = ("the undo of turn %s was not applied (rejected in the review)"):format(
      tostring(result.turn)
    )
    level = vim.log.levels.WARN
  else
    lines[1] = ("nothing of turn %s was undone"):format(tostring(result.turn))
    level = vim.log.levels.WARN
  end
  for _, refused in ipairs(type(result.refused) == "table" and result.refused or {}) do
    lines[#lines + 1] = ("not undone: %s: %s"):format(tostring(refused.path), tostring(refused.why))
    level = vim.log.levels.WARN
  end
  return table.concat(lines, "\n"), level
end

--- Undo the last turn of the current session that changed files: the server proposes one edit
--- that restores them (merged onto what you typed since), which opens as a review.
function M.undo()
  local id, entry = current(true)
  if not id then
    return
  end
  client.when_ready(id, function(lsp_client)
    local function undo(session)
      client.execute(lsp_client, protocol.UNDO_TURN, { session = session }, function(err, result)
        if err then
          notify(err.message or tostring(err), vim.log.levels.ERROR)
          return
        end
        if type(result) ~= "table" then
          return
        end
        if result.proposed and result.applied then
          chat.undone(entry, session, result.turn, result.files)
        end
        local message, level = M.format_undo(result)
        notify(message, level)
      end)
    end
    if entry.session then
      undo(entry.session)
      return
    end
    client.execute(lsp_client, protocol.SESSIONS, nil, function(err, result)
      if err or type(result) ~= "table" or not result[1] then
        notify("nothing to undo: no session in this workspace yet")
        return
      end
      entry.session = entry.session or result[1].session
      undo(entry.session)
    end)
  end)
end

--- What `lspAgent.undoTurn` answered to a rewind of the conversation, for the user.
--- @param result table
--- @return string message, integer level
function M.format_rewind(result)
  if not result.conversation then
    local why = type(result.reason) == "string" and result.reason
      or "the files were not restored: the conversation stays as it was"
    return ("the rewind to before turn %s was not done: %s"):format(tostring(result.turn), why),
      vim.log.levels.WARN
  end
  local lines = {
    ("rewound to before turn %s: the agent no longer sees turns %s"):format(
      tostring(result.turn),
      table.concat(vim.tbl_map(tostring, result.rewound or { result.turn }), ", ")
    ),
  }
  local level = vim.log.levels.INFO
  if type(result.files) == "table" and #result.files > 0 then
    lines[#lines + 1] = "files restored: " .. table.concat(result.files, ", ")
  end
  for _, refused in ipairs(type(result.refused) == "table" and result.refused or {}) do
    lines[#lines + 1] = ("not restored: %s: %s"):format(
      tostring(refused.path),
      tostring(refused.why)
    )
    level = vim.log.levels.WARN
  end
  return table.concat(lines, "\n"), level
end

--- Rewind the files and the conversation of the current session to before prompt `turn`: the
--- files through one review (what you typed since is kept), then the conversation goes on from
--- before that prompt, which comes back into the chat's input.
--- @param turn integer
function M.rewind(turn)
  local id, entry = current(true)
  if not id then
    return
  end
  client.when_ready(id, function(lsp_client)
    if not entry.session then
      notify("nothing to rewind: no session in this workspace yet")
      return
    end
    local session = entry.session
    local argument = { session = session, turn = turn, conversation = true }
    client.execute(lsp_client, protocol.UNDO_TURN, argument, function(err, result)
      if err then
        notify(err.message or tostring(err), vim.log.levels.ERROR)
        return
      end
      if type(result) ~= "table" then
        return
      end
      if result.conversation then
        chat.rewound(id, entry, session, result.prompt)
      end
      local message, level = M.format_rewind(result)
      notify(message, level)
    end)
  end)
end

--- Go to the oldest review or question that waits for the user (keys typed before are dropped).
function M.review()
  ensure_setup()
  decisions.focus()
end

--- Stop the server; the next command starts a fresh one.
function M.restart()
  decisions.withdraw_all(nil, "the server was restarted")
  client.stop_all()
  notify("server stopped; the next :LspAgent command starts it again")
end

return M
