--- `:checkhealth lsp_agent`: the same checks as `lsp-agent doctor` (run with the plugin's
--- settings), then whether the server starts from Neovim and what it uses.
local client = require("lsp_agent.client")
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local protocol = require("lsp_agent.protocol")
local state = require("lsp_agent.state")

local M = {}

--- How long the server may take to start and answer `lspAgent.status`, and doctor to finish
--- (its endpoint probe has a timeout of its own).
local TIMEOUT_MS = 30000

--- The environment variable of each server setting that has one, mirrored from the server's
--- settings table (lsp_agent/config.py): doctor reads the plugin's settings from these.
M.ENVIRONMENT = {
  baseUrl = "LSP_AGENT_BASE_URL",
  model = "LSP_AGENT_MODEL",
  apiKey = "LSP_AGENT_API_KEY",
  provider = "LSP_AGENT_PROVIDER",
  contextWindow = "CONTEXT_WINDOW",
  compactAt = "COMPACT_AT",
  compactTo = "COMPACT_TO",
  stripAt = "STRIP_AT",
  toolOutputCap = "TOOL_OUTPUT_CAP",
  stubChars = "STUB_CHARS",
  commandTimeout = "COMMAND_TIMEOUT",
  commandMemoryMB = "LSP_AGENT_COMMAND_MEMORY_MB",
  commandFileMB = "LSP_AGENT_COMMAND_FILE_MB",
  commandDiskMB = "LSP_AGENT_COMMAND_DISK_MB",
  questionTimeout = "LSP_AGENT_QUESTION_TIMEOUT",
  maxTurns = "LSP_AGENT_MAX_TURNS",
}

--- The plugin's settings as doctor's environment (editor settings are stronger than the
--- environment for the server too, so they override what Neovim inherited).
--- @param settings table
--- @return table<string, string>
function M.environment(settings)
  local flat = vim.tbl_extend("force", {}, settings or {})
  if type(flat.lspAgent) == "table" then
    flat = vim.tbl_extend("force", flat, flat.lspAgent)
  end
  local env = {}
  for key, variable in pairs(M.ENVIRONMENT) do
    local value = flat[key]
    if type(value) == "string" or type(value) == "number" then
      env[variable] = tostring(value)
    end
  end
  return env
end

--- The doctor command: the server command with `serve` (and what follows) replaced.
local function doctor_command(cmd)
  local command = {}
  for _, part in ipairs(cmd) do
    if part == "serve" then
      break
    end
    command[#command + 1] = part
  end
  vim.list_extend(command, { "doctor", "--json" })
  return command
end

--- Run `lsp-agent doctor --json`; returns its document, or nil and why not.
local function run_doctor(cmd, env)
  local out, err = {}, {}
  local ok, job = pcall(vim.fn.jobstart, cmd, {
    env = next(env) and env or nil,
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data)
      out = data
    end,
    on_stderr = function(_, data)
      err = data
    end,
  })
  if not ok or job <= 0 then
    return nil, ("cannot run %s: %s"):format(table.concat(cmd, " "), tostring(job))
  end
  local status = vim.fn.jobwait({ job }, TIMEOUT_MS)[1]
  if status == -1 then
    vim.fn.jobstop(job)
    return nil, ("%s did not finish within %d s"):format(table.concat(cmd, " "), TIMEOUT_MS / 1000)
  end
  local decoded_ok, document = pcall(vim.json.decode, table.concat(out, "\n"))
  if not decoded_ok or type(document) ~= "table" or type(document.checks) ~= "table" then
    local said = vim.trim(table.concat(err, "\n"))
    return nil,
      ("%s gave no report (exit %d)%s"):format(
        table.concat(cmd, " "),
        status,
        said ~= "" and (": " .. said) or ""
      )
  end
  return document
end

--- Report doctor's checks, each as ok, error (bad) or info.
local function report_doctor(report, cmd)
  local command = doctor_command(cmd)
  local document, why = run_doctor(command, M.environment(config.options.settings))
  if not document then
    report.error(why, {
      "is the server older than this plugin? `lsp-agent doctor --json` needs a current one",
      "run it in a shell to see more: " .. table.concat(command, " "),
    })
    return false
  end
  local bad = false
  for _, check in ipairs(document.checks) do
    local line = ("%s: %s"):format(tostring(check.name), tostring(check.detail))
    if check.status == "ok" then
      report.ok(line)
    elseif check.status == "bad" then
      bad = true
      local advice = {
        endpoint = {
          "start the endpoint (e.g. `ollama serve`), or set it in setup():"
            .. " settings = { baseUrl = 'http://…/v1' }",
        },
        model = { "set it in setup(): settings = { model = 'qwen2.5-coder:7b' }" },
      }
      report.error(line, advice[check.name])
    else
      report.info(line)
    end
  end
  return not bad
end

function M.check()
  local report = compat.health()
  report.start("lsp-agent")
  if vim.fn.has("nvim-0.7.2") == 1 then
    local version = vim.version()
    report.ok(("Neovim %d.%d.%d"):format(version.major, version.minor, version.patch))
  else
    report.error("Neovim 0.7.2 or newer is needed")
  end

  local cmd = config.options.cmd
  local executable = vim.fn.exepath(cmd[1])
  if executable == "" then
    report.error(("server command %q not found"):format(cmd[1]), {
      "install the server from a clone of the lsp-agent repository: pipx install "
        .. "/path/to/lsp-agent (or python3 -m venv ~/.local/lsp-agent && "
        .. "~/.local/lsp-agent/bin/pip install /path/to/lsp-agent)",
      "or give its full path in setup(): cmd = { '/path/to/lsp-agent', 'serve' }",
    })
    return
  end
  report.ok(("server command: %s (%s)"):format(table.concat(cmd, " "), executable))

  report.start("lsp-agent doctor (with the plugin's settings)")
  report_doctor(report, cmd)

  report.start("lsp-agent server, started from Neovim")
  if not next(state.clients) then
    require("lsp_agent").setup(config.options)
  end
  local id = client.current(true)
  local lsp_client = id and vim.lsp.get_client_by_id(id)
  if not lsp_client then
    report.error(
      "the server did not start",
      { "run it by hand to see why: " .. table.concat(cmd, " ") }
    )
    return
  end
  local entry = state.get(id)
  local ready = vim.wait(TIMEOUT_MS, function()
    return entry.ready
  end, 50)
  if not ready then
    report.error(("the server did not answer `initialize` within %d s"):format(TIMEOUT_MS / 1000), {
      "see the LSP log: " .. vim.lsp.get_log_path(),
    })
    return
  end
  report.ok("the server starts (workspace " .. entry.root .. ")")
  local provider = compat.server_capabilities(lsp_client).executeCommandProvider
  local offered = type(provider) == "table" and provider.commands or {}
  local missing = {}
  local needed = { protocol.ASK, protocol.CANCEL, protocol.NEW_SESSION, protocol.SESSIONS }
  for _, command in ipairs(needed) do
    if not vim.tbl_contains(offered, command) then
      missing[#missing + 1] = command
    end
  end
  if #missing > 0 then
    report.error("the server does not offer " .. table.concat(missing, ", "), {
      "is `" .. cmd[1] .. "` lsp-agent, and a version that matches this plugin?",
    })
    return
  end

  local response, err = compat.request_sync(lsp_client, "workspace/executeCommand", {
    command = protocol.STATUS,
    arguments = { vim.empty_dict() },
  }, TIMEOUT_MS, 0)
  if not response or response.err then
    local message = err or (response and response.err and response.err.message) or "no answer"
    report.error("lspAgent.status failed: " .. tostring(message))
    return
  end
  local status = response.result
  report.ok("lsp-agent version " .. tostring(status.version))
  local lines = require("lsp_agent").format_status(status, entry)
  if status.model == nil or status.model == vim.NIL then
    report.error("no model configured", {
      "set it in setup(): settings = { model = 'qwen2.5-coder:7b' }",
      "or in the environment: LSP_AGENT_MODEL=...",
    })
  else
    report.info(lines[2])
  end
  report.info(lines[3])
  report.info(lines[5])
end

return M
