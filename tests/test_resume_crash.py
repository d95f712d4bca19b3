"""A server killed with SIGKILL in the middle of a turn loses nothing it wrote, and a new server
resumes the session from its transcript with a history the model accepts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from lsp_agent.session.transcript import INTERRUPTED
from tests.conftest import settings_for
from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel, reply, tool_call


async def kill(editor: Editor, turn: asyncio.Task[Any]) -> None:
    """SIGKILL the server process, as the OOM killer or a crash would."""
    server = editor.client._server
    assert server is not None
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), 10)
    turn.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(turn, 5)
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(editor.client.stop(), 5)


async def test_a_server_killed_mid_tool_is_resumed_by_a_new_one(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    settings = settings_for(model)
    first = await start_editor(
        workspace, "visual-studio-code", settings, state_dir=state_dir, home=home
    )
    model.add(
        tool_call("write_file", {"path": "notes.txt", "content": "keep me\n"}),
        tool_call("todo", {"items": [{"text": "Wait for the build", "status": "in_progress"}]}),
        reply("Wrote the notes."),
    )
    done = await first.ask("write the notes")
    assert done.status == "completed"
    session = done.session

    model.add(tool_call("bash", {"command": "sleep 8"}, id="call_sleep"))
    turn = asyncio.create_task(first.ask("now wait for the build", session=session))
    await first.wait_for_event("tool", name="bash")
    await kill(first, turn)

    second = await start_editor(
        workspace, "visual-studio-code", settings, state_dir=state_dir, home=home
    )
    try:
        model.add(reply("The build was interrupted; I will run it again."))
        resumed = await second.ask("what happened?", session=session)
        status = await second.command("lspAgent.status", {"session": session})
    finally:
        await second.client.shutdown_session()
        await second.client.stop()

    assert resumed.status == "completed", resumed
    assert resumed.session == session
    assert not model.rejections, "the resumed history is valid for the provider"
    sent = model.requests[-1]["messages"]
    users = [m["content"] for m in sent if m["role"] == "user"][:-1]  # the reminder aside
    assert users == ["write the notes", "now wait for the build", "what happened?"]
    (sleep_result,) = [m for m in sent if m.get("tool_call_id") == "call_sleep"]
    assert sleep_result["content"] == INTERRUPTED
    assert "Wrote the notes." in [m.get("content") for m in sent if m["role"] == "assistant"]
    assert (workspace / "notes.txt").read_text() == "keep me\n"
    assert "Wait for the build" in sent[-1]["content"], "the plan is rebuilt from the history"
    (entry,) = status.sessions
    assert entry.turns == 3
    assert entry.contextTokens > 0
    assert 0 <= entry.cachedShare <= 1, "the cached share of the last request is shown"
