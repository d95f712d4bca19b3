--- The differences between Neovim 0.7.2 and current releases, in one place.
---
--- Every other module calls these instead of testing versions itself, so that nothing newer than
--- 0.7.2 is used without a fallback and nothing deprecated is used where its successor exists.
local M = {}

M.uv = vim.uv or vim.loop

--- True from Neovim 0.11: `vim.lsp.start{attach = false}` and `client:method()` calls.
M.has_011 = vim.fn.has("nvim-0.11") == 1

--- Call a method of an LSP client: `client:name(...)` on 0.11+, `client.name(...)` before.
--- @param client table
--- @param name string
local function call(client, name, ...)
  if M.has_011 then
    return client[name](client, ...)
  end
  return client[name](...)
end

--- Send a request; `handler(err, result, ctx)` gets the answer. Returns ok, request id.
function M.request(client, method, params, handler, bufnr)
  return call(client, "request", method, params, handler, bufnr)
end

--- Send a request and wait for its answer (for `:checkhealth`; never inside a handler).
function M.request_sync(client, method, params, timeout_ms, bufnr)
  return call(client, "request_sync", method, params, timeout_ms, bufnr)
end

--- Ask the server to cancel one of our requests (`$/cancelRequest`).
function M.cancel_request(client, id)
  return call(client, "cancel_request", id)
end

function M.notify(client, method, params)
  return call(client, "notify", method, params)
end

function M.stop(client, force)
  return call(client, "stop", force)
end

--- Replace the settings a client answers `workspace/configuration` with (`client.settings`
--- from 0.11, `client.config.settings` before; both are set).
function M.set_settings(client, settings)
  client.config.settings = settings
  if M.has_011 then
    client.settings = settings
  end
end

--- Start a client without attaching any buffer yet; returns its id or nil.
--- `vim.lsp.start` can do that only from 0.11 (`attach = false`); before, `start_client`
--- is the API for it (and is not deprecated there).
--- @param config table
function M.start_client(config)
  if M.has_011 then
    return vim.lsp.start(config, { attach = false })
  end
  return vim.lsp.start_client(config)
end

--- The server's capabilities (`resolved_capabilities` is all that 0.7 fills in early).
function M.server_capabilities(client)
  return client.server_capabilities or client.resolved_capabilities or {}
end

--- The version of `bufnr` as this client last reported it to servers (`didOpen`/`didChange`).
--- 0.11 leaves it unset until the first change and reads it as 0 (as its didOpen sends).
function M.buffer_version(bufnr)
  local versions = vim.lsp.util.buf_versions
  local version = versions and versions[bufnr]
  if version == nil then
    version = vim.api.nvim_buf_get_var(bufnr, "changedtick")
  end
  return version
end

--- The health report functions: `vim.health` from 0.9/0.10, the `health` module in 0.7.
function M.health()
  local health = vim.health or require("health")
  return {
    start = health.start or health.report_start,
    ok = health.ok or health.report_ok,
    info = health.info or health.report_info,
    warn = health.warn or health.report_warn,
    error = health.error or health.report_error,
  }
end

--- Run a `User` autocommand if anyone listens (0.7 has no `data` field, so none is passed).
--- @param pattern string
function M.user_event(pattern)
  local ok, listeners = pcall(vim.api.nvim_get_autocmds, { event = "User", pattern = pattern })
  if ok and #listeners > 0 then
    vim.api.nvim_exec_autocmds("User", { pattern = pattern, modeline = false })
  end
end

--- True when the current code runs in a coroutine that a server request handler may yield:
--- Neovim 0.10+ runs handlers of server requests in one and answers with what they return when
--- resumed; 0.7 to 0.9 call them plainly and answer at once.
function M.can_yield()
  local co, is_main = coroutine.running()
  return co ~= nil and not is_main
end

return M
