"""One MCP server's connection, on its own: a message over the size limit stops the server and
is told to the model, and stopping a server that will not stop still ends it and everything it
started, within the bound the language server's exit leaves."""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path

import pytest

from lsp_agent.mcp import stdio
from lsp_agent.mcp.connection import CallFailed, Connection
from lsp_agent.mcp.servers import ServerSpec

STORY = Path(__file__).with_name("mcp_story_server.py")


def connection(marks: Path, *flags: str) -> tuple[Connection, list[str]]:
    logged: list[str] = []
    spec = ServerSpec(
        "story",
        "story",
        "lspAgent.mcpServers",
        command=sys.executable,
        args=(str(STORY), str(marks), *flags),
    )
    return Connection(spec, home=None, log=logged.append), logged


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not status.exists() or status.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def ended(pid: int, within: float = 10.0) -> bool:
    """Whether `pid` is gone (or a zombie), waiting for the kernel to finish a SIGKILL that was
    sent: a killed process of the group dies when it is next scheduled, which on a busy machine
    may be after `stop()` has returned. Waits on the process's pidfd, which becomes readable when
    it exits (`within`: a hang guard, not a timing assertion)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([handle], [], [], within)
        return bool(ready) or not alive(pid)
    finally:
        os.close(handle)


async def test_a_message_over_the_limit_stops_the_server_and_the_next_call_starts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio, "MAX_MESSAGE_BYTES", 256 * 1024)
    server, logged = connection(tmp_path / "marks")
    await server.start()
    try:
        with pytest.raises(CallFailed) as failed:
            await server.call("big", {"megabytes": 1})
        assert failed.value.reason == "too_large"
        assert "a message larger than 0.25 MB" in failed.value.message
        assert "more than lsp-agent takes from a server" in failed.value.message
        assert "started again at its next call" in failed.value.message
        answer = await server.call("echo", {"text": "after"})
        assert "echo: after" in str(answer.content[0])
        assert len(list((tmp_path / "marks").glob("started-*"))) == 2
    finally:
        await server.stop()
    assert any("more than lsp-agent takes" in line for line in logged)


async def test_a_server_that_ignores_its_stdin_and_sigterm_is_still_stopped_with_its_child(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    server, logged = connection(marks, "--stubborn")
    await server.start()
    pid = server.pipes.pid if server.pipes is not None else None
    assert pid is not None
    (child,) = [int(path.name.split("-")[1]) for path in marks.glob("child-*")]
    assert alive(pid)
    assert alive(child)

    await server.stop()

    assert not alive(pid)
    assert ended(child)  # the process group went with it (the kill was sent)
    assert server.status()["state"] == "stopped"
    assert any("my stdin ended, and I stay" in line for line in logged)  # stderr, in the log
