--- Protocol names of the lsp-agent server, mirrored once from `lsp_agent/lsp/names.py`.
---
--- Every other module takes these names from here; when the server renames something,
--- this file is the one place to follow.
local M = {}

--- `workspace/executeCommand` commands (docs/protocol.md).
M.ASK = "lspAgent.ask"
M.START = "lspAgent.start"
M.CANCEL = "lspAgent.cancel"
M.NEW_SESSION = "lspAgent.newSession"
M.SESSIONS = "lspAgent.sessions"
M.STATUS = "lspAgent.status"
M.HISTORY = "lspAgent.history"
M.UNDO_TURN = "lspAgent.undoTurn"
M.MODELS = "lspAgent.models"

--- Server → client notification for every step of a turn: `{session, turn, kind, ...}`.
M.EVENT = "lspAgent/event"

--- The settings section, in `initializationOptions` and `workspace/configuration`.
M.SETTINGS_SECTION = "lspAgent"

--- What the client says about itself, in `initializationOptions` beside the settings.
M.CLIENT_SECTION = "lspAgentClient"

return M
