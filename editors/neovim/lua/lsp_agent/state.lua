--- What the plugin remembers about each running server: the one home for mutable state.
local M = {}

--- @class lsp_agent.ClientState
--- @field root string the workspace folder the server was started for
--- @field ready boolean the server answered `initialize`
--- @field waiting function[] calls to make once ready
--- @field session string|nil the conversation `:LspAgent ask` continues (nil: the server's latest)
--- @field running lsp_agent.Running|nil the turn in progress
--- @field step string|nil what the running turn is doing, for the statusline
--- @field status_shown boolean|nil the turn's `status` event was written (no second status line)
--- @field usage table|nil the last `usage` event: tokens of the last model call, context fill

--- @class lsp_agent.Running
--- @field kind string "ask" (`lspAgent.ask`, answered when the turn ends) or "chat"
---   (`lspAgent.start`, answered at once; the `status` event ends the turn)
--- @field view string where the turn is shown: "answer" (the answer buffer) or "chat"
--- @field prompt string
--- @field where string|nil what the prompt is about ("hello.py, lines 2-4")
--- @field session string|nil the turn's session, once known
--- @field request_id integer|nil the `ask`/`start` request
--- @field cancel_when_known boolean|nil cancelled before its session was known

--- @class lsp_agent.Chat
--- @field root string the workspace folder
--- @field conversation integer the conversation buffer (read-only Markdown)
--- @field input integer the input buffer the user types the next prompt in
--- @field session string|nil the session shown, which the next prompt continues
--- @field loaded boolean|nil the conversation was drawn for `session` (or is being drawn)
--- @field loading boolean|nil its history is being fetched (live events wait for it)
--- @field queued function|nil a prompt sent while loading, sent once the history is drawn
--- @field context lsp_agent.Target|nil the selection that goes along with the next prompt
--- @field turn table|nil token use of the last turn: {input, cached, output, cost}
--- @field total table|nil token use of the session, from `lspAgent.status` and live events
--- @field context_tokens integer|nil the context's fill after the last model call
--- @field context_window integer|nil

--- @type table<integer, lsp_agent.ClientState>
M.clients = {}

--- The answer buffer of each workspace root: it outlives the server (`:LspAgent restart`).
--- @type table<string, integer>
M.answer_bufs = {}

--- The chat of each workspace root (chat.lua): like the answer buffer, it outlives the server.
--- @type table<string, lsp_agent.Chat>
M.chats = {}

--- Reviews and questions waiting for the user, oldest first (see decisions.lua).
--- @type table[]
M.decisions = {}

--- Setup warnings already shown: each is said once.
--- @type table<string, boolean>
M.warned = {}

--- Work-done tokens handed out so far (each `lspAgent.ask` and `lspAgent.start` gets a new one).
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
