"""A session with an Anthropic endpoint through `lsp-agent serve`: tools across two turns, and
every request the server sent is the history converted as the API and its prompt cache want it."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.conftest import Launcher
from tests.fake_model import ScriptedAnthropic, reply, tool_call

PLAN = {"items": [{"text": "Read the notes", "status": "in_progress"}]}


def blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each content block of a request with the role of its message, breakpoints taken off."""
    found = []
    for message in body["messages"]:
        for block in message["content"]:
            unmarked = {key: value for key, value in block.items() if key != "cache_control"}
            found.append((message["role"], unmarked))
    return found


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a request's prompt-cache breakpoints are: "system", or a block's place from the end."""
    places = ["system" for block in body.get("system", []) if "cache_control" in block]
    flat = [block for message in body["messages"] for block in message["content"]]
    places += [f"last-{len(flat) - i}" for i, block in enumerate(flat) if "cache_control" in block]
    return places


async def test_each_request_to_anthropic_extends_the_last_one_and_marks_its_end(
    launch: Launcher,
) -> None:
    (launch.root / "notes.md").write_text("ship on Friday\n")
    with ScriptedAnthropic(models=("claude-test",)) as model:
        settings = {"provider": "anthropic", "baseUrl": model.base_url, "model": "claude-test"}
        async with launch("visual-studio-code", settings) as editor:
            model.add(
                tool_call("read_file", {"path": "notes.md"}),
                tool_call("todo", PLAN),
                reply("Friday."),
            )
            first = await editor.ask("when do we ship?")
            model.add(tool_call("list_files", {}), reply("Only the notes."))
            second = await editor.ask("what else is there?", session=first.session)
        bodies = [json.loads(body) for body in model.bodies]

    assert (first.status, second.status) == ("completed", "completed")
    assert first.answer == "Friday."
    assert len(bodies) == 5
    for before, after in itertools.pairwise(bodies):
        # The prompt cache sees the same prefix: all but the reminder (the last block) is
        # sent again as it was, only its breakpoints moved.
        assert blocks(after)[: len(blocks(before)) - 1] == blocks(before)[:-1]
        assert after["system"][0]["text"] == before["system"][0]["text"]
    for body in bodies:
        assert breakpoints(body) == ["system", "last-2", "last-1"]
        roles = [message["role"] for message in body["messages"]]
        assert roles[0] == "user"
        assert all(a != b for a, b in itertools.pairwise(roles))  # they alternate
    read = [block for _, block in blocks(bodies[1]) if block["type"] == "tool_result"]
    assert "ship on Friday" in read[0]["content"]
    assert blocks(bodies[-1])[-1][1]["text"].startswith("<context>")
