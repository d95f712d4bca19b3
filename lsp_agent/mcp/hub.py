"""The MCP servers of one workspace's agent: started for the sessions that need them.

A session's first turn calls `open_session`: the configuration is read again (a server added
since applies from this session on), the workspace's own servers the user has not answered for
are put to the user (`approvals.py`), the servers in use are started — the SDK imported in a
worker thread the first time — and their tools become the session's `McpTools`, fixed for its
life. A server that cannot start leaves its tools out and the model is told once, in the
reminder. Calls go to the server's `Connection`; its faults come back as the call's result.

With no server configured nothing is started and the SDK is never imported; this module is
the only one of `mcp/` the agent loads before a session reads the configuration.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_agent.config import Settings
from lsp_agent.context.cap import Excerpt, Spills
from lsp_agent.safety.untrusted import mark_untrusted

if TYPE_CHECKING:
    from lsp_agent.mcp.catalog import Catalog, McpTool
    from lsp_agent.mcp.connection import Connection, StartFailed
    from lsp_agent.mcp.servers import Configured, ServerSpec

Asker = Callable[[str, str, Sequence[str]], Awaitable[str | None]]
"""Asks the user `(name, text, actions)`; the action chosen, or None."""

INSTALL = "pip install '.[mcp]' from the lsp-agent checkout it was installed from"
NO_SDK = (
    "MCP servers are configured ({names}) but the MCP SDK is not installed in lsp-agent's "
    f"Python: install it with {INSTALL} (the same environment as lsp-agent)"
)


@dataclass
class Answer:
    """What a call of an MCP tool gave, for the tool belt."""

    ok: bool
    text: str
    """What the model reads before the answer itself."""
    summary: str
    output: Excerpt | None = None
    """The server's answer, capped (None when there is none)."""
    reason: str | None = None


@dataclass
class McpTools:
    """One session's MCP tools, fixed when its first turn started them."""

    catalog: Catalog | None = None
    """None: the session has no MCP tools."""
    hub: McpHub | None = None

    def __contains__(self, name: object) -> bool:
        return self.catalog is not None and name in self.catalog

    def __getitem__(self, name: str) -> McpTool:
        assert self.catalog is not None
        return self.catalog[name]

    def schemas(self, read_only: bool = False) -> list[dict[str, Any]]:
        return self.catalog.schemas(read_only) if self.catalog is not None else []

    async def call(
        self, tool: McpTool, arguments: Mapping[str, Any], spills: Spills, limit: int
    ) -> Answer:
        assert self.hub is not None
        return await self.hub.call(tool, arguments, spills, limit)


class McpHub:
    """The MCP servers of one workspace, shared by its sessions."""

    def __init__(
        self,
        root: Path,
        settings: Callable[[], Settings],
        *,
        home: Path | None,
        state: Path,
        log: Callable[[str], None],
        warn: Callable[[str], None],
    ) -> None:
        self.root = root
        self.settings = settings
        """The settings in effect (`mcpServers`), read at each session's start."""
        self.home = home
        """Where `~/.agents/mcp.json` and `~/.agents/env` are."""
        self.state = state
        """The workspace's state folder, where the answers about its own servers are kept."""
        self.log = log
        self.warn = warn
        """One line the user sees: a configuration that cannot be used, a server that does not
        start, a missing SDK (each said once)."""
        self._warned: set[str] = set()
        self.problems: tuple[str, ...] = ()
        """What was wrong with the configuration as last read."""
        self.connections: dict[str, Connection] = {}
        """The servers started at least once, by name."""
        self.confirmations: dict[str, str] = {}
        """For the workspace's own servers, by name: `confirmed`, `declined` (remembered),
        `notNow` or `unanswered` (asked again at the next session)."""
        self.left_out: dict[str, dict[str, str]] = {}
        """By server: the tools its last session was not offered, and why."""
        self.missing_sdk: str | None = None
        """Why no server can start (the SDK is not installed), once a session found out."""
        self._lock = asyncio.Lock()

    async def open_session(self, ask: Asker) -> tuple[McpTools, list[str]]:
        """The tools of a session that starts now, and what the model should hear about the
        servers (told once, in the reminder). Never fails the turn: a fault of ours leaves the
        session without MCP tools, says so in the log, and the model hears it."""
        try:
            return await self._open_session(ask)
        except Exception as bug:
            self.log("".join(traceback.format_exception(bug)))
            note = (
                f"lsp-agent could not prepare the MCP servers ({type(bug).__name__}: {bug}); "
                "their tools are not available in this session."
            )
            return McpTools(hub=self), [note]

    async def _open_session(self, ask: Asker) -> tuple[McpTools, list[str]]:
        from lsp_agent.mcp.servers import configured

        async with self._lock:
            settings = self.settings()
            found = await asyncio.to_thread(configured, self.root, settings.mcp_servers, self.home)
            for problem in found.problems:
                self._warn_once(problem)
            self.problems = found.problems
            await self._forget_removed({spec.name for spec in found.servers})
            if not found.servers:
                return McpTools(hub=self), []
            if importlib.util.find_spec("mcp") is None:
                names = ", ".join(spec.name for spec in found.servers)
                self.missing_sdk = NO_SDK.format(names=names)
                self._warn_once(self.missing_sdk)
                note = (
                    f"The user configured MCP servers ({names}), but lsp-agent cannot start "
                    f"them: the MCP SDK is not installed. If their tools are needed, tell the "
                    f"user to run {INSTALL} in lsp-agent's Python environment."
                )
                return McpTools(hub=self), [note]
            self.missing_sdk = None
            wanted = [spec for spec in found.servers if await self._confirmed(spec, ask)]
            if not wanted:
                return McpTools(hub=self), []
            try:
                module = await asyncio.to_thread(
                    importlib.import_module, "lsp_agent.mcp.connection"
                )
            except ImportError as error:  # an SDK of another major version, a broken install
                names = ", ".join(spec.name for spec in wanted)
                self.missing_sdk = (
                    f"MCP servers are configured ({names}) but the MCP SDK cannot be loaded "
                    f"({error}): install what lsp-agent needs with {INSTALL}"
                )
                self._warn_once(self.missing_sdk)
                return McpTools(hub=self), [f"{self.missing_sdk}. Tell the user."]
            connections = [await self._connection(spec, module) for spec in wanted]
            failures = await asyncio.gather(*(self._ready(c) for c in connections))
        from lsp_agent.mcp.catalog import Catalog

        catalog = Catalog()
        notes = []
        for connection, failure in zip(connections, failures, strict=True):
            if failure is None:
                left_out = catalog.add(connection.spec, connection.tools, self.log)
                self.left_out[connection.spec.name] = left_out
                continue
            name = connection.spec.name
            self._warn_once(f"MCP server {name!r} did not start: {failure.message}")
            note = (
                f"The MCP server {name!r} could not start ({failure.message}); its tools are "
                "not available in this session."
            )
            if failure.said:
                note += " Its stderr ended with:\n" + mark_untrusted(
                    failure.said, f"mcp server {name} stderr"
                )
            notes.append(note)
        return McpTools(catalog, self), notes

    async def call(
        self, tool: McpTool, arguments: Mapping[str, Any], spills: Spills, limit: int
    ) -> Answer:
        """Call the tool on its server; every fault is an `Answer` that says what happened."""
        from lsp_agent.mcp import results
        from lsp_agent.mcp.connection import CallFailed

        connection = self.connections.get(tool.server)
        where = f"{tool.tool} ({tool.server})"
        if connection is None:
            text = (
                f"error: the MCP server {tool.server!r} is no longer configured; its tools are "
                "gone. Continue without it."
            )
            return Answer(False, text, f"{where}: server removed", reason="not_running")
        try:
            result = await connection.call(tool.tool, dict(arguments))
        except CallFailed as failed:
            said = None
            if failed.said:
                said = Excerpt(f"its stderr ended with:\n{failed.said}", total=len(failed.said))
            return Answer(False, f"error: {failed.message}\n", f"{where}: {failed.reason}",
                          said, failed.reason)  # fmt: skip
        excerpt = await asyncio.to_thread(results.spill, result, spills, limit, tool.name)
        if result.is_error:
            text = f"error: the tool {tool.tool!r} of the MCP server {tool.server!r} failed:\n"
            return Answer(False, text, f"{where}: the tool reported an error", excerpt, "tool")
        text = f"the tool {tool.tool!r} of the MCP server {tool.server!r} answered:\n"
        return Answer(True, text, f"{where}: {_size(excerpt)}", excerpt)

    async def aclose(self) -> None:
        """Stop every server (each within its bound, all at once)."""
        connections = list(self.connections.values())
        self.connections.clear()
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

    async def status(self) -> dict[str, Any]:
        """Each configured server (read again now) with its state and last error, for
        `lspAgent.status`."""
        return await status(self.root, self.settings().mcp_servers, self.home, self.state, self)

    async def _confirmed(self, spec: ServerSpec, ask: Asker) -> bool:
        """Whether the server may start: always for the user's own; for the workspace's, once
        the user said `Start` (now or before, for this exact command)."""
        from lsp_agent.mcp.approvals import (
            CONFIRM_ACTIONS,
            NEVER,
            NOT_NOW,
            START,
            Approvals,
            confirmation_text,
        )
        from lsp_agent.mcp.servers import WORKSPACE_FILE

        if not spec.from_workspace:
            return True
        approvals = Approvals(self.state)
        remembered = await asyncio.to_thread(approvals.answer, spec)
        if remembered is not None:
            self.confirmations[spec.name] = "confirmed" if remembered == "start" else "declined"
            return remembered == "start"
        answer = await ask(f"mcp__{spec.key}", confirmation_text(spec), CONFIRM_ACTIONS)
        if answer in (START, NEVER):
            await asyncio.to_thread(
                approvals.remember, spec, "start" if answer == START else "never"
            )
        self.confirmations[spec.name] = {START: "confirmed", NEVER: "declined"}.get(
            answer or "", "notNow" if answer == NOT_NOW else "unanswered"
        )
        self.log(f"MCP server {spec.name!r} of {WORKSPACE_FILE}: {self.confirmations[spec.name]}")
        return answer == START

    async def _connection(self, spec: ServerSpec, module: Any) -> Connection:
        """The server's connection, a new one when its configuration changed."""
        current = self.connections.get(spec.name)
        if current is not None and current.spec.fingerprint() == spec.fingerprint():
            return current
        if current is not None:
            await current.stop()
        made: Connection = module.Connection(spec, home=self.home, log=self.log)
        self.connections[spec.name] = made
        return made

    async def _ready(self, connection: Connection) -> StartFailed | None:
        """Start it unless it runs; None, or why it could not start."""
        from lsp_agent.mcp.connection import StartFailed

        connection.restarts_in_a_row = 0
        try:
            await connection.start()
        except StartFailed as failed:
            return failed
        return None

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.warn(message)

    async def _forget_removed(self, names: set[str]) -> None:
        for name in [n for n in self.connections if n not in names]:
            await self.connections.pop(name).stop()
            self.log(f"MCP server {name!r} is no longer configured: stopped")


async def status(
    root: Path,
    setting: Mapping[str, Any] | None,
    home: Path | None,
    state: Path,
    hub: McpHub | None,
) -> dict[str, Any]:
    """The `mcp` part of `lspAgent.status`, `{servers, problems}`: each configured server
    (the configuration read now) with what it is doing; for a folder without an agent yet,
    what is configured."""

    from lsp_agent.mcp.approvals import Approvals
    from lsp_agent.mcp.servers import configured

    approvals = Approvals(state)

    def read() -> tuple[Configured, dict[str, Any], bool]:
        found = configured(root, setting, home)
        remembered = {s.name: approvals.answer(s) for s in found.servers if s.from_workspace}
        return found, remembered, importlib.util.find_spec("mcp") is not None

    found, remembered, installed = await asyncio.to_thread(read)
    servers = []
    for spec in found.servers:
        entry = spec.describe()
        connection = hub.connections.get(spec.name) if hub is not None else None
        if connection is not None and connection.spec.fingerprint() == spec.fingerprint():
            entry.update(connection.status())
            left_out = hub.left_out.get(spec.name) if hub is not None else None
            if left_out:
                entry["leftOut"] = [{"tool": tool, "why": why} for tool, why in left_out.items()]
        else:
            entry.update({"state": "notStarted", "tools": 0, "calls": 0, "lastError": None})
        if not installed:
            entry.update(state="unavailable", lastError=NO_SDK.format(names=spec.name))
        elif hub is not None and hub.missing_sdk is not None:
            entry.update(state="unavailable", lastError=hub.missing_sdk)
        if spec.from_workspace:
            asked = hub.confirmations.get(spec.name) if hub is not None else None
            answer = remembered.get(spec.name)
            told = {"start": "confirmed", "never": "declined"}.get(answer or "")
            entry["confirmation"] = told or asked or "notAsked"
        servers.append(entry)
    return {"servers": servers, "problems": list(found.problems)}


def _size(excerpt: Excerpt) -> str:
    if excerpt.spill is not None:
        return f"{excerpt.total:,} bytes, capped"
    return f"{excerpt.total:,} bytes"
