"""Context management end to end: a real server over LSP, a scripted model on loopback, and a
window small enough that the layers (strip, drop, compact) run, and the plan the model keeps
shows in the reminder. The stories share the module's server, with VS Code's client
capabilities (nothing here depends on the editor)."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from lsp_agent.context.compact import COMPACT_SYSTEM_PROMPT
from tests.conftest import settings_for
from tests.editor import Editor
from tests.fake_model import Body, ScriptedModel, Step, reply, tool_call

NOTE = (
    '## Goal\nThe user said: "summarize the logs".\n## What happened\nRead the logs.\n'
    "## Files\nlogs/a.log, logs/b.log, logs/c.log\n## State\nRead.\n## Next\nAnswer."
)
WINDOW = 6000

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


def is_compaction(body: Body) -> bool:
    """Whether a request is the hand-off note call rather than a turn of the conversation."""
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("content") == COMPACT_SYSTEM_PROMPT


class Script:
    """The model's answers to the conversation, in order; a compaction call, whenever it comes,
    is answered with a hand-off note without taking a step."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.steps: deque[Step] = deque()

    def add(self, *steps: Step) -> None:
        self.steps.extend(steps)
        self.model.add(*[self.answer for _ in range(len(steps) + 2)])

    def answer(self, body: Body) -> Step:
        if is_compaction(body):
            return reply(NOTE)
        return self.steps.popleft()


def valid(messages: list[dict[str, Any]]) -> bool:
    """Every tool call is answered right after its message, and no result is orphaned."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            if message["tool_call_id"] not in pending:
                return False
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return False
        pending = {call["id"] for call in message.get("tool_calls") or []}
    return not pending


def conversation(model: ScriptedModel) -> list[Body]:
    return [body for body in model.requests if not is_compaction(body)]


def size(body: Body) -> int:
    """Bytes of a request's messages, without the reminder."""
    return len(json.dumps(body["messages"][:-1]).encode())


@pytest_asyncio.fixture(loop_scope="module")
async def small_editor(editor: Editor, model: ScriptedModel) -> Editor:
    """The server with a 6000-token window and tool results kept whole on arrival."""
    await editor.configure(settings_for(model, contextWindow=WINDOW, toolOutputCap=100_000))
    return editor


def write_logs(workspace: Path) -> None:
    (workspace / "logs").mkdir()
    for name in "abc":
        lines = [
            f"{name} {i:03} INFO request served in {i % 17} ms by worker {i % 5}"
            for i in range(120)
        ]
        (workspace / "logs" / f"{name}.log").write_text("\n".join(lines) + "\n")


async def test_a_long_session_is_compacted_and_the_next_request_is_smaller_and_valid(
    small_editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    write_logs(workspace)
    script = Script(model)
    script.add(
        tool_call("read_file", {"path": "logs/a.log", "limit": 120}),
        tool_call("read_file", {"path": "logs/b.log", "limit": 120}),
        reply("Both logs show requests served in under 17 ms. " * 40),
    )
    first = await small_editor.ask("summarize the logs")
    assert first.status == "completed"
    script.add(
        tool_call("read_file", {"path": "logs/c.log", "limit": 120}),
        reply("The third log is like the others. " * 40),
    )
    second = await small_editor.command(
        "lspAgent.ask",
        {"prompt": "and the third one? " + "Here is what I saw. " * 100},
        token="turn-2",
    )
    assert second.status == "completed", second
    script.add(reply("You are welcome."))
    third = await small_editor.ask("thanks")
    assert third.status == "completed", third

    events = small_editor.events_of("compaction")
    assert {"strip", "drop", "compact"} <= {e["strategy"] for e in events}
    assert all(e["after"] < e["before"] for e in events)
    progress = [getattr(r, "message", None) for r in small_editor.progress("turn-2")]
    assert "compacting" in progress, "$/progress says so while the note is written"

    assert small_editor.state_dir is not None
    (path,) = small_editor.state_dir.rglob(f"{first.session}*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    recorded = [r for r in records if r.get("kind") == "compaction"]
    assert [r["strategy"] for r in recorded] == [e["strategy"] for e in events]
    assert recorded[-1]["context"]["note"] == NOTE
    stored = [r["message"] for r in records if r["type"] == "message"]
    assert any("logs/a.log" in json.dumps(m) for m in stored), "the transcript keeps everything"

    last = max(i for i, body in enumerate(model.requests) if is_compaction(body))
    before = [b for b in model.requests[:last] if not is_compaction(b)][-1]
    after = next(b for b in model.requests[last + 1 :] if not is_compaction(b))
    assert size(after) < size(before)
    for body in conversation(model):
        assert valid(body["messages"])
    sent = after["messages"]
    assert sent[0]["role"] == "system"
    assert sent[1] == {"role": "user", "content": "summarize the logs"}
    assert NOTE in sent[2]["content"]
    assert "<context>" in sent[-1]["content"], "the reminder still ends the request"
    assert not model.rejections


async def test_the_plan_the_model_writes_shows_in_the_next_request(
    editor: Editor, model: ScriptedModel
) -> None:
    plan = [
        {"text": "Reproduce the bug", "status": "done"},
        {"text": "Fix the parser", "status": "in_progress"},
    ]
    model.add(tool_call("todo", {"items": plan}), reply("Working on it."))

    result = await editor.ask("fix the parser bug")

    assert result.status == "completed"
    first, second = model.requests
    assert "<todos>" not in first["messages"][-1]["content"]
    reminder = second["messages"][-1]["content"]
    assert "<todos>" in reminder
    assert "Fix the parser" in reminder
    assert "Plan updated" in second["messages"][-2]["content"]
    assert all("<todos>" not in json.dumps(m) for m in second["messages"][:-1]), "never stored"
