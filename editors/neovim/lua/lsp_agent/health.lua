--- `:checkhealth lsp_agent`: is the server installed, does it start, and what does it use.
local client = require("lsp_agent.client")
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local protocol = require("lsp_agent.protocol")
local state = require("lsp_agent.state")

local M = {}

--- How long the server may take to start and answer `lspAgent.status`.
local TIMEOUT_MS = 15000

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
      "install the server: pip install lsp-agent (or pipx install lsp-agent)",
      "or give its full path in setup(): cmd = { '/path/to/lsp-agent', 'serve' }",
    })
    return
  end
  report.ok(("server command: %s (%s)"):format(table.concat(cmd, " "), executable))

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
    report.ok(lines[2])
  end
  report.info(lines[3])
  if status.sandbox == "none" then
    report.warn(
      "sandbox: none — commands the agent runs are not confined (every command is asked first)"
    )
  else
    report.ok("sandbox: " .. tostring(status.sandbox))
  end
  report.info(lines[5])
end

return M
