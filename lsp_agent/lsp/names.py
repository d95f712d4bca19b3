"""Protocol names, defined once here and mirrored once in each editor plugin."""

from __future__ import annotations

ASK = "lspAgent.ask"
CANCEL = "lspAgent.cancel"
NEW_SESSION = "lspAgent.newSession"
SESSIONS = "lspAgent.sessions"
STATUS = "lspAgent.status"
COMMANDS = (ASK, CANCEL, NEW_SESSION, SESSIONS, STATUS)

EVENT = "lspAgent/event"
"""Server → client notification for every step of a turn."""

SETTINGS_SECTION = "lspAgent"
"""The settings' section, in `workspace/configuration` and `initializationOptions`."""

CLIENT_SECTION = "lspAgentClient"
"""`initializationOptions` key where a client says what it shows itself (`ClientOptions`)."""
