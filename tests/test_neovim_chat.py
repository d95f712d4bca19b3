"""The chat in Neovim (`:LspAgent chat`), on Debian's Neovim 0.7.2 and on a current 0.11: a
conversation with follow-ups in one session, the undo of a turn through the review, and the
conversation shown again after Neovim restarts.

Each story runs real headless Neovims with the plugin, the real server and the scripted model, as
in `test_neovim.py`; the user's part is a Lua scenario in `editors/neovim/tests/scenarios/`.
Typing in the chat at a real terminal while a turn streams is in `test_neovim_typing.py`.
"""

from __future__ import annotations

from pathlib import Path

from tests.fake_model import ScriptedModel, hang_after, reply, tool_call
from tests.neovim import Editor, editor, nvim, user_message

__all__ = ["editor", "nvim"]  # the fixtures, used by the tests below

FIRST_CONVERSATION = [
    "## what does greet do?",
    "_(hello.py, lines 1-2)_",
    "",
    "It returns a greeting.",
    "",
    "_completed_",
]


def test_a_chat_with_a_follow_up_in_the_same_session(editor: Editor, model: ScriptedModel) -> None:
    model.add(
        reply("It returns a greeting.", prompt_tokens=1200, cached_tokens=1000),
        reply("Il renvoie une salutation."),
        reply("Greeting."),
    )

    result = editor.run("chat").result

    # What the model was told: the question with the selected lines, then the follow-up in the
    # same conversation.
    first, second, third = model.requests
    asked = user_message(first)
    assert asked.startswith("what does greet do?")
    assert 'return "hello"' in asked
    said = [(m["role"], m["content"]) for m in second["messages"] if m["role"] != "system"]
    assert said[:3] == [
        ("user", asked),
        ("assistant", "It returns a greeting."),
        ("user", "and in French?"),
    ]
    # What the user saw.
    assert result["statusline_before"].strip().startswith("<CR> sends (<C-s> in insert mode)")
    assert "with hello.py, lines 1-2" in result["statusline_before"]
    assert result["title_before"] == " lsp-agent chat │ a new conversation"
    assert result["after_first"] == FIRST_CONVERSATION
    assert result["input_after_send"] == [""]
    assert "with hello.py" not in result["statusline"]  # it went with the first prompt only
    # The tokens of the turn and of the session, and the context's fill, above the input.
    title = result["title_after_first"].split(" │ ")
    assert title[1].startswith("turn 1.2k in (1.0k cached), ")
    assert title[1].endswith(" out")
    assert title[2].startswith("context ")
    assert title[2].endswith("% of 128k")
    assert title[3] == title[1].replace("turn", "total")
    assert result["conversation"] == [
        *FIRST_CONVERSATION,
        "",
        "## and in French?",
        "",
        "Il renvoie une salutation.",
        "",
        "_completed_",
        "",
        "## and in one word?",  # asked with :LspAgent ask while the chat was on screen
        "_(hello.py)_",
        "",
        "Greeting.",
        "",
        "_completed_",
    ]
    assert ("assistant", "Il renvoie une salutation.") in [
        (m["role"], m["content"]) for m in third["messages"]
    ]
    assert result["session"] == result["ask_session"]
    assert result["title_end"].endswith(f" │ session {result['session']}")
    assert (result["filetype"], result["input_filetype"]) == ("markdown", "markdown")
    expected = "syntax" if editor.nvim.label == "0.7" else "treesitter"
    assert result["highlight"] == expected
    assert result["modifiable"] is False
    assert result["current"] == "hello.py"
    assert result["windows"] == ["chat", "chat-input", "hello.py"]
    assert result["answer"] == []  # the chat's turns do not open the answer buffer


def test_the_conversation_is_shown_again_after_neovim_restarts(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(
        reply("It returns a greeting.", prompt_tokens=1200, cached_tokens=1000),
        reply("Il renvoie une salutation."),
        reply("Greeting."),
        reply("Es gibt einen Gruß zurück."),
    )
    before = editor.run("chat").result

    after = editor.run("chat_restore").result  # a new Neovim, and a new server

    assert after["restored"] == before["conversation"]
    assert after["session"] == before["session"]
    # The session's tokens as they were counted live, and its context's fill.
    total = next(part for part in after["title"].split(" │ ") if part.startswith("total "))
    assert total in before["title_end"].split(" │ ")
    assert " │ context " in after["title"]
    assert after["conversation"] == [
        *before["conversation"],
        "",
        "## and in German?",
        "",
        "Es gibt einen Gruß zurück.",
        "",
        "_completed_",
    ]
    assert after["session_after"] == before["session"]
    said = [m["content"] for m in model.requests[3]["messages"] if m["role"] == "assistant"]
    assert said == ["It returns a greeting.", "Il renvoie une salutation.", "Greeting."]
    assert after["new_conversation"] == [""]
    assert after["new_session"] != before["session"]


GREETING = 'def greet():\n    return "hello"\n\n\ndef part():\n    return 1\n'


def test_undo_restores_the_turn_and_keeps_the_users_line(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "hello.py").write_text(GREETING)
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi there"'}),
        reply("Friendlier now."),
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hey"'}),
        reply("Hey."),
    )

    result = editor.run("chat_undo").result

    # The review waited while the user was in the chat, and the chat said how to get there.
    assert "an edit to review waits: gR to go there" in result["statusline_waiting"]
    # The undo came as a review of its own, restoring the agent's line.
    undo_review = result["reviews"][1]
    assert '-    return "hi there"' in undo_review
    assert '+    return "hello"' in undo_review
    assert result["undone"] == "lsp-agent: undid turn 1: hello.py"
    mine = GREETING + "# mine\n"
    assert result["hello_after_undo"] == mine.splitlines()
    assert result["after_undo"][-1] == "_undid turn 1: hello.py_"
    # The model heard of it before its next move.
    told = "\n".join(
        str(m["content"]) for m in model.requests[3]["messages"] if m["role"] == "user"
    )
    assert "The user undid turn 1" in told
    # The second undo is refused: the user changed the line it would restore.
    refused = result["refused"]
    assert refused.startswith("lsp-agent: nothing of turn 2 was undone\nnot undone: hello.py: ")
    assert "changed since" in refused
    assert result["reviews_at_end"] == 3  # no review for a refused undo
    at_end = mine.replace('"hello"', '"hey you"')
    assert (workspace / "hello.py").read_text() == at_end
    assert result["hello_at_end"] == at_end.splitlines()


def test_a_rewind_to_before_a_prompt_restores_the_file_and_the_conversation(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "hello.py").write_text(GREETING)
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi there"'}),
        reply("Friendlier now."),
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": "return 1", "new": "return 10"}),
        reply("Ten now."),
        reply("Twenty, then."),
    )

    result = editor.run("chat_rewind").result

    assert result["rewound"].startswith("lsp-agent: rewound to before turn 2")
    friendly = "# mine\n" + GREETING.replace('"hello"', '"hi there"')
    assert result["hello_after_rewind"] == friendly.splitlines()
    assert (workspace / "hello.py").read_text() == friendly
    shown = result["after_rewind"]
    marked = shown.index("_(rewound: the agent no longer sees this turn)_")
    assert shown.index("## make it ten") < marked < shown.index("Ten now.")
    assert "_conversation rewound to before turn 2_" in shown
    assert "Ten now." in shown, "the rewound turn stays there to read"
    # The model is never sent the second turn again.
    last = model.requests[-1]
    said = "\n".join(str(m["content"]) for m in last["messages"])
    assert "make it twenty" in said
    assert "make it ten" not in said
    assert "Ten now." not in said
    assert "Friendlier now." in said


def test_the_user_cancels_a_turn_from_the_chat(editor: Editor, model: ScriptedModel) -> None:
    model.add(hang_after("Let me think"), reply("Short answer."))

    result = editor.run("chat_cancel").result

    assert model.client_disconnected.wait(5)  # the model stream was closed
    assert result["conversation"] == [
        "## think hard",
        "",
        "Let me think",
        "",
        "_cancelled_",
        "",
        "## then briefly",
        "",
        "Short answer.",
        "",
        "_completed_",
    ]
    assert result["refused_while_running"] == (
        "lsp-agent: a turn is running: wait for it to end, or <C-c> (:LspAgent cancel) to stop it"
    )
    assert result["input_while_running"] == ["then briefly"]  # kept, and sent later


def test_a_prompt_the_server_refuses_comes_back_into_the_input(
    editor: Editor, model: ScriptedModel
) -> None:
    result = editor.run("chat_refused").result

    assert result["refusal"].startswith("lsp-agent: no model configured: set ")
    assert result["input"] == ["explain hello.py", "line two"]
    assert result["conversation"] == [""]
    assert result["status"] == ""  # nothing runs
    assert result["statusline"].strip().startswith("<CR> sends")
    assert model.requests == []
