--- lsp-agent for Neovim: ask the agent, watch the answer stream in, review every edit.
---
--- The agent lives in the server (`lsp-agent serve`); this plugin is the UI around its LSP
--- commands. `setup()` is optional: the first `:LspAgent` command uses the defaults.
local answer = require("lsp_agent.answer")
local client = require("lsp_agent.client")
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local decisions = require("lsp_agent.decisions")
local highlights = require("lsp_agent.highlights")
local protocol = require("lsp_agent.protocol")
local state = require("lsp_agent.state")
local text = require("lsp_agent.text")

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
    cancel = { n = "<cmd>LspAgent cancel<CR>" },
    new = { n = "<cmd>LspAgent new<CR>" },
    sessions = { n = "<cmd>LspAgent sessions<CR>" },
    status = { n = "<cmd>LspAgent status<CR>" },
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
  local _, problems = config.set(opts)
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

--- What the user points at: the file, and the lines or characters of a range.
--- Byte positions are taken now; they become LSP positions once the encoding is known.
local function pointed_at(bufnr, root, range)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.bo[bufnr].buftype ~= "" or name == "" then
    return nil
  end
  local path = vim.fn.fnamemodify(name, ":p")
  local real = compat.uv.fs_realpath(path) or path
  if not vim.startswith(real, root .. "/") then
    return nil
  end
  local target = { uri = vim.uri_from_fname(path), name = vim.fn.fnamemodify(path, ":~:.") }
  if not range then
    return target
  end
  local line1, line2 = range[1], range[2]
  local lines = vim.api.nvim_buf_get_lines(bufnr, line1 - 1, line2, false)
  if #lines == 0 then
    return target
  end
  target.first, target.last = line1, line2
  -- Linewise: from the start of the first line to the end of the last one.
  target.chars =
    { first_line = lines[1], start_byte = 0, last_line = lines[#lines], end_byte = #lines[#lines] }
  local from, to = vim.api.nvim_buf_get_mark(bufnr, "<"), vim.api.nvim_buf_get_mark(bufnr, ">")
  if vim.fn.visualmode() == "v" and from[1] == line1 and to[1] == line2 then
    -- The characterwise selection the range came from: its first to its last character.
    local end_byte = math.min(to[2], #lines[#lines])
    target.chars.start_byte = math.min(from[2], #lines[1])
    target.chars.end_byte = end_byte + text.char_length_at(lines[#lines], end_byte)
  end
  return target
end

local function lsp_range(target, encoding)
  if not target.first then
    return nil
  end
  local c = target.chars
  return {
    start = {
      line = target.first - 1,
      character = text.column_of(c.first_line, c.start_byte, encoding),
    },
    ["end"] = {
      line = target.last - 1,
      character = text.column_of(c.last_line, c.end_byte, encoding),
    },
  }
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
  local target = pointed_at(bufnr, entry.root, opts.range)
  local where
  if target then
    where = target.name
    if target.first then
      local lines = target.first == target.last and ("line %d"):format(target.first)
        or ("lines %d-%d"):format(target.first, target.last)
      where = ("%s, %s"):format(target.name, lines)
    end
  end
  local running = { prompt = prompt, session = entry.session }
  entry.running = running
  answer.begin(entry, prompt, where)
  answer.set_step(entry, "thinking")
  client.when_ready(id, function(lsp_client)
    local argument = { prompt = prompt, session = entry.session }
    if target then
      argument.uri = target.uri
      argument.range = lsp_range(target, lsp_client.offset_encoding or "utf-16")
    end
    -- A token of our own: the server reports the turn as `$/progress` under it, which
    -- progress plugins (fidget.nvim, lualine) show.
    state.tokens = state.tokens + 1
    local token = ("lsp-agent-%d"):format(state.tokens)
    local sent, request_id = client.execute(
      lsp_client,
      protocol.ASK,
      argument,
      function(err, result)
        if entry.running == running then
          entry.running = nil
        end
        if type(result) == "table" and result.session then
          entry.session = result.session
        end
        decisions.withdraw_all(id, "the turn ended before the user decided")
        answer.finish(entry, err, result)
        if err then
          notify(err.message or tostring(err), vim.log.levels.ERROR)
        elseif type(result) == "table" and result.status == "failed" then
          notify("the turn failed: " .. tostring(result.error), vim.log.levels.ERROR)
        end
      end,
      token
    )
    if sent then
      running.request_id = request_id
    else
      entry.running = nil
      answer.finish(entry, { message = "the server is not running" })
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
    elseif running.request_id then
      -- No event named the session yet: cancel the request itself (the server treats both alike).
      compat.cancel_request(lsp_client, running.request_id)
    end
  end)
end

--- Start a new conversation; the next questions continue it.
function M.new_session()
  local id, entry = current(true)
  if not id then
    return
  end
  client.when_ready(id, function(lsp_client)
    client.execute(lsp_client, protocol.NEW_SESSION, nil, function(err, result)
      if err then
        notify(err.message or tostring(err), vim.log.levels.ERROR)
        return
      end
      entry.session = result.session
      answer.note(entry, ("_new session %s_"):format(result.session))
      notify("new session " .. result.session)
    end)
  end)
end

local function session_line(item, current_session)
  local title = (item.title and item.title ~= vim.NIL and item.title ~= "") and item.title
    or "(no question yet)"
  local mark = item.session == current_session and "* " or "  "
  return ("%s%s  (%s turns, %s)"):format(mark, title, tostring(item.turns), tostring(item.started))
end

--- Pick a stored session with `vim.ui.select` and continue it.
function M.sessions()
  local id, entry = current(true)
  if not id then
    return
  end
  client.when_ready(id, function(lsp_client)
    client.execute(lsp_client, protocol.SESSIONS, nil, function(err, result)
      if err then
        notify(err.message or tostring(err), vim.log.levels.ERROR)
        return
      end
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
        answer.note(
          entry,
          ("_resumed session %s: %s_"):format(choice.session, tostring(choice.title))
        )
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
  local id, entry = current(true)
  if not id then
    return
  end
  client.when_ready(id, function(lsp_client)
    client.execute(lsp_client, protocol.STATUS, nil, function(err, result)
      if err then
        notify(err.message or tostring(err), vim.log.levels.ERROR)
        return
      end
      local lines = M.format_status(result, entry)
      if callback then
        callback(lines)
      else
        vim.notify(table.concat(lines, "\n"), vim.log.levels.INFO)
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
