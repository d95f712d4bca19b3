"""Protocol names, defined once here and mirrored once in each editor plugin."""

from __future__ import annotations

ASK = "lspAgent.ask"
START = "lspAgent.start"
CANCEL = "lspAgent.cancel"
NEW_SESSION = "lspAgent.newSession"
SESSIONS = "lspAgent.sessions"
STATUS = "lspAgent.status"
HISTORY = "lspAgent.history"
UNDO_TURN = "lspAgent.undoTurn"
MODELS = "lspAgent.models"
COMMANDS = (ASK, START, CANCEL, NEW_SESSION, SESSIONS, HISTORY, UNDO_TURN, MODELS, STATUS)
"""Every command, in the order the server registers them (its `initialize` answer lists them)."""

EVENT = "lspAgent/event"
"""Server → client notification for every step of a turn."""

SETTINGS_SECTION = "lspAgent"
"""The settings' section, in `workspace/configuration` and `initializationOptions`."""

CLIENT_SECTION = "lspAgentClient"
"""`initializationOptions` key where a client says what it shows itself (`ClientOptions`)."""
