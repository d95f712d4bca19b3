"""One bad input never poisons a session: text that cannot be encoded, a question larger than the
model's window — each turn ends as it must, and the next ask on the same session completes."""

from __future__ import annotations

import json
from pathlib import Path

from lsp_agent.testing import MemoryPort
from tests.fake_model import ScriptedModel, reply, tool_call
from tests.test_agent import make_agent


def transcript_lines(state: Path) -> list[dict[str, object]]:
    (path,) = state.rglob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_lone_surrogate_in_a_prompt_or_a_buffer_does_not_poison_the_session(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    port = MemoryPort()
    broken = 'def greet():\n    return "\ud83d half an emoji"\n'
    port.open(workspace / "hello.py", broken, version=3)
    model.add(tool_call("read_file", {"path": "hello.py"}), reply("It greets."))
    agent = make_agent(workspace, model, port, tmp_path / "state")

    first = await agent.ask("what does \udce9 this do?")
    model.add(reply("Still here."))
    second = await agent.ask("and now?", first.session)

    assert (first.status, second.status) == ("completed", "completed")
    assert second.answer == "Still here."
    body = model.bodies[-1].decode("utf-8")  # what was sent is valid UTF-8 JSON
    assert "and now?" in json.loads(body)["messages"][-2]["content"]
    assert transcript_lines(tmp_path / "state")  # every line of the transcript parses


async def test_a_question_larger_than_the_window_is_refused_and_the_session_goes_on(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    port = MemoryPort()
    agent = make_agent(workspace, model, port, tmp_path / "state", context_window=4000)
    model.add(reply("hello"))
    first = await agent.ask("hi")

    huge = await agent.ask("summarise this: " + "word " * 20_000, first.session)
    model.add(reply("fine"))
    after = await agent.ask("and a short one", first.session)

    assert huge.status == "failed"
    assert huge.error is not None
    assert "lspAgent.contextWindow = 4000" in huge.error
    assert "Nothing was stored" in huge.error
    assert (after.status, after.answer) == ("completed", "fine")
    sent = json.dumps(model.requests[-1]["messages"])
    assert "summarise this" not in sent
    assert len(model.requests) == 2
