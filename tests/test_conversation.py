"""A conversation, not a log: a session's history read back after a restart, a whole turn undone
onto the user's later typing, and each turn's token use — through the real server. The stories
share the module's server, with VS Code's client capabilities (none depends on the client); the
restart starts servers of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.conftest import Launcher, settings_for
from tests.editor import Editor
from tests.fake_model import ScriptedModel, reply, tool_call

shared = pytest.mark.asyncio(loop_scope="module")
"""On the module's server (`shared_editor`): its stories run in the module's event loop."""


@pytest.fixture
def editor_name() -> str:
    return "visual-studio-code"


@pytest.fixture
def editor(shared_editor: Editor) -> Editor:
    return shared_editor


@pytest.fixture
def workspace(shared_editor: Editor) -> Path:
    return shared_editor.root


GREETING = 'def greet():\n    return "hello"\n\n\ndef part():\n    return 1\n'


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def user_texts(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


async def edit_turn(editor: Editor, model: ScriptedModel) -> Any:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi there"'}),
        reply("I made it say **hi there**."),
    )
    return await editor.ask("make it friendlier")


async def test_the_history_after_a_restart_is_the_conversation_that_was_shown(
    launch: Launcher, model: ScriptedModel
) -> None:
    (launch.root / "hello.py").write_text(GREETING)
    async with launch("visual-studio-code", settings_for(model)) as editor:
        result = await edit_turn(editor, model)
        live = await editor.command("lspAgent.history", {"session": result.session})

    async with launch("visual-studio-code", settings_for(model)) as again:
        restored = await again.command("lspAgent.history", {"session": result.session})

    assert [vars(item) for item in restored] == [vars(item) for item in live]
    kinds = [item.type for item in live]
    assert kinds == ["prompt", "tool", "tool", "edit", "answer", "usage", "status"], kinds
    prompt, read, edit, landed, answer, usage, status = live
    assert prompt.text == "make it friendlier"
    assert (read.name, read.ok, read.summary) == ("read_file", True, "read hello.py")
    assert edit.name == "edit_file"
    assert edit.args.new == '"hi there"'
    assert edit.ok
    assert landed.path == "hello.py"
    assert landed.undoable
    assert answer.text == "I made it say **hi there**."
    assert status.status == "completed"
    # What the editor was shown as the turn ran is what the history gives back.
    shown = editor.events_of("toolResult")
    assert [event["result"] for event in shown] == [read.result, edit.result]
    assert "applied" in edit.result
    events = editor.events_of("usage")
    assert usage.calls == len(events) == 3
    assert usage.inputTokens == sum(event["inputTokens"] for event in events)
    assert usage.outputTokens == sum(event["outputTokens"] for event in events)


@shared
async def test_undo_restores_the_turn_and_keeps_what_the_user_typed_since(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "hello.py").write_text(GREETING)
    result = await edit_turn(editor, model)
    assert (workspace / "hello.py").read_text() == GREETING.replace("hello", "hi there")
    # The user adds a line of their own, far from the agent's change.
    changed = GREETING.replace("hello", "hi there").replace("return 1", "return 2")
    (workspace / "hello.py").write_text(changed)

    undone = await editor.command("lspAgent.undoTurn", {"session": result.session})

    assert (undone.turn, undone.files, undone.proposed, undone.applied) == (
        1,
        ["hello.py"],
        True,
        True,
    )
    assert (workspace / "hello.py").read_text() == GREETING.replace("return 1", "return 2")
    model.add(reply("noted"))
    await editor.ask("and now?", session=result.session)
    assert any("The user undid turn 1" in text for text in user_texts(model.requests[-1]))
    history = await editor.command("lspAgent.history", {"session": result.session})
    assert [item.undid for item in history if item.type == "undo"] == [1]
    with pytest.raises(JsonRpcException) as raised:  # nothing left to undo
        await editor.command("lspAgent.undoTurn", {"session": result.session})
    assert "nothing to undo" in str(raised.value)


@shared
async def test_a_rewind_to_before_a_prompt_restores_every_later_turn_in_one_edit(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    start = GREETING + "\n# one\n# two\n# three\n# four\n"
    (workspace / "hello.py").write_text(start)
    first = await edit_turn(editor, model)
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": "return 1", "new": "return 10"}),
        reply("Ten now."),
    )
    await editor.ask("make it ten", session=first.session)
    model.add(reply("Nothing to change."))
    await editor.ask("just a question", session=first.session)  # a turn without edits
    # The user types a line of their own after the last turn.
    edited = start.replace("hello", "hi there").replace("return 1", "return 10")
    (workspace / "hello.py").write_text(edited + "# mine\n")
    proposed = len(editor.edits_seen)

    rewound = await editor.command(
        "lspAgent.undoTurn", {"session": first.session, "turn": 1, "rewind": True}
    )

    assert (rewound.turn, rewound.turns, rewound.files) == (1, [1, 2], ["hello.py"])
    assert (rewound.proposed, rewound.applied) == (True, True)
    assert len(editor.edits_seen) == proposed + 1  # one reviewed edit for both turns
    assert (workspace / "hello.py").read_text() == start + "# mine\n"
    model.add(reply("noted"))
    await editor.ask("and now?", session=first.session)
    told = " ".join(user_texts(model.requests[-1]))
    assert "The user undid turns 1, 2" in told
    assert "rewound the files to before that prompt" in told
    history = await editor.command("lspAgent.history", {"session": first.session})
    [undo] = [item for item in history if item.type == "undo"]
    assert (undo.undid, undo.turns) == (1, [1, 2])
    with pytest.raises(JsonRpcException) as raised:  # both turns are undone now
        await editor.command("lspAgent.undoTurn", {"session": first.session, "turn": 2})
    assert "turn 2 has no accepted edits" in str(raised.value)


@shared
async def test_undo_refuses_a_file_whose_restored_lines_the_user_changed(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "hello.py").write_text(GREETING)
    result = await edit_turn(editor, model)
    (workspace / "hello.py").write_text(GREETING.replace("hello", "hi there, friend"))

    undone = await editor.command("lspAgent.undoTurn", {"session": result.session})

    assert (undone.proposed, undone.files) == (False, [])
    (refused,) = undone.refused
    assert refused.path == "hello.py"
    assert "changed since" in refused.why
    assert (workspace / "hello.py").read_text() == GREETING.replace("hello", "hi there, friend")


@shared
async def test_each_turn_reports_its_tokens_and_the_session_its_total_and_cost(
    editor: Editor, model: ScriptedModel
) -> None:
    prices = {"input": 3.0, "cachedInput": 0.3, "output": 15.0}
    await editor.configure(settings_for(model, prices=prices))
    model.add(reply("one", prompt_tokens=1000, cached_tokens=600))  # 1 output token
    result = await editor.ask("hi")
    (usage,) = editor.events_of("usage")
    assert (usage["inputTokens"], usage["cachedTokens"], usage["outputTokens"]) == (
        1000,
        600,
        1,
    )
    assert usage["cost"] == pytest.approx((400 * 3.0 + 600 * 0.3 + 1 * 15.0) / 1e6)
    status = await editor.command("lspAgent.status", {"session": result.session})
    (session,) = status.sessions
    assert session.usage.inputTokens == 1000
    assert session.usage.outputTokens == 1
    assert session.usage.cost == pytest.approx(usage["cost"])
    # The history gives each turn's use too, priced: a chat shows it after a restart.
    history = await editor.command("lspAgent.history", {"session": result.session})
    (used,) = [item for item in history if item.type == "usage"]
    assert (used.turn, used.inputTokens, used.cachedTokens, used.outputTokens) == (
        1,
        1000,
        600,
        1,
    )
    assert used.cost == pytest.approx(usage["cost"])


def test_an_older_transcript_without_turns_on_usage_gives_each_turn_its_use() -> None:
    from lsp_agent.agent.history import conversation

    def used(prompt: int, completion: int) -> dict[str, Any]:
        return {
            "type": "event",
            "kind": "usage",
            "prompt_tokens": prompt,
            "completion_tokens": completion,
        }

    records = [
        {"type": "event", "kind": "prompt", "turn": 1, "prompt": "one"},
        used(100, 5),
        used(150, 7),
        {"type": "turn", "turn": 1, "status": "completed"},
        {"type": "event", "kind": "prompt", "turn": 2, "prompt": "two"},
        used(300, 1),
    ]

    items = conversation(records)

    assert [item["type"] for item in items] == ["prompt", "usage", "status", "prompt", "usage"]
    first, second = (item for item in items if item["type"] == "usage")
    assert (first["turn"], first["inputTokens"], first["outputTokens"], first["calls"]) == (
        1,
        250,
        12,
        2,
    )
    assert (second["turn"], second["inputTokens"], second["calls"]) == (2, 300, 1)
