"""Serving one editor connection: frames in on a thread, handled on the loop, and an end on time.

The loop is not run through `asyncio.run`, whose teardown waits without bound: for every task
(a `git` subprocess cancelled while being created never finishes on CPython 3.11's unix loop) and
for every worker thread (one blocked reading the editor's pipe never returns): a server whose
editor left in its first second could live on for ever.

Here the editor's messages are read by a daemon thread and handed to the loop; when the editor
leaves (`exit`, or the end of its input), the server gets `EXIT_GRACE_S` to cancel turns and stop
watching, and then the process ends, whatever a task or a thread is still doing: a watchdog timer
makes sure of it even if the loop itself is stuck. `exit` ends with code 0 after `shutdown` and
1 without, as the specification wants. SIGTERM and SIGHUP end it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import select
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, NoReturn, Protocol

from lsp_agent.lsp.framing import FrameParser, Garbage

log = logging.getLogger(__name__)

EXIT_GRACE_S = 2.0
"""Once the editor has left: how long cleanup may take before the process ends regardless."""

STALL_S = 0.5
"""Silence in the middle of a body after which a body that already holds the next message's
headers is cut there (its announced length was too large, and the editor waits for an answer)."""

SWITCH_INTERVAL_S = 0.001
"""How often a thread may take the interpreter from another (CPython's default is 5 ms)."""

CLEANUP_SHARE = 0.6
"""The share of the grace the server's own cleanup gets; the rest is for the loop's leftovers."""

YOUNG_COLLECTION_EVERY = 20_000
"""Allocations between two collections of the youngest objects (CPython's default is 700). A
long session's history is a list of a thousand messages or more, and each model call holds a
few lists of them for a moment: a collection that meets those lists reads the header of every
message in them, cold in memory, about a third of a millisecond at 1 148 messages. Rarer
collections meet them rarely; what they free (reference cycles) waits a little longer."""


class Writer(Protocol):
    """Where the server's messages go."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class Endpoint(Protocol):
    """The server side of a connection (`server.AgentServer`)."""

    left: asyncio.Event
    """Set when the editor has gone."""
    exit_code: int
    """The process's exit code once `left` is set."""

    def attach(self, writer: Writer) -> None:
        """Write every outgoing message to `writer`."""
        ...

    def receive(self, message: Any) -> None:
        """Handle one message from the editor: parsed JSON, or a `ParseError`."""
        ...

    def leave(self) -> None:
        """The editor has gone: set `left` and `exit_code`."""
        ...

    async def close(self) -> None:
        """Cancel and stop everything running: the connection is ending."""
        ...


def serve(server: Endpoint, reader: BinaryIO, writer: BinaryIO, head: bytes = b"") -> int:
    """Serve one connection until `exit` or the end of input; returns the exit code.

    The caller ends the process with `end_process(code)`: threads blocked on the editor's pipe
    cannot be interrupted, and must not be waited for.
    """
    output = _Writer(writer)
    server.attach(output)
    # The reader thread must not wait 5 ms (CPython's default) for the interpreter each time
    # the loop parses a large message: a request arriving meanwhile would wait with it.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.call_soon(output.start, loop, reader)
        code = loop.run_until_complete(_serve(server, reader, head))
        _finish_leftovers(loop, EXIT_GRACE_S * (1 - CLEANUP_SHARE))
    except BaseException:  # an error of ours: log it, and still end (non-zero)
        log.exception("lsp-agent: the server loop failed")
        code = 1
    output.finish()
    return code


async def _serve(server: Endpoint, reader: BinaryIO, head: bytes) -> int:
    loop = asyncio.get_running_loop()
    thread = threading.Thread(
        target=_read_messages,
        args=(reader, head, loop, server.receive, server.leave),
        name="lsp-reader",
        daemon=True,
    )
    thread.start()
    # SIGTERM (an editor's client after its grace, a process manager) and SIGHUP (the terminal
    # it ran in closed) end the connection as the editor leaving does: turns cancelled, the
    # commands' and MCP servers' process groups stopped, which the default action would leave.
    for number in (signal.SIGTERM, signal.SIGHUP) if sys.platform != "win32" else ():
        loop.add_signal_handler(number, server.leave)
    await server.left.wait()
    # From here on the process ends within EXIT_GRACE_S, whatever the loop is doing.
    _start_watchdog(EXIT_GRACE_S, server.exit_code)
    try:
        await asyncio.wait_for(server.close(), EXIT_GRACE_S * CLEANUP_SHARE)
    except TimeoutError:
        log.warning("lsp-agent: cleanup took longer than %.1f s; ending anyway", EXIT_GRACE_S)
    except Exception:
        log.exception("lsp-agent: cleanup failed; ending anyway")
    return server.exit_code


def _finish_leftovers(loop: asyncio.AbstractEventLoop, timeout: float) -> None:
    """Cancel what still runs on the loop and give it `timeout` to notice; never more."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=timeout))


def end_process(code: int) -> NoReturn:
    """End the process now with `code`, after flushing what it wrote.

    `os._exit`, not `sys.exit`: the interpreter's exit would join worker threads, and one may be
    blocked for ever on a pipe the editor never closes.
    """
    with contextlib.suppress(Exception):
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _start_watchdog(seconds: float, code: int) -> None:
    timer = threading.Timer(seconds, _watchdog_fired, args=(code,))
    timer.daemon = True
    timer.name = "lsp-exit-watchdog"
    timer.start()


def _watchdog_fired(code: int) -> NoReturn:
    with contextlib.suppress(Exception):
        sys.stderr.write(
            f"lsp-agent: still running {EXIT_GRACE_S:g} s after the editor left; ending now\n"
        )
    end_process(code)


def _read_messages(
    stream: BinaryIO,
    head: bytes,
    loop: asyncio.AbstractEventLoop,
    deliver: Callable[[Any], None],
    leave: Callable[[], None],
) -> None:
    """The reader thread: the editor's messages, parsed, go to `deliver` on the loop (a
    `ParseError` for a body that is not JSON, a `Garbage` for bytes that are not a message); the
    end of input goes to `leave`."""
    parser = FrameParser()
    parser.feed(head)
    fd = _fileno(stream)
    fresh = True  # the stream's own buffer may hold bytes select() cannot see: read it first
    try:
        while True:
            item = parser.next()
            while item is not None:
                loop.call_soon_threadsafe(deliver, _message(item, parser))
                item = parser.next()
            if parser.waiting_for_body and fd is not None and not fresh:
                ready, _, _ = select.select([fd], [], [], STALL_S)
                if not ready:
                    body = parser.stalled()
                    if body is not None:
                        loop.call_soon_threadsafe(deliver, _message(body, parser))
                        continue
            data = _read_some(stream)
            fresh = False
            if not data:
                break
            parser.feed(data)
    except Exception:  # the pipe broke: the editor is gone
        log.exception("lsp-agent: reading the editor's messages failed")
    with contextlib.suppress(RuntimeError):  # the loop is already closed
        loop.call_soon_threadsafe(leave)


def _message(item: bytes | Garbage, parser: FrameParser) -> Any:
    """A framed item as the server gets it: the parsed JSON, a `ParseError`, or `Garbage`."""
    if isinstance(item, Garbage):
        return item
    try:
        return json.loads(item)
    except (ValueError, RecursionError) as error:
        shorter = parser.reframe(item)
        if shorter is None:
            return ParseError(str(error))
    try:
        return json.loads(shorter)
    except (ValueError, RecursionError) as error:
        return ParseError(str(error))


def _read_some(stream: BinaryIO) -> bytes:
    """Whatever the stream has (at least one byte), or b"" at its end."""
    read1 = getattr(stream, "read1", None)
    return bytes(read1(65536) if read1 is not None else stream.read(1))


def _fileno(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, AttributeError, ValueError):
        return None


class ParseError:
    """A message whose body is not JSON."""

    def __init__(self, detail: str) -> None:
        self.detail = detail


class _Writer:
    """The server's messages to the editor, written without ever stopping the event loop.

    An editor busy elsewhere (an extension host running a long task, a Neovim waiting on a
    prompt) stops reading for a while, and the pipe fills in 64 KiB: a blocking write would then
    stop the whole server (the model's stream, `$/cancelRequest`, the watchers) until the editor
    reads again. While the loop runs, the pipe is non-blocking: the messages of one stretch of
    the loop's work leave together when it ends (one write for a tool's events and the
    progress, not one each), what the pipe does not take waits here, in order, and the loop
    writes it as the pipe drains. A message from another thread is handed to the loop. Before
    the loop runs, after it ends, and on what is not a pipe or a socket, writes block, as a
    plain file write.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._fd: int | None = None
        """The descriptor written without blocking; None while writes block."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._pending = bytearray()
        """What the pipe has not taken yet, in order."""
        self._broken = False
        """True once the editor's end was found closed: what follows is dropped."""
        self._socket: socket.socket | None = None
        """A duplicate of the output when it is a socket, sent to without waiting."""
        self._flushing = False
        """True from the first queued message until all that waits is written."""
        self._waiting = False
        """True while the loop watches for the pipe to have room."""

    def start(self, loop: asyncio.AbstractEventLoop, reader: BinaryIO | None = None) -> None:
        """Write without blocking from now on (called on the loop's thread). `reader` is the
        editor's input: when it is the same pipe or socket, its reads must stay blocking."""
        fd = _fileno(self._stream)
        if fd is None:
            return
        try:
            status = os.fstat(fd)
            input_fd = _fileno(reader) if reader is not None else None
            shared = input_fd is not None and os.path.sameopenfile(input_fd, fd)
            self._stream.flush()  # what was written before goes first
            if stat.S_ISSOCK(status.st_mode) and hasattr(socket, "MSG_DONTWAIT"):
                # One socket may carry both ways (`serve --tcp`): its blocking mode is shared
                # with the reader thread, so each send says not to wait instead.
                self._socket = socket.socket(fileno=os.dup(fd))
                self._fd = self._socket.fileno()
            elif stat.S_ISFIFO(status.st_mode) and not shared:
                os.set_blocking(fd, False)
                self._fd = fd
            else:
                return  # a file or a terminal: a write does not wait for a reader
        except (OSError, ValueError, AttributeError):  # no way to: writes block, as before
            return
        self._loop, self._loop_thread = loop, threading.get_ident()

    def finish(self) -> None:
        """The loop has ended: write what still waits, blocking (the exit watchdog bounds it)."""
        fd, self._fd, self._loop = self._fd, None, None
        if fd is None:
            return
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        else:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        if self._pending and not self._broken:
            pending, self._pending = bytes(self._pending), bytearray()
            with contextlib.suppress(OSError, ValueError):
                self._stream.write(pending)
                self._stream.flush()

    def _send(self, data: bytes | bytearray | memoryview) -> int:
        """Write what the pipe or socket takes now; BlockingIOError when it takes nothing."""
        if self._socket is not None:
            return self._socket.send(data, socket.MSG_DONTWAIT)
        assert self._fd is not None
        return os.write(self._fd, data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()

    def write(self, data: bytes) -> None:
        loop = self._loop
        if loop is not None and threading.get_ident() == self._loop_thread:
            self._write_now(data)
            return
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                loop.call_soon_threadsafe(self._write_now, data)
                return
        self._write_blocking(data)

    def _write_blocking(self, data: bytes) -> None:
        if self._broken:
            return
        try:
            self._stream.write(data)
            self._stream.flush()
        except (OSError, ValueError):  # the pipe is closed: the editor has gone
            log.warning("lsp-agent: the editor's end of the connection is closed")
            self._broken = True

    def _write_now(self, data: bytes) -> None:
        """On the loop: queue `data` after what waits. The messages of one stretch of the
        loop's work (a tool's events, the progress, the answer) leave together, in one write,
        when that stretch ends."""
        fd = self._fd
        if fd is None:  # the loop ended between the hand-off and now
            self._write_blocking(data)
            return
        if self._broken:
            return
        self._pending += data
        if not self._flushing:
            self._flushing = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write what waits; what the pipe does not take is written as it drains."""
        fd, loop = self._fd, self._loop
        if fd is None or loop is None:  # the loop has ended: `finish` writes it
            return
        try:
            written = self._send(self._pending)
        except BlockingIOError:
            written = 0
        except OSError:
            log.warning("lsp-agent: the editor's end of the connection is closed")
            self._broken = True
            written = len(self._pending)
        del self._pending[:written]
        if self._pending:
            if not self._waiting:
                loop.add_writer(fd, self._flush)
                self._waiting = True
            return
        if self._waiting:
            loop.remove_writer(fd)
            self._waiting = False
        self._flushing = False
