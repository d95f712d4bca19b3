"""The agent core driven through an in-memory editor port (no LSP), against the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.agent.sessions import Agent
from lsp_agent.config import Settings
from lsp_agent.model import make_provider
from lsp_agent.port import EditOutcome
from lsp_agent.session.store import SessionStore
from lsp_agent.testing import MemoryPort
from lsp_agent.tools.workspace import Workspace
from tests.fake_model import ScriptedModel, reply, tool_call


@pytest.fixture
def port() -> MemoryPort:
    return MemoryPort()


def make_agent(
    workspace: Path, model: ScriptedModel, port: MemoryPort, state: Path, **settings: Any
) -> Agent:
    values: dict[str, Any] = {"base_url": model.base_url, "model": "test-model", **settings}
    return Agent(
        Settings(**values),
        Workspace(workspace),
        port,
        SessionStore(workspace, base_dir=state),
        lambda s: make_provider(s.provider, s.base_url, s.model or "", s.api_key, base_delay=0.01),
    )


def results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_an_accepted_edit_counts_as_read_for_the_next_edit(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": "greet", "new": "welcome"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        reply("done"),
    )
    agent = make_agent(workspace, model, port, tmp_path / "state")

    result = await agent.ask("rename and shorten")

    assert result.edits.applied == 2
    assert (workspace / "hello.py").read_text() == 'def welcome():\n    return "hi"\n'


async def test_an_edit_the_user_changed_before_applying_makes_the_model_read_again(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    port.land = "something else entirely\n"
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        tool_call("edit_file", {"path": "hello.py", "old": "else", "new": "other"}),
        reply("ok"),
    )
    agent = make_agent(workspace, model, port, tmp_path / "state")

    await agent.ask("edit")

    _, applied, second = results(model.requests[-1])
    assert "hunk 1: replacing 1 line: changed by the user before applying" in applied
    assert "+something else entirely" in applied
    assert "read hello.py again" in applied
    assert "read hello.py again" in second


async def test_an_editor_that_cannot_apply_edits_is_not_taken_for_a_user_who_rejects(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    port.outcome = EditOutcome(False, "the editor failed to apply the edit: boom", failed=True)
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        reply("ok"),
    )
    agent = make_agent(workspace, model, port, tmp_path / "state")

    result = await agent.ask("edit")

    told = results(model.requests[-1])[-1]
    assert "not applied — the editor failed to apply the edit: boom" in told
    assert "not the user's decision" in told
    assert "rejected" not in told
    assert agent.sessions[result.session].toolbox.edit_stats.failures == {"editor": 1}


async def test_the_turn_stops_at_max_turns_with_a_clear_status(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    model.add(*[tool_call("list_files", {}) for _ in range(3)])
    agent = make_agent(workspace, model, port, tmp_path / "state", max_turns=3)

    result = await agent.ask("loop forever")

    assert result.status == "max_turns"
    assert result.error is not None
    assert "maxTurns" in result.error
    assert len(model.requests) == 3


async def test_a_crashing_tool_is_reported_to_the_model_and_the_turn_goes_on(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    port.crash_reads = True
    model.add(tool_call("read_file", {"path": "hello.py"}), reply("I could not read it."))
    agent = make_agent(workspace, model, port, tmp_path / "state")

    result = await agent.ask("read")

    assert result.status == "completed"
    (told,) = results(model.requests[-1])
    assert "crashed" in told
    assert "RuntimeError" in told


async def test_requests_grow_by_appending_and_the_reminder_is_never_stored(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    (workspace / "AGENTS.md").write_text("Always answer in French.\n")
    model.add(
        tool_call("list_files", {}), tool_call("read_file", {"path": "hello.py"}), reply("ok")
    )
    agent = make_agent(workspace, model, port, tmp_path / "state")

    result = await agent.ask("look around")

    first, second, third = (r["messages"] for r in model.requests)
    assert "Always answer in French." in first[0]["content"]
    for before, after in ((first, second), (second, third)):
        assert after[: len(before) - 1] == before[:-1]  # stored history only grows
        assert after[-1]["role"] == "user"
        assert after[-1]["content"].startswith("<context>")
        assert "git branch: main" in after[-1]["content"]
    stored = next((tmp_path / "state").rglob(f"{result.session}.jsonl")).read_text()
    assert "workspace root:" not in stored


async def test_the_api_key_never_reaches_the_transcript(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    secret = "sk-test-0123456789abcdef"
    (workspace / "notes.txt").write_text(f"someone pasted {secret} here\n")
    model.add(tool_call("read_file", {"path": "notes.txt"}), reply("ok"))
    agent = make_agent(workspace, model, port, tmp_path / "state", api_key=secret)

    result = await agent.ask("read notes")

    assert result.status == "completed"
    stored = next((tmp_path / "state").rglob(f"{result.session}.jsonl")).read_text()
    assert secret not in stored
    records = [json.loads(line) for line in stored.splitlines()]
    assert any(r["type"] == "message" and r["message"]["role"] == "tool" for r in records)


async def test_a_rejected_edit_leaves_the_file_and_tells_the_reason(
    workspace: Path, model: ScriptedModel, port: MemoryPort, tmp_path: Path
) -> None:
    port.accept = False
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": "greet", "new": "x"}),
        reply("ok"),
    )
    agent = make_agent(workspace, model, port, tmp_path / "state", mode="auto")

    result = await agent.ask("rename")

    assert result.edits.rejected == 1
    assert port.proposals[0].needs_confirmation is False  # auto mode
    assert "no thanks" in results(model.requests[-1])[-1]
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
