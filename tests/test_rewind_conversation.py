"""Checkpoints that rewind the conversation as well as the files, through the real server: the
user goes back to before a prompt, and the model is never sent that turn or any later one again,
while the transcript keeps every line of them and a restarted server resumes rewound. The
stories share the module's server, with VS Code's client capabilities; the restarts and the
compaction start servers of their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from lsp_agent.agent.rewind import in_effect, rewound_turns
from tests.conftest import Launcher, settings_for
from tests.editor import Editor, accept, reject
from tests.fake_model import ScriptedModel, hang_after, reply, tool_call
from tests.test_e2e_context import NOTE, WINDOW, Script, is_compaction, valid, write_logs

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
FRIENDLIER = GREETING.replace("hello", "hi there")
TEN = FRIENDLIER.replace("return 1", "return 10")


def sent(request: dict[str, Any]) -> str:
    """Everything a request carries, as one text to look for words in."""
    return json.dumps(request["messages"])


def conversation_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's messages without its late reminder."""
    messages: list[dict[str, Any]] = request["messages"]
    return messages[:-1]


def records_of(editor: Editor, session: str) -> list[dict[str, Any]]:
    assert editor.state_dir is not None
    (path,) = editor.state_dir.rglob(f"{session}*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


async def two_turns(editor: Editor, model: ScriptedModel, session: str | None = None) -> str:
    """Turn 1 makes the greeting friendlier, turn 2 makes the part ten; the session."""
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi there"'}),
        reply("I made it say **hi there**."),
    )
    first = await editor.ask("make it friendlier", **({"session": session} if session else {}))
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": "return 1", "new": "return 10"}),
        reply("Ten now."),
    )
    second = await editor.ask("make it ten", session=first.session)
    assert (first.status, second.status) == ("completed", "completed")
    return str(first.session)


async def test_a_rewound_turn_is_never_sent_again_and_a_restart_resumes_rewound(
    launch: Launcher, model: ScriptedModel
) -> None:
    (launch.root / "hello.py").write_text(GREETING)
    async with launch("visual-studio-code", settings_for(model)) as editor:
        session = await two_turns(editor, model)
        end_of_turn_1 = conversation_of(model.requests[2])
        # The user adds a line of their own after turn 2, and saves.
        (launch.root / "hello.py").write_text("# mine\n" + TEN)

        rewound = await editor.command(
            "lspAgent.undoTurn", {"session": session, "turn": 2, "conversation": True}
        )

        assert (rewound.turn, rewound.turns, rewound.files) == (2, [2], ["hello.py"])
        assert (rewound.proposed, rewound.applied, rewound.conversation) == (True, True, True)
        assert (rewound.prompt, rewound.rewound) == ("make it ten", [2])
        assert (launch.root / "hello.py").read_text() == "# mine\n" + FRIENDLIER
        model.add(reply("Fine."))
        await editor.ask("make it twenty", session=session)

        after = model.requests[-1]
        assert "make it friendlier" in sent(after)
        assert "make it ten" not in sent(after)
        assert "Ten now." not in sent(after)
        assert "return 10" not in json.dumps(conversation_of(after))
        # What is sent is turn 1's conversation as it ended, then the new prompt.
        answer = {"role": "assistant", "content": "I made it say **hi there**."}
        assert conversation_of(after) == [
            *end_of_turn_1,
            answer,
            {"role": "user", "content": "make it twenty"},
        ]
        reminder = after["messages"][-1]["content"]
        assert "went back to an earlier point of this conversation" in reminder
        assert "hello.py" in reminder
        assert valid(after["messages"])

        records = records_of(editor, session)
        stored = json.dumps([r for r in records if r["type"] == "message"])
        assert "make it ten" in stored, "the transcript keeps turn 2"
        assert "Ten now." in stored
        [rewind] = [r for r in records if r.get("kind") == "rewind"]
        assert (rewind["to"], rewind["turns"], rewind["prompt"]) == (2, [2], "make it ten")
        live = await editor.command("lspAgent.history", {"session": session})

    async with launch("visual-studio-code", settings_for(model)) as again:
        restored = await again.command("lspAgent.history", {"session": session})
        model.add(reply("Still fine."))
        await again.ask("and thirty?", session=session)

    assert [vars(item) for item in restored] == [vars(item) for item in live]
    by_turn: dict[int, list[Any]] = {item.turn: [] for item in live}
    for item in live:
        by_turn[item.turn].append(item)
    assert all(
        getattr(item, "rewound", False)
        for item in by_turn[2]
        if item.type not in ("undo", "rewind")
    )
    assert not any(getattr(item, "rewound", False) for item in by_turn[1])
    assert not any(getattr(item, "rewound", False) for item in by_turn[3])
    [mark] = [item for item in live if item.type == "rewind"]
    assert (mark.to, mark.turns, mark.prompt) == (2, [2], "make it ten")
    resumed = model.requests[-1]
    assert "make it ten" not in sent(resumed)
    assert "Ten now." not in sent(resumed)
    assert "make it friendlier" in sent(resumed)
    assert "make it twenty" in sent(resumed)
    assert conversation_of(resumed)[: len(end_of_turn_1)] == end_of_turn_1


@shared
async def test_a_turn_without_edits_rewinds_the_conversation_and_touches_no_file(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "hello.py").write_text(GREETING)
    session = await two_turns(editor, model)
    model.add(reply("It greets."))
    await editor.ask("what does greet do?", session=session)
    proposed = len(editor.edits_seen)

    rewound = await editor.command(
        "lspAgent.undoTurn", {"session": session, "turn": 3, "conversation": True}
    )

    assert (rewound.proposed, rewound.applied, rewound.files) == (False, False, [])
    assert (rewound.conversation, rewound.prompt, rewound.rewound) == (
        True,
        "what does greet do?",
        [3],
    )
    assert len(editor.edits_seen) == proposed, "no edit was proposed"
    assert (workspace / "hello.py").read_text() == TEN
    model.add(reply("ok"))
    await editor.ask("next", session=session)
    after = model.requests[-1]
    assert "what does greet do?" not in sent(after)
    assert "It greets." not in sent(after)
    assert "make it ten" in sent(after)
    assert "Ten now." in sent(after)
    assert "earlier point" not in after["messages"][-1]["content"], "no files to tell of"
    # The turn after the rewind continues the two turns the model still has, not three.
    (start,) = editor.events_of("start", session=session, turn=4)
    assert "(2 earlier turns)" in start["message"], start["message"]
    with pytest.raises(JsonRpcException) as raised:
        await editor.command(
            "lspAgent.undoTurn", {"session": session, "turn": 3, "conversation": True}
        )
    assert "turn 3 was already rewound" in str(raised.value)
    with pytest.raises(JsonRpcException) as raised:
        await editor.command(
            "lspAgent.undoTurn", {"session": session, "turn": 9, "conversation": True}
        )
    assert "there is no turn 9" in str(raised.value)


@shared
async def test_the_user_rejects_the_files_review_and_the_conversation_stays(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "hello.py").write_text(GREETING)
    session = await two_turns(editor, model)
    editor.decide = reject()
    try:
        rewound = await editor.command(
            "lspAgent.undoTurn", {"session": session, "turn": 2, "conversation": True}
        )
    finally:
        editor.decide = accept

    assert (rewound.proposed, rewound.applied, rewound.conversation) == (True, False, False)
    assert not hasattr(rewound, "prompt")
    assert rewound.reason == "the files' review was rejected: the conversation stays as it was"
    assert (workspace / "hello.py").read_text() == TEN
    model.add(reply("ok"))
    await editor.ask("next", session=session)
    assert "make it ten" in sent(model.requests[-1]), "the conversation was not rewound"
    history = await editor.command("lspAgent.history", {"session": session})
    assert not any(getattr(item, "rewound", False) for item in history)
    assert not [item for item in history if item.type == "rewind"]


@shared
async def test_a_session_running_a_turn_refuses_a_rewind(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(reply("One."), hang_after("Thinking"))
    first = await editor.ask("one")
    await editor.command("lspAgent.start", {"prompt": "two", "session": first.session})
    await editor.wait_for_event("text", turn=2, session=first.session)

    with pytest.raises(JsonRpcException) as raised:
        await editor.command(
            "lspAgent.undoTurn", {"session": first.session, "turn": 1, "conversation": True}
        )

    assert "is running a turn" in str(raised.value)
    await editor.command("lspAgent.cancel", {"session": first.session})
    await editor.wait_for_event("status", turn=2, session=first.session)


@shared
@pytest.mark.parametrize(
    ("argument", "named"),
    [
        ({"conversation": True}, "conversation needs turn"),
        ({"turn": 1, "conversation": "yes"}, "conversation must be a boolean"),
        ({"turn": 1, "conversation": True, "rewind": False}, "conversation needs rewind"),
    ],
)
async def test_a_conversation_rewind_with_wrong_arguments_is_an_error_naming_the_key(
    editor: Editor, argument: dict[str, Any], named: str
) -> None:
    with pytest.raises(JsonRpcException) as raised:
        await editor.command("lspAgent.undoTurn", {"session": editor.session, **argument})
    assert named in str(raised.value)


async def test_a_session_resumed_after_compaction_rewinds_only_to_turns_not_compacted_away(
    launch: Launcher, model: ScriptedModel
) -> None:
    write_logs(launch.root)
    settings = settings_for(model, contextWindow=WINDOW, toolOutputCap=100_000)
    script = Script(model)
    async with launch("visual-studio-code", settings) as editor:
        script.add(
            tool_call("read_file", {"path": "logs/a.log", "limit": 120}),
            tool_call("read_file", {"path": "logs/b.log", "limit": 120}),
            reply("Both logs show requests served in under 17 ms. " * 40),
        )
        first = await editor.ask("summarize the logs")
        script.add(
            tool_call("read_file", {"path": "logs/c.log", "limit": 120}),
            reply("The third log is like the others. " * 40),
        )
        await editor.ask("and the third one? " + "Here is what I saw. " * 100)
        script.add(reply("You are welcome."))
        await editor.ask("thanks")
        session = str(first.session)
        assert any(r.get("kind") == "compaction" for r in records_of(editor, session))

    async with launch("visual-studio-code", settings) as again:
        with pytest.raises(JsonRpcException) as raised:
            await again.command(
                "lspAgent.undoTurn", {"session": session, "turn": 2, "conversation": True}
            )
        assert "turn 2 was compacted into a summary" in str(raised.value)
        assert "turn 1 (the start) or turn 3" in str(raised.value)

        rewound = await again.command(
            "lspAgent.undoTurn", {"session": session, "turn": 3, "conversation": True}
        )
        assert (rewound.conversation, rewound.prompt) == (True, "thanks")
        script.add(reply("Anything else?"))
        await again.ask("what next?", session=session)
        after = [body for body in model.requests if not is_compaction(body)][-1]
        contents = [str(m.get("content")) for m in after["messages"]]
        assert any(NOTE in c for c in contents), "the compaction decided before turn 3 holds"
        assert "You are welcome." not in sent(after)
        assert valid(after["messages"])

        rewound = await again.command(
            "lspAgent.undoTurn", {"session": session, "turn": 1, "conversation": True}
        )
        assert rewound.prompt == "summarize the logs"
        script.add(reply("Hello."))
        await again.ask("start over", session=session)
        after = [body for body in model.requests if not is_compaction(body)][-1]
        assert [m["role"] for m in conversation_of(after)] == ["system", "user"]
        assert conversation_of(after)[1]["content"] == "start over"


def message(turn: int, role: str, content: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": role,
        "turn": turn,
        "message": {"role": role, "content": content},
    }


def test_each_rewind_leaves_out_what_it_went_back_over_and_the_decisions_taken_on_it() -> None:
    compaction = {"type": "event", "kind": "compaction", "context": {"decided_at": 5}}
    records = [
        message(0, "system", "rules"),
        message(1, "user", "one"),
        message(1, "assistant", "did one"),
        message(2, "user", "two"),
        message(2, "assistant", "did two"),
        compaction,
        message(3, "user", "three"),
        {"type": "event", "kind": "rewind", "turn": 3, "to": 3},
        message(4, "user", "four"),
        {"type": "event", "kind": "rewind", "turn": 4, "to": 2},
        message(5, "user", "five"),
    ]

    kept = in_effect(records)

    said = [r["message"]["content"] for r in kept if r["type"] == "message"]
    assert said == ["rules", "one", "did one", "five"]
    assert compaction not in kept, "decided on turn 2's messages, which are gone"
    assert rewound_turns(
        [*records[:3], {"type": "event", "kind": "prompt", "turn": 2}, *records[3:]]
    ) == {2, 3, 4}
    first = in_effect(records[:8])
    assert compaction in first, "decided on turns 1 and 2 only: it holds after the first rewind"
    assert "three" not in json.dumps(first[:-1])
