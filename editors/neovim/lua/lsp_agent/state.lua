--- What the plugin remembers about each running server: the one home for mutable state.
local M = {}

--- @class lsp_agent.ClientState
--- @field root string the workspace folder the server was started for
--- @field ready boolean the server answered `initialize`
--- @field waiting function[] calls to make once ready
--- @field session string|nil the conversation `:LspAgent ask` continues (nil: the server's latest)
--- @field running table|nil the turn in progress: {request_id, session, prompt}
--- @field step string|nil what the running turn is doing, for the statusline
--- @field in_text boolean|nil the answer buffer ends in streamed text (the next chunk continues it)
--- @field status_shown boolean|nil the turn's `status` event was written (no second status line)
--- @field usage table|nil the last `usage` event: tokens of the last model call, context fill

--- @type table<integer, lsp_agent.ClientState>
M.clients = {}

--- The answer buffer of each workspace root: it outlives the server (`:LspAgent restart`).
--- @type table<string, integer>
M.answer_bufs = {}

--- Reviews and questions waiting for the user, oldest first (see decisions.lua).
--- @type table[]
M.decisions = {}

--- Setup warnings already shown: each is said once.
--- @type table<string, boolean>
M.warned = {}

--- Work-done tokens handed out so far (each `lspAgent.ask` gets a new one).
M.tokens = 0

--- The state of a client, created on first use.
--- @param client_id integer
--- @param root string|nil
--- @return lsp_agent.ClientState
function M.get(client_id, root)
  local entry = M.clients[client_id]
  if not entry then
    entry = { root = root or "", ready = false, waiting = {} }
    M.clients[client_id] = entry
  end
  return entry
end

--- The id of the client started for `root`, if it still runs.
--- @param root string
--- @return integer|nil
function M.client_for_root(root)
  for id, entry in pairs(M.clients) do
    if entry.root == root and vim.lsp.get_client_by_id(id) then
      return id
    end
  end
  return nil
end

--- Forget a client (it exited).
function M.forget(client_id)
  M.clients[client_id] = nil
end

return M
