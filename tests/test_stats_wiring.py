"""Edit statistics kept by a session: each attempt is in the transcript, and a resumed session
starts from the figures it had."""

from __future__ import annotations

import json
from pathlib import Path

from lsp_agent.testing import MemoryPort
from tests.fake_model import ScriptedModel, reply, tool_call
from tests.test_agent import make_agent


async def test_edit_attempts_are_recorded_and_a_resumed_session_keeps_its_figures(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    model.add(
        tool_call("edit_file", {"path": "hello.py", "old": "x", "new": "y"}),
        reply("I must read first."),
    )
    first = await make_agent(workspace, model, MemoryPort(), tmp_path / "state").ask("edit")

    again = make_agent(workspace, model, MemoryPort(), tmp_path / "state")
    session = again.session(first.session)

    figures = session.toolbox.edit_stats.to_json()
    assert (figures["attempts"], figures["failures"]) == (1, {"unread": 1})
    records = [json.loads(line) for line in session.transcript.path.read_text().splitlines()]
    (event,) = [r for r in records if r.get("kind") == "edit" and r.get("type") == "event"]
    assert event["tool"] == "edit_file"
    assert event["paths"] == ["hello.py"]
    assert event["ok"] is False
    assert event["reason"] == "unread"
