"""Instructions and small models end to end: AGENTS.md files reaching the system prompt, a
changed one said in the reminder, tool calls written as text run as calls, and a model that
cannot call tools stopped with a clear message. The real server over stdio, a scripted model on
loopback; the module's server, with VS Code's client capabilities (nothing here depends on the
editor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.editor import Editor
from tests.fake_model import ScriptedModel, reply

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def editor_name() -> str:
    return "visual-studio-code"


@pytest.fixture
def editor(shared_editor: Editor) -> Editor:
    return shared_editor


@pytest.fixture
def workspace(shared_editor: Editor) -> Path:
    return shared_editor.root


@pytest.fixture(scope="module")
def shared_home(shared_home: Path) -> Path:
    """The user's home, with their own AGENTS.md (the server runs with HOME set to it)."""
    (shared_home / ".agents").mkdir(parents=True)
    (shared_home / ".agents" / "AGENTS.md").write_text("Answer in British English.\n")
    return shared_home


@pytest.fixture(scope="module")
def shared_workspace(shared_workspace: Path) -> Path:
    (shared_workspace / "AGENTS.md").write_text("Run pytest before saying you are done.\n")
    return shared_workspace


def system(request: dict[str, Any]) -> str:
    message = request["messages"][0]
    assert message["role"] == "system"
    return str(message["content"])


def transcript_records(editor: Editor, session: str) -> list[dict[str, Any]]:
    assert editor.state_dir is not None
    (path,) = editor.state_dir.rglob(f"{session}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_both_agents_md_reach_the_system_prompt_and_a_change_waits_for_a_new_session(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(reply("noted"), reply("still noted"), reply("fresh"))
    await editor.ask("hello")

    (workspace / "AGENTS.md").write_text("Never run pytest.\n")
    await editor.ask("again")
    session = await editor.command("lspAgent.newSession", {})
    await editor.ask("in a new session", session=session.session)

    first, second, third = model.requests
    prompt = system(first)
    assert "Answer in British English." in prompt
    assert "Run pytest before" in prompt
    assert prompt.index("British English") < prompt.index("Run pytest")  # the project's last
    assert "AGENTS.md changed" not in first["messages"][-1]["content"]
    assert system(second) == prompt  # the prefix stays cacheable
    assert "AGENTS.md changed since this session started" in second["messages"][-1]["content"]
    assert "Never run pytest." in system(third)
    assert "Run pytest before" not in system(third)
    assert "AGENTS.md changed" not in third["messages"][-1]["content"]


async def test_a_tool_call_written_as_text_is_run_as_a_call(
    editor: Editor, model: ScriptedModel
) -> None:
    written = '```json\n{"name": "read_file", "arguments": {"path": "hello.py"}}\n```'
    model.add(reply(written), reply("It returns hello."))

    result = await editor.ask("what does greet return?")

    assert result.status == "completed"
    assert result.answer == "It returns hello."
    tool_message = model.requests[1]["messages"][-2]
    assert tool_message["role"] == "tool"
    assert 'return "hello"' in tool_message["content"]
    (assistant,) = [m for m in model.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["function"]["name"] == "read_file"
    (event,) = [
        r for r in transcript_records(editor, result.session) if r.get("kind") == "text_tool_call"
    ]
    assert event["name"] == "read_file"
    assert event["text"] == written
    assert editor.events_of("tool")[0]["name"] == "read_file"


async def test_one_broken_imitation_is_corrected_and_the_turn_goes_on(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(reply('<tool_call>{"name": "read_file", "arguments": {}}</tool_call>'), reply("ok"))

    result = await editor.ask("read hello.py")

    assert result.status == "completed"
    assert result.answer == "ok"
    correction = model.requests[1]["messages"][-2]
    assert correction["role"] == "user"
    assert "tool calling interface" in correction["content"]


async def test_a_model_that_keeps_imitating_tool_calls_ends_the_turn_with_advice(
    editor: Editor, model: ScriptedModel
) -> None:
    broken = '{"name": "read_file", "arguments": {"file": "hello.py"}}'
    model.add(reply(broken), reply(broken), reply("never asked"))

    result = await editor.ask("read hello.py")

    assert result.status == "failed"
    assert len(model.requests) == 2
    assert result.error.startswith("test-model cannot call tools")
    assert "--jinja" in result.error
    assert "lspAgent.model" in result.error
