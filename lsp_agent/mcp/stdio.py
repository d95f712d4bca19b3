"""The pipes of a stdio MCP server: our transport beside the SDK's session.

The SDK's `Client` takes any transport that yields its two message streams; this one starts the
server's process and carries newline-delimited JSON-RPC over its stdin and stdout, as the SDK's
own `stdio_client` does, for three reasons measured or needed here (ARCHITECTURE.md):

- Reading is linear. The SDK joins and splits its whole buffer at every chunk, so its time
  grows with the square of a message: a 20 MB answer took 4.2 s of CPU on the event loop, a
  50 MB one 21.8 s (60 s on a loaded 2-core machine). Here it is read once and a line above a
  megabyte is parsed in a worker thread: 0.2 s and 0.5 s.
- A message has a size limit (`MAX_MESSAGE_BYTES`): past it the server is stopped and the call
  is told why, instead of memory growing without bound.
- The process is ours to stop: it runs in a process group of its own, its stderr goes to the
  log line by line (the last lines are kept for error messages), and stopping it is bounded —
  stdin closed, then SIGTERM and SIGKILL to the whole group — short enough to fit in the grace
  the language server has once the editor left.

The messages themselves are the SDK's: `mcp_types` parses each line, the session does the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
"""What the SDK's session reads the server's messages from, and writes its own to."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A longer line from the server stops it: the call is told the answer was too large."""
THREAD_PARSE_BYTES = 1024 * 1024
"""A line longer than this is parsed in a worker thread, off the event loop."""
TAIL_LINES = 20
"""Lines of the server's stderr kept for error messages."""
LOGGED_LINES = 500
"""Lines of stderr logged per start; the rest only counted (a server that floods its stderr
must not flood the editor's log)."""
EOF_GRACE_S = 0.4
"""How long a server has to exit once its stdin closed."""
TERM_GRACE_S = 0.3
"""How long its process group has after SIGTERM, before SIGKILL."""
KILL_GRACE_S = 1.0
"""How long the kernel gets to take a killed process away (it cannot refuse)."""


class Pipes:
    """One run of a stdio server's process: its messages, its stderr, and its end."""

    def __init__(
        self,
        name: str,
        command: str,
        args: tuple[str, ...],
        *,
        env: Mapping[str, str],
        cwd: Path | None,
        log: Callable[[str], None],
    ) -> None:
        self.name = name
        self.command = command
        self.args = args
        self.env = dict(env)
        self.cwd = cwd
        self.log = log
        """Where each stderr line and each fault goes, prefixed with the server's name."""
        self.pid: int | None = None
        """The process (and its process group), once started."""
        self.returncode: int | None = None
        """How it ended, once it did."""
        self.ended = False
        """Its stdout reached its end: nothing more will come."""
        self.stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
        """Its last stderr lines."""
        self.fault: str | None = None
        """What went wrong with the pipes themselves (a message too large), for the call's
        result."""
        self.garbage = 0
        """Lines of stdout that were not JSON-RPC."""
        self.first_garbage: str | None = None
        """The first of them, shortened."""
        self._process: asyncio.subprocess.Process | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Streams]:
        """Start the process; the streams of its messages until the context ends, then stop
        it (bounded, even when the caller is cancelled)."""
        process = await asyncio.create_subprocess_exec(
            self.command,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            limit=MAX_MESSAGE_BYTES,
        )
        self._process = process
        self.pid = process.pid
        incoming_sink, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_source = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as group:
            group.start_soon(self._read_messages, process, incoming_sink)
            group.start_soon(self._write_messages, process, outgoing_source, incoming_sink)
            group.start_soon(self._read_stderr, process)
            try:
                yield incoming, outgoing
            finally:
                with anyio.CancelScope(shield=True):
                    await self.stop()
                    for stream in (incoming, outgoing, incoming_sink, outgoing_source):
                        await stream.aclose()
                group.cancel_scope.cancel()

    async def stop(self) -> None:
        """End the process and everything it started: stdin closed, then its process group
        sent SIGTERM, then SIGKILL; within about `EOF_GRACE_S + TERM_GRACE_S + KILL_GRACE_S`."""
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                process.stdin.close()
        if not await _exited(process, EOF_GRACE_S):
            _signal_group(process.pid, signal.SIGTERM)
            if not await _exited(process, TERM_GRACE_S):
                _signal_group(process.pid, signal.SIGKILL)
                await _exited(process, KILL_GRACE_S)
        # What the server started and left behind in its group goes with it.
        _signal_group(process.pid, signal.SIGKILL)
        self.returncode = process.returncode

    async def ended_within(self, seconds: float) -> bool:
        """Whether the process has ended, waiting at most `seconds`."""
        return self._process is not None and await _exited(self._process, seconds)

    def exit_status(self) -> int | None:
        """The process's return code once it ended (negative: the signal that ended it)."""
        return self._process.returncode if self._process is not None else None

    def alive(self) -> bool:
        """Whether the process runs and its stdout is open."""
        process = self._process
        return process is not None and process.returncode is None and not self.ended

    async def _read_messages(
        self,
        process: asyncio.subprocess.Process,
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """stdout → the session, a line at a time; its end closes the session's stream."""
        assert process.stdout is not None
        stdout = process.stdout
        try:
            while True:
                try:
                    line = await stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError as end:
                    line = end.partial
                    if line.strip():
                        await sink.send(await self._parse(line))
                    return
                except asyncio.LimitOverrunError:
                    self.fault = (
                        f"it sent a message larger than {MAX_MESSAGE_BYTES / 1024**2:g} MB, "
                        "more than lsp-agent takes from a server, so it was stopped"
                    )
                    self.log(f"MCP server {self.name!r}: {self.fault}")
                    _signal_group(process.pid, signal.SIGKILL)
                    return
                if line.strip():
                    await sink.send(await self._parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return  # the session is gone, or the pipe broke: either way the end
        finally:
            self.ended = True
            await sink.aclose()

    async def _parse(self, line: bytes) -> SessionMessage | Exception:
        """One line as a message of the session, or the error saying why it is not one."""
        try:
            if len(line) > THREAD_PARSE_BYTES:
                message = await anyio.to_thread.run_sync(
                    types.jsonrpc_message_adapter.validate_json, line
                )
            else:
                message = types.jsonrpc_message_adapter.validate_json(line)
        except ValueError as error:  # pydantic's ValidationError is one
            self.garbage += 1
            if self.first_garbage is None:
                shown = line[:200].decode("utf-8", "replace").strip()
                self.first_garbage = shown + ("…" if len(line) > 200 else "")
                self.log(f"MCP server {self.name!r} wrote a line that is not JSON-RPC: {shown}")
            return error
        return SessionMessage(message)

    async def _write_messages(
        self,
        process: asyncio.subprocess.Process,
        source: MemoryObjectReceiveStream[SessionMessage],
        incoming_sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """The session → stdin. When the pipe breaks, the session hears that the connection
        ended, and what it still sends is dropped (a sender must never wait for ever)."""
        assert process.stdin is not None
        stdin = process.stdin
        broken = False
        try:
            async for item in source:
                if broken:
                    continue
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    stdin.write(data.encode("utf-8") + b"\n")
                    await stdin.drain()
                except (OSError, RuntimeError):
                    broken = True
                    await incoming_sink.aclose()
        except (anyio.ClosedResourceError, anyio.EndOfStream):
            return

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        """stderr → the log, line by line; the last lines kept."""
        assert process.stderr is not None
        stderr = process.stderr
        logged = 0
        pending = b""
        while True:
            try:
                chunk = await stderr.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                lines = [pending] if pending.strip() else []
            else:
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > 4096:  # a line without end: take it in parts
                    lines.append(pending)
                    pending = b""
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip()
                if not text:
                    continue
                text = text if len(text) <= 1000 else text[:1000] + "…"
                self.stderr_tail.append(text)
                logged += 1
                if logged <= LOGGED_LINES:
                    self.log(f"MCP server {self.name!r}: {text}")
                elif logged == LOGGED_LINES + 1:
                    self.log(f"MCP server {self.name!r}: further stderr lines are not logged")
            if not chunk:
                return


async def _exited(process: asyncio.subprocess.Process, within: float) -> bool:
    """Whether the process has ended, waiting at most `within` seconds (from Python 3.12,
    `wait()` also waits for its pipes to close: a child that kept them open is a reason to go
    on to the signals, which reach it too)."""
    with anyio.move_on_after(within):
        await process.wait()
    return process.returncode is not None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group led by `pid` (started with a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
