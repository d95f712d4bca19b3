"""One MCP server, held through the official SDK's `Client`: started, listed, called, stopped.

Importing this module imports the SDK (about half a second and 40 MB): the hub does it in a
worker thread, and only once a server is configured. A server's `Client` lives in a task of its
own (`_hold`), since the SDK's context must be entered and left by one task; calls come from
the turns' tasks. Every fault ends as a sentence: `StartFailed` when it cannot start,
`CallFailed` for a call the model must hear about (no answer in time, the server stopped
mid-call, an answer that is not a tool result, a message too large). A server that stopped is
started again at its next call, `MAX_RESTARTS` times in a row at most.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lsp_agent import __version__
from lsp_agent.mcp.catalog import ListedTool
from lsp_agent.mcp.servers import MissingVariable, ServerSpec, expand, variable_lookup
from lsp_agent.mcp.stdio import MAX_MESSAGE_BYTES, Pipes

MAX_RESTARTS = 3
"""Starts in a row after the server stopped without a call answered between them; then it
stays stopped until the next session."""
MAX_PAGES = 20
"""Pages of `tools/list` read at most (a server whose cursor never ends cannot hang a start)."""
STOP_BOUND_S = 2.5
"""How long stopping one server may take at most (the pipes' own bound, and a margin)."""
EXIT_WAIT_S = 0.5
"""After a server's connection closed mid-call, how long its exit status is waited for."""
GUARD_S = 5.0
"""Beyond a call's own time limit, how long before it is abandoned whatever the SDK does."""

RUNNING = "running"
STARTING = "starting"
STOPPED = "stopped"
"""Stopped on its own (crashed, or its connection broke): started again at the next call."""
FAILED = "failed"
"""Could not start (or stopped too often): tried again at the next session."""


class StartFailed(Exception):
    """The server could not be started; `message` says why, for the model and the user."""

    def __init__(self, message: str, said: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.said = said
        """The last lines of the server's stderr: its own words, outside text."""


class CallFailed(Exception):
    """A call that got no usable answer; `message` is what the model is told."""

    def __init__(self, message: str, reason: str, said: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        """`timeout`, `crash`, `garbage`, `too_large`, `refused` or `not_running`."""
        self.said = said
        """The last lines of the server's stderr, when they may explain it (outside text)."""


class Connection:
    """One configured server and its current run."""

    def __init__(self, spec: ServerSpec, *, home: Path | None, log: Callable[[str], None]) -> None:
        self.spec = spec
        self.home = home
        """Where `~/.agents/env` is, for the `${NAME}` its values may hold."""
        self.log = log
        self.state = STOPPED
        self.last_error: str | None = None
        """The last fault, as a sentence (kept after a restart, for `status`)."""
        self.tools: list[ListedTool] = []
        """What it listed at its last start."""
        self.calls = 0
        """Calls answered since the hub began."""
        self.starts = 0
        self.restarts_in_a_row = 0
        self.pipes: Pipes | None = None
        """A stdio server's current process."""
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    def running(self) -> bool:
        if self.state != RUNNING or self._client is None:
            return False
        return self.pipes is None or self.pipes.alive()

    async def start(self) -> None:
        """Start the server unless it runs; `StartFailed` says why it could not."""
        async with self._lock:
            if self.running():
                return
            await self._end_run()
            self.state = STARTING
            self.starts += 1
            try:
                self.tools = await self._start()
            except StartFailed as failed:
                self.state, self.last_error = FAILED, _with(failed.message, failed.said)
                self.log(f"MCP server {self.spec.name!r} did not start: {self.last_error}")
                raise
            except BaseException:  # cancelled with the turn that started it
                self.state = STOPPED
                raise
            self.state = RUNNING
            self.log(
                f"MCP server {self.spec.name!r} started ({self.spec.transport}"
                + (f", pid {self.pipes.pid}" if self.pipes is not None else "")
                + f"), {len(self.tools)} tools"
            )

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call a tool; `CallFailed` with what the model is told when no answer is usable."""
        name = self.spec.name
        if not self.running():
            if self.restarts_in_a_row >= MAX_RESTARTS:
                raise CallFailed(
                    f"the MCP server {name!r} stopped {MAX_RESTARTS} times in a row and is not "
                    f"started again before the next session (last: {self.last_error})",
                    "not_running",
                )
            self.restarts_in_a_row += 1
            try:
                await self.start()
            except StartFailed as failed:
                raise CallFailed(
                    f"the MCP server {name!r} had stopped and could not be started again: "
                    f"{failed.message}",
                    "not_running",
                    failed.said,
                ) from None
        client, pipes = self._client, self.pipes
        assert client is not None
        limit = self.spec.call_timeout
        try:
            async with asyncio.timeout(limit + GUARD_S):
                result = await client.call_tool(tool, arguments, read_timeout_seconds=limit)
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED and pipes is not None:
                await pipes.ended_within(EXIT_WAIT_S)  # its exit status says what happened
            raise self._failed(error, pipes) from None
        except TimeoutError:
            raise self._no_answer(pipes) from None
        except ValueError as error:  # pydantic's ValidationError: the answer has the wrong shape
            raise self._garbage(f"its answer is not an MCP tool result ({_first(error)})") from None
        except RuntimeError as error:  # structured content that breaks the tool's output schema
            raise self._garbage(f"its answer cannot be used ({error})") from None
        except (OSError, httpx2.HTTPError, anyio.BrokenResourceError) as error:
            raise self._lost(f"the connection broke ({error})", pipes) from None
        self.calls += 1
        self.restarts_in_a_row = 0
        return result

    async def stop(self) -> None:
        """Stop the server (bounded: `STOP_BOUND_S`)."""
        async with self._lock:
            await self._end_run()
            if self.state != FAILED:
                self.state = STOPPED

    def status(self) -> dict[str, Any]:
        """For `lspAgent.status`: its state, its tools, its last fault."""
        described: dict[str, Any] = {
            "state": RUNNING if self.running() else self.state,
            "tools": len(self.tools),
            "calls": self.calls,
            "lastError": self.last_error,
        }
        if self.pipes is not None and self.pipes.pid is not None and self.running():
            described["pid"] = self.pipes.pid
        return described

    async def _start(self) -> list[ListedTool]:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[ListedTool]] = loop.create_future()
        stop = asyncio.Event()
        self._stop = stop
        self._holder = asyncio.create_task(self._hold(ready, stop), name=f"mcp:{self.spec.name}")
        limit = self.spec.start_timeout
        try:
            return await asyncio.wait_for(asyncio.shield(ready), limit)
        except TimeoutError:
            said = self._stderr()
            await self._end_run()
            raise StartFailed(f"it did not answer within {limit:g} s of starting", said) from None
        except asyncio.CancelledError:
            await self._end_run()
            raise

    async def _hold(self, ready: asyncio.Future[list[ListedTool]], stop: asyncio.Event) -> None:
        """The server's `Client`, from its start to `stop` (the SDK's context stays in one
        task). A start that fails sets `ready` to `StartFailed`."""
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(
                    transport,
                    client_info=types.Implementation(name="lsp-agent", version=__version__),
                    message_handler=self._heard,
                    cache=None,
                )
                await stack.enter_async_context(client)
                listed = await _list_tools(client)
                self._client = client
                if not ready.done():
                    ready.set_result(listed)
                await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(StartFailed("its start was cancelled"))
            raise
        except BaseException as error:
            if not ready.done():
                ready.set_exception(StartFailed(self._start_error(error), self._stderr()))
            elif self.state == RUNNING:
                self.log(f"MCP server {self.spec.name!r}: its connection ended: {_leaf(error)!r}")
        finally:
            self._client = None

    async def _transport(self, stack: AsyncExitStack) -> Any:
        """What the SDK's `Client` connects through: our pipes, or its streamable HTTP."""
        spec = self.spec
        lookup = variable_lookup(self.home)
        try:
            if spec.command is not None:
                env = get_default_environment()
                env.update({key: expand(value, lookup) for key, value in spec.env.items()})
                self.pipes = Pipes(
                    spec.name,
                    spec.command,
                    tuple(expand(arg, lookup) for arg in spec.args),
                    env=env,
                    cwd=spec.cwd,
                    log=self.log,
                )
                return self.pipes.open()
            assert spec.url is not None
            headers = {key: expand(value, lookup) for key, value in spec.headers.items()}
            url = expand(spec.url, lookup)
        except MissingVariable as missing:
            raise StartFailed(
                f"its configuration names ${{{missing.name}}}, which is set neither in the "
                "environment nor in ~/.agents/env"
            ) from None
        self.pipes = None
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        await stack.enter_async_context(http)
        return streamable_http_client(url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES)

    async def _heard(self, message: Any) -> None:
        """What the session hands over besides answers: faults of an HTTP stream are logged
        (the pipes log their own), notifications are not needed (the tool list is fixed)."""
        if isinstance(message, Exception) and self.pipes is None:
            self.log(f"MCP server {self.spec.name!r}: {message!r}")

    async def _end_run(self) -> None:
        """End the current run, if any, within `STOP_BOUND_S`."""
        holder, stop = self._holder, self._stop
        self._holder = self._stop = None
        if holder is None or stop is None:
            return
        stop.set()
        done, _ = await asyncio.wait({holder}, timeout=STOP_BOUND_S)
        if not done:
            holder.cancel()
            await asyncio.wait({holder}, timeout=STOP_BOUND_S)
        pipes = self.pipes
        if pipes is not None and pipes.alive():
            await pipes.stop()

    def _failed(self, error: MCPError, pipes: Pipes | None) -> CallFailed:
        if error.code == types.REQUEST_TIMEOUT:
            return self._no_answer(pipes)
        if error.code == types.CONNECTION_CLOSED:
            what = "it stopped during the call" if pipes else "its connection ended during the call"
            return self._lost(what, pipes)
        return CallFailed(
            f"the MCP server {self.spec.name!r} refused the call: {error.message}", "refused"
        )

    def _no_answer(self, pipes: Pipes | None) -> CallFailed:
        said = ""
        if pipes is not None and pipes.garbage:
            said = (
                f"; meanwhile it wrote {pipes.garbage} line(s) that are not MCP messages "
                f"(the first: {pipes.first_garbage!r})"
            )
        message = (
            f"the MCP server {self.spec.name!r} did not answer within "
            f"{self.spec.call_timeout:g} s{said}. The call was abandoned (it may still be "
            "running there); do not retry it as is."
        )
        self.last_error = message
        return CallFailed(message, "timeout")

    def _lost(self, what: str, pipes: Pipes | None) -> CallFailed:
        self.state = STOPPED
        if pipes is not None and pipes.fault is not None:
            message = f"the MCP server {self.spec.name!r} gave no usable answer: {pipes.fault}"
            reason = "too_large"
        else:
            code = pipes.exit_status() if pipes is not None else None
            status = f" (exit status {code})" if code is not None else ""
            message = f"the MCP server {self.spec.name!r}: {what}{status}"
            reason = "crash"
        message += ". It is started again at its next call."
        said = self._stderr()
        self.last_error = _with(message, said)
        self.log(self.last_error)
        return CallFailed(message, reason, said)

    def _garbage(self, what: str) -> CallFailed:
        message = f"the MCP server {self.spec.name!r} answered, but {what}"
        self.last_error = message
        return CallFailed(message, "garbage")

    def _start_error(self, error: BaseException) -> str:
        """Why a start failed, in a sentence."""
        leaf = _leaf(error)
        if isinstance(leaf, StartFailed):
            return leaf.message
        if isinstance(leaf, FileNotFoundError) and self.spec.command is not None:
            return f"{self.spec.command!r} is not a program lsp-agent can find (PATH, or a path)"
        if isinstance(leaf, PermissionError) and self.spec.command is not None:
            return f"{self.spec.command!r} cannot be run: {leaf.strerror}"
        if isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED:
            code = self.pipes.exit_status() if self.pipes is not None else None
            status = f" (exit status {code})" if code is not None else ""
            return f"it exited before it answered{status}"
        if isinstance(leaf, MCPError):
            return f"it refused to start a session: {leaf.message}"
        if isinstance(leaf, httpx2.HTTPError):
            return f"{self.spec.url} cannot be reached ({type(leaf).__name__}: {leaf})"
        return f"{type(leaf).__name__}: {leaf}"

    def _stderr(self) -> str:
        """The last lines of a stdio server's stderr ("" when there are none)."""
        pipes = self.pipes
        return "\n".join(list(pipes.stderr_tail)[-5:]) if pipes is not None else ""


async def _list_tools(client: Client) -> list[ListedTool]:
    """Every page of the server's tools, as the catalog takes them."""
    listed: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            annotations = tool.annotations
            listed.append(
                ListedTool(
                    tool.name,
                    tool.description or tool.title or "",
                    tool.input_schema,
                    read_only=bool(annotations is not None and annotations.read_only_hint),
                )
            )
        cursor = page.next_cursor
        if cursor is None:
            break
    return listed


def _with(message: str, said: str) -> str:
    """A fault with the server's last words, for the log and `status`."""
    return f"{message}; its stderr ended with: {' | '.join(said.splitlines())}" if said else message


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside exception groups (anyio's task groups wrap them)."""
    while isinstance(error, BaseExceptionGroup):
        inner = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        error = (inner or list(error.exceptions))[0]
    return error


def _first(error: ValueError) -> str:
    """The first of pydantic's complaints, in one line."""
    with contextlib.suppress(Exception):
        first = error.errors()[0]  # type: ignore[attr-defined]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
    return str(error).split("\n", 1)[0]
