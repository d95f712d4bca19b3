"""`lsp-agent doctor`'s MCP lines: each configured server started for real, listed, stopped.

Doctor runs outside the editor, so it sees `~/.agents/mcp.json` and the current folder's
`.mcp.json` (the editor's `lspAgent.mcpServers` is shown by `lspAgent.status`). A workspace's
server is started only when the user confirmed it in the editor before: doctor does not start
what a repository proposes either.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from pathlib import Path

from lsp_agent.config import Settings
from lsp_agent.mcp.approvals import Approvals
from lsp_agent.mcp.hub import NO_SDK
from lsp_agent.mcp.servers import WORKSPACE_FILE, ServerSpec, configured
from lsp_agent.session.store import SessionStore

Line = Callable[[str, bool | None, str], None]
"""Doctor's `line(name, ok, detail)`: ok True, False (a failure) or None (information)."""


async def check_servers(settings: Settings, root: Path, home: Path | None, line: Line) -> None:
    """One line per server: running with its tools, or why it is not."""
    found = await asyncio.to_thread(configured, root, settings.mcp_servers, home)
    for problem in found.problems:
        line("mcp", False, problem)
    if not found.servers:
        line("mcp", None, "no MCP servers configured (~/.agents/mcp.json, .mcp.json)")
        return
    if importlib.util.find_spec("mcp") is None:
        line("mcp", False, NO_SDK.format(names=", ".join(s.name for s in found.servers)))
        return
    approvals = Approvals(SessionStore(root).directory)
    outcomes = await asyncio.gather(*(_probe(spec, approvals, home) for spec in found.servers))
    for spec, (ok, detail) in zip(found.servers, outcomes, strict=True):
        line(f"mcp {spec.name}", ok, f"{spec.shown()} ({spec.source}): {detail}")


async def _probe(
    spec: ServerSpec, approvals: Approvals, home: Path | None
) -> tuple[bool | None, str]:
    """Start the server, count its tools, stop it; or say why not."""
    if spec.from_workspace:
        answer = await asyncio.to_thread(approvals.answer, spec)
        if answer == "never":
            return None, "declined in the editor: not started"
        if answer is None:
            return None, f"from {WORKSPACE_FILE}: not started until you confirm it in the editor"
    from lsp_agent.mcp.connection import Connection, StartFailed

    connection = Connection(spec, home=home, log=lambda _: None)
    try:
        await connection.start()
    except StartFailed:
        return False, f"does not start: {connection.last_error}"
    finally:
        await connection.stop()
    return True, f"starts, {len(connection.tools)} tools"
