"""The `bash` tool: one command string, run in the sandbox, output capped as it streams.

The command runs in its own process group (and, under bubblewrap, its own PID namespace). On a
timeout, a cancelled turn, or once the command has exited, the whole group is killed, so nothing
it started in the background outlives the call. stdout and stderr are read as one stream, in the
order the command wrote them, into a `SpillStream`: memory stays bounded whatever the output size.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from typing import Any

from lsp_agent.context.cap import Excerpt, Spills
from lsp_agent.errors import ToolError
from lsp_agent.safety.limits import Budget
from lsp_agent.safety.sandbox import DEFAULT_BUDGET, Sandbox, command_env, shell
from lsp_agent.tools.files import find_rg

READ_CHUNK = 64 * 1024
DRAIN_GRACE_S = 2.0
"""After a kill, how long to wait for the last holders of the output pipe to let go."""
MAX_TIMEOUT_S = 3600.0
_STREAM_LIMIT = 64 * 1024
"""The output pipe's buffer limit (asyncio's default for a subprocess)."""


@dataclass(frozen=True)
class CommandResult:
    """How a command ended and what it printed."""

    exit_code: int | None
    """The exit status; negative for a signal; None when it was killed for the timeout."""
    output: Excerpt
    timed_out: bool
    seconds: float
    stopped: str | None = None
    """Which resource limit stopped it (memory, file size, disk), in one sentence."""

    def status_line(self, timeout: float) -> str:
        """One line saying how the command ended, for the model and the event stream."""
        if self.stopped is not None:
            code = f"exit code {self.exit_code}" if self.exit_code is not None else "killed"
            return f"{code}: {self.stopped}"
        if self.timed_out:
            return (
                f"timed out after {timeout:g} s: the command and everything it started were "
                "killed. Run something shorter, or pass a larger timeout if it is worth waiting."
            )
        if self.exit_code is not None and self.exit_code < 0:
            try:
                name = signal.Signals(-self.exit_code).name
            except ValueError:
                name = f"signal {-self.exit_code}"
            return f"killed by {name}"
        return f"exit code {self.exit_code}"


async def run_command(
    command: str,
    *,
    sandbox: Sandbox,
    spills: Spills,
    limit: int,
    timeout: float,
    budget: Budget = DEFAULT_BUDGET,
) -> CommandResult:
    """Run `command` with the shell in the workspace, inside `sandbox`, for at most `timeout` s.

    Raises `ToolError` when the sandbox refuses to start it. Cancelling the caller kills the
    command's process group before the cancellation goes on.
    """
    timeout = min(max(timeout, 0.1), MAX_TIMEOUT_S)
    stream = spills.stream(limit, "bash")
    started = time.monotonic()
    spill_dir = await asyncio.to_thread(spills.directory)
    argv = [shell(), "-c", command]
    async with sandbox.running(argv, spill_dir=spill_dir, budget=budget) as launch:
        spawning = asyncio.ensure_future(
            _start(
                launch.argv,
                pass_fds=launch.pass_fds,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=sandbox.root,
                env={**run_env(), **launch.env},
                start_new_session=True,  # its own process group, killed as a whole
            )
        )
        try:
            process, has_exited = await asyncio.shield(spawning)
        except asyncio.CancelledError:
            # Cancelled while starting: the process may exist already. Let the start finish,
            # then kill it, so that nothing is left running.
            with contextlib.suppress(Exception):
                started_process, _ = await spawning
                _kill_group(started_process)
                await asyncio.wait_for(started_process.wait(), DRAIN_GRACE_S)
            stream.close()
            raise
        assert process.stdout is not None
        reader = process.stdout

        async def pump() -> None:
            while chunk := await reader.read(READ_CHUNK):
                stream.feed(chunk)

        pumping = asyncio.ensure_future(pump())
        exited = asyncio.ensure_future(has_exited.wait())
        enforcer = launch.enforcer
        watching = asyncio.ensure_future(
            enforcer.watch(lambda: _kill_group(process)) if enforcer else asyncio.sleep(0)
        )
        try:
            done, _ = await asyncio.wait({exited}, timeout=timeout)
            timed_out = not done
            # Exited or not, what it left running in the background goes with it.
            _kill_group(process)
            await _settle(pumping, process)
        except asyncio.CancelledError:
            _kill_group(process)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(_settle(pumping, process))
            stream.close()
            raise
        finally:
            exited.cancel()
            watching.cancel()
        output = stream.finish()
        code = None if timed_out else process.returncode
        shown = output.head + output.tail
        stopped = enforcer.verdict(code, shown) if enforcer is not None else None
    return CommandResult(code, output, timed_out and stopped is None, time.monotonic() - started,
                         stopped)  # fmt: skip


async def _start(
    argv: list[str], **options: Any
) -> tuple[asyncio.subprocess.Process, asyncio.Event]:
    """`asyncio.create_subprocess_exec(*argv, **options)`, and an event set when the process
    exits. Not `process.wait()`: depending on the Python version it also waits for the output
    pipe to close, which a background child that inherited it keeps open."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _TellsExit(_STREAM_LIMIT, loop), *argv, **options
    )
    return asyncio.subprocess.Process(transport, protocol, loop), protocol.exited


class _TellsExit(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a process with pipes, which also sets an event when it exits."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit, loop)
        self.exited = asyncio.Event()
        """Set once the process has exited (its output may still be open)."""

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def _settle(pumping: asyncio.Future[None], process: asyncio.subprocess.Process) -> None:
    """Read what is left of the output, then reap the process; bounded in time."""
    if not pumping.done():
        # Output still open after the kill: something outside the group holds the pipe.
        await asyncio.wait({pumping}, timeout=DRAIN_GRACE_S)
    if not pumping.done():
        pumping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pumping
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()
    elif not pumping.cancelled():
        # Retrieved so that a read error (the pipe closed under us) is not logged as lost:
        # what was read before it stands.
        pumping.exception()
    try:
        await asyncio.wait_for(process.wait(), DRAIN_GRACE_S)
    except TimeoutError:
        _kill_group(process)
        await process.wait()


def run_env() -> dict[str, str]:
    """The command's environment; `rg` reachable even when only lsp-agent's environment has it
    (the `ripgrep` package installs it beside the interpreter, maybe not on PATH)."""
    env = command_env()
    if shutil.which("rg", path=env["PATH"]) is None:
        with contextlib.suppress(ToolError):
            env["PATH"] += os.pathsep + os.path.dirname(find_rg())
    return env


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's whole process group (its pid: it leads a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
