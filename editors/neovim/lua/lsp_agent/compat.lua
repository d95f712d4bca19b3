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

--- Discard the keys typed but not yet read, so that a prompt or a decision window gets only
--- keys typed after it appeared.
function M.flush_typeahead()
  for _ = 1, 10000 do
    if vim.fn.getchar(0) == 0 then
      return
    end
  end
end

--- What a handler returns on 0.7 to 0.9 when its answer goes later (see `answer_later`).
local LATER = setmetatable({}, {
  __tostring = function()
    return "lsp-agent: answered later"
  end,
})

--- Our wrappers of Neovim's `send_response`, each to the function it wraps.
local originals = setmetatable({}, { __mode = "k" })

--- A `send_response` that sends nothing for LATER (its last argument is the result).
local function wrap(send)
  if originals[send] then
    return send
  end
  local wrapper = function(...)
    if select(select("#", ...), ...) == LATER then
      return true
    end
    return send(...)
  end
  originals[wrapper] = send
  return wrapper
end

--- The function of Neovim's RPC layer that handles the server request running now: the one
--- whose upvalue `decoded` is the request. Returns it and its upvalues by name.
local function request_frame()
  for level = 3, 40 do
    local info = debug.getinfo(level, "f")
    if not info then
      return nil
    end
    local upvalues = {}
    for i = 1, 255 do
      local name, value = debug.getupvalue(info.func, i)
      if not name then
        break
      end
      upvalues[name] = { index = i, value = value }
    end
    local decoded = upvalues.decoded and upvalues.decoded.value
    if type(decoded) == "table" and decoded.id ~= nil and type(decoded.method) == "string" then
      return info.func, upvalues
    end
  end
  return nil
end

--- How to answer the request `frame` handles after its handler returned, or nil. The RPC layer
--- sends what the handler returns with `send_response`: a local function in 0.7, a method of
--- its client object from 0.8. That function learns to skip LATER, and is called again later.
local function later_sender(frame, upvalues)
  local send = upvalues.send_response
  if send and type(send.value) == "function" then
    local wrapper = wrap(send.value)
    if wrapper ~= send.value then
      debug.setupvalue(frame, send.index, wrapper)
    end
    return function(id, result)
      originals[wrapper](id, nil, result)
    end
  end
  local rpc = upvalues.self and upvalues.self.value
  if type(rpc) == "table" and type(rpc.send_response) == "function" then
    local wrapper = wrap(rpc.send_response)
    rpc.send_response = wrapper
    return function(id, result)
      originals[wrapper](rpc, id, nil, result)
    end
  end
  return nil
end

--- @class lsp_agent.Later
--- @field id integer|string|nil the JSON-RPC id of the request (for `$/cancelRequest`)
--- @field answer fun(result: any) send the answer (once; later calls do nothing)
--- @field wait fun(): any what the handler returns

--- Let a server request handler answer later, when the user has decided, without blocking the
--- editor meanwhile. 0.10+ resumes the handler's coroutine. 0.7 to 0.9 answer with what the
--- handler returns, so there the handler returns a marker the RPC layer is taught to skip, and
--- the answer is sent by the same function when it comes. Nil when neither is possible.
--- @return lsp_agent.Later|nil
function M.answer_later()
  local frame, upvalues = request_frame()
  local id = upvalues and upvalues.decoded.value.id
  local later = { id = id }
  local done, value = false, nil
  if M.can_yield() then
    local co = coroutine.running()
    local waiting = false
    later.answer = function(result)
      if done then
        return
      end
      done, value = true, result
      if waiting then
        vim.schedule(function()
          coroutine.resume(co, result)
        end)
      end
    end
    later.wait = function()
      if done then
        return value
      end
      waiting = true
      return coroutine.yield()
    end
    return later
  end
  local send = frame and later_sender(frame, upvalues)
  if not send then
    return nil
  end
  local returned = false
  later.answer = function(result)
    if done then
      return
    end
    done, value = true, result
    if returned then
      send(id, result)
    end
  end
  later.wait = function()
    if done then
      return value
    end
    returned = true
    return LATER
  end
  return later
end

return M
