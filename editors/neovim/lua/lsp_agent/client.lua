--- Starting the lsp-agent server, attaching buffers to it, and sending it commands.
---
--- One server runs per workspace root. It starts on the first `:LspAgent` command, not when Neovim
--- does, and from then on every file buffer under its root is attached so that the agent reads
--- unsaved text and its edits are pinned to buffer versions.
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local protocol = require("lsp_agent.protocol")
local state = require("lsp_agent.state")

local M = {}

M.NAME = "lsp-agent"

--- Buffer variable of the chat's buffers: the workspace root they belong to, so that a command
--- run from the chat goes to the server of that root.
M.ROOT_VAR = "lsp_agent_root"

local function normalize(path)
  local real = compat.uv.fs_realpath(path)
  return (real or path):gsub("/+$", "")
end

--- The folder of a buffer's file, or the current directory for other buffers.
local function start_dir(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.bo[bufnr].buftype == "" and name ~= "" then
    return vim.fn.fnamemodify(name, ":p:h")
  end
  return vim.fn.getcwd()
end

--- The workspace root for a buffer: `root_dir` when set, else the nearest folder upwards that
--- holds one of `root_markers`, else the current directory.
--- @param bufnr integer
--- @return string
function M.root_for(bufnr)
  -- The chat's buffers belong to the workspace of their chat.
  local own = vim.b[bufnr][M.ROOT_VAR]
  if type(own) == "string" and own ~= "" then
    return own
  end
  local options = config.options
  if type(options.root_dir) == "function" then
    local root = options.root_dir(bufnr)
    if root then
      return normalize(root)
    end
  elseif type(options.root_dir) == "string" then
    return normalize(vim.fn.expand(options.root_dir))
  end
  local dir = start_dir(bufnr)
  while true do
    for _, marker in ipairs(options.root_markers) do
      if compat.uv.fs_stat(dir .. "/" .. marker) then
        return normalize(dir)
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return normalize(vim.fn.getcwd())
end

--- True when the buffer is a file inside `root`.
local function belongs(bufnr, root)
  if not vim.api.nvim_buf_is_loaded(bufnr) or vim.bo[bufnr].buftype ~= "" then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return false
  end
  local path = normalize(vim.fn.fnamemodify(name, ":p"))
  return vim.startswith(path, root .. "/")
end

--- Attach a buffer to the server of its root, if that server runs.
--- @param bufnr integer
function M.attach(bufnr)
  for id, entry in pairs(state.clients) do
    if belongs(bufnr, entry.root) and not vim.lsp.buf_is_attached(bufnr, id) then
      vim.lsp.buf_attach_client(bufnr, id)
    end
  end
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.workspace = caps.workspace or {}
  caps.workspace.applyEdit = true
  -- 0.7 answers `workspace/configuration` but does not say so: without this the server would
  -- never ask, and a second setup() would not reach it.
  caps.workspace.configuration = true
  caps.workspace.workspaceEdit = vim.tbl_extend("force", caps.workspace.workspaceEdit or {}, {
    documentChanges = true,
    -- The review applies created files but not renames or deletes: claim only what it does,
    -- so the server tells the model instead of sending an edit the plugin must refuse.
    resourceOperations = { "create" },
    -- The server marks every edit with `needsConfirmation`: false in its `auto` mode, which
    -- lets the review step aside (see workspace_edit.needs_confirmation).
    changeAnnotationSupport = { groupsOnLabel = false },
  })
  return caps
end

--- The `lspAgent` settings section to send (an empty one as a JSON object, not a list).
function M.settings()
  local section = config.options.settings or {}
  if vim.tbl_isempty(section) then
    return vim.empty_dict()
  end
  return section
end

--- What the plugin tells the server about itself (`initializationOptions.lspAgentClient`):
--- it wants `lspAgent/event`, shows answers and progress itself (no showMessage or
--- showDocument with the answer), and how a message should name a setting to its user.
M.CLIENT_INFO = {
  events = true,
  showsAnswers = true,
  settingName = "setup({ settings = { %s = … } })",
}

--- Start the server for `root`; returns the client id or nil (the user was told why).
local function start(root)
  local cmd = config.options.cmd
  if vim.fn.executable(cmd[1]) == 0 then
    vim.notify(
      (
        "lsp-agent: %s is not executable: install the server from a clone of the lsp-agent "
        .. "repository (pipx install /path/to/lsp-agent), or set `cmd` in "
        .. "require('lsp_agent').setup() to its full path; :checkhealth lsp_agent says more"
      ):format(cmd[1]),
      vim.log.levels.ERROR
    )
    return nil
  end
  local handlers = {
    [protocol.EVENT] = function(...)
      return require("lsp_agent.events").on_event(...)
    end,
    ["workspace/applyEdit"] = function(...)
      return require("lsp_agent.review").handler(...)
    end,
    ["window/showMessageRequest"] = function(...)
      return require("lsp_agent.questions").handler(...)
    end,
    ["$/cancelRequest"] = function(...)
      return require("lsp_agent.decisions").on_cancel_request(...)
    end,
  }
  local id = compat.start_client({
    name = M.NAME,
    cmd = cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = {
      [protocol.SETTINGS_SECTION] = M.settings(),
      [protocol.CLIENT_SECTION] = M.CLIENT_INFO,
    },
    settings = { [protocol.SETTINGS_SECTION] = M.settings() },
    capabilities = capabilities(),
    handlers = handlers,
    -- The agent plans edits against the buffer text it was sent: send every change at once,
    -- so that a version it pins is the version the buffer has.
    flags = { debounce_text_changes = 0 },
    on_init = function(client)
      local entry = state.get(client.id, root)
      entry.ready = true
      local waiting = entry.waiting
      entry.waiting = {}
      for _, fn in ipairs(waiting) do
        fn(client)
      end
    end,
    on_exit = function(code, signal, client_id)
      vim.schedule(function()
        require("lsp_agent.decisions").withdraw_all(client_id, "the server exited")
        require("lsp_agent.events").server_exited(client_id, code, signal)
        state.forget(client_id)
      end)
    end,
  })
  if not id then
    vim.notify(
      "lsp-agent: the server did not start: see :checkhealth lsp_agent",
      vim.log.levels.ERROR
    )
    return nil
  end
  state.get(id, root)
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if belongs(bufnr, root) then
      vim.lsp.buf_attach_client(bufnr, id)
    end
  end
  return id
end

--- The client of the workspace `root`, started when `create` and none runs.
--- @param root string
--- @param create boolean|nil
--- @return integer|nil client id
function M.for_root(root, create)
  local id = state.client_for_root(root)
  if id or not create then
    return id
  end
  return start(root)
end

--- The client for the current buffer's workspace, started when `create` and none runs.
--- @param create boolean|nil
--- @return integer|nil client id
function M.current(create)
  local bufnr = vim.api.nvim_get_current_buf()
  local root = M.root_for(bufnr)
  local id = state.client_for_root(root)
  if id then
    return id
  end
  -- From a buffer outside every root (the answer buffer, a help page), use a running server.
  if vim.bo[bufnr].buftype ~= "" and not vim.b[bufnr][M.ROOT_VAR] then
    local any = next(state.clients)
    if any and vim.lsp.get_client_by_id(any) then
      return any
    end
  end
  return M.for_root(root, create)
end

--- Call `fn(client)` once the server has answered `initialize`.
--- @param id integer
--- @param fn fun(client: table)
function M.when_ready(id, fn)
  local entry = state.get(id)
  local client = vim.lsp.get_client_by_id(id)
  if entry.ready and client then
    fn(client)
  else
    table.insert(entry.waiting, fn)
  end
end

--- Run one of the server's commands; `callback(err, result)` gets its answer. With a
--- `work_done_token` the server reports the command's progress (`$/progress`) under it.
--- @return boolean, integer|nil sent, request id
function M.execute(client, command, argument, callback, work_done_token)
  local params = {
    command = command,
    arguments = { argument or vim.empty_dict() },
    workDoneToken = work_done_token,
  }
  return compat.request(client, "workspace/executeCommand", params, function(err, result)
    callback(err, result)
  end, 0)
end

--- A new work-done token: the server reports the turn as `$/progress` under it, which progress
--- plugins (fidget.nvim, lualine) show.
--- @return string
function M.work_done_token()
  state.tokens = state.tokens + 1
  return ("lsp-agent-%d"):format(state.tokens)
end

--- Stop every server this plugin started, and forget them at once (the next command must not
--- pick up a server that is still shutting down).
function M.stop_all()
  for id in pairs(vim.deepcopy(state.clients)) do
    local client = vim.lsp.get_client_by_id(id)
    state.forget(id)
    if client then
      compat.stop(client)
    end
  end
end

return M
