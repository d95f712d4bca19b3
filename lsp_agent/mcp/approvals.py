"""What the user answered about a workspace's own MCP servers, remembered for that workspace.

A server of the workspace's `.mcp.json` starts only after the user confirmed its command line
(or URL). The answer is kept in the workspace's state folder, beside its sessions and outside
the workspace itself (a repository cannot ship a confirmation), keyed by the server's
fingerprint: a changed command is a new server to confirm. `Start` and `Never` are kept; a
question dismissed, unanswered or answered `Not now` is asked again at the next session.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from lsp_agent.mcp.servers import WORKSPACE_FILE, ServerSpec

Answer = Literal["start", "never"]

START = "Start"
NOT_NOW = "Not now"
NEVER = "Never"
CONFIRM_ACTIONS = (START, NOT_NOW, NEVER)
"""The answers to "start this workspace's server?"; `Start` and `Never` are remembered."""

FILE_NAME = "mcp-servers.json"
"""The file in the workspace's state folder (`SessionStore.directory`)."""


class Approvals:
    """The remembered answers of one workspace; plain blocking code (small files)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME
        """Where the answers are kept."""

    def answer(self, spec: ServerSpec) -> Answer | None:
        """What the user answered about this exact server, if they did."""
        entry = self._read().get(spec.fingerprint())
        found = entry.get("answer") if isinstance(entry, dict) else None
        return found if found in ("start", "never") else None

    def remember(self, spec: ServerSpec, answer: Answer) -> None:
        """Keep the answer (written whole, then renamed: a crash leaves the old file)."""
        entries = self._read()
        entries[spec.fingerprint()] = {
            "server": spec.name,
            "shown": spec.shown(),
            "answer": answer,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".mcp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"servers": entries}, handle, indent=2, ensure_ascii=False)
        os.replace(temporary, self.path)

    def _read(self) -> dict[str, object]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        servers = document.get("servers") if isinstance(document, dict) else None
        return dict(servers) if isinstance(servers, dict) else {}


def confirmation_text(spec: ServerSpec) -> str:
    """The question before a workspace's server starts: what would run, where, with what."""
    lines = [
        f"This workspace's {WORKSPACE_FILE} asks lsp-agent to start the MCP server {spec.name!r}:",
    ]
    if spec.command is not None:
        lines.append(f"  command line: {spec.shown()}")
        lines.append(f"  in: {spec.cwd}")
        if spec.env:
            lines.append(f"  with the variables: {', '.join(sorted(spec.env))}")
        lines.append("It would run as you, outside the sandbox.")
    else:
        lines.append(f"  URL: {spec.shown()}")
        if spec.headers:
            lines.append(f"  with the headers: {', '.join(sorted(spec.headers))}")
    variables = spec.variables()
    if variables:
        lines.append(f"It would be given your environment variables: {', '.join(variables)}.")
    lines.append(
        "Its tools would be offered to the agent, each call asked. Start it? (Start and Never "
        "are remembered for this workspace until the entry changes.)"
    )
    return "\n".join(lines)
