"""Checkpoints in the chat, end to end in code-server: the user rewinds the files and the
conversation to before a prompt.

Two turns edit a file, the user types a line of their own and saves, then rewinds to before the
second prompt: one reviewed edit restores the file (their line kept), the second turn stays in
the chat folded under a Rewound badge, its prompt is back in the input to edit and send, and the
model is never sent the second turn again; after a window reload the chat shows the same. Each
test reads facts: the DOM inside the chat's webview, files on disk, what the model was sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, reply, tool_call
from tests.vscode_fixtures import (
    VSCode,
    open_chat,
    open_file,
    pick_context,
    ready,
    reload_window,
    send,
    turns_ended,
    user_texts,
    widen_sidebar,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

GREETING = (
    'def greet():\n    return "hello"\n\n\n# one\n# two\n# three\n\ndef part():\n    return 1\n'
)
MINE = "# typed by the user"


def edit(old: str, new: str, answer: str) -> list[Any]:
    return [
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": old, "new": new}),
        reply(answer),
    ]


def sent(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"])


@pytest.mark.timeout(900)
def test_a_rewind_to_before_a_prompt_restores_the_files_and_the_conversation(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    path = workspace / "hello.py"
    path.write_text(GREETING, encoding="utf-8")
    model.add(
        *edit('"hello"', '"hi"', "Shorter greeting."),
        *edit("return 1", "return 10", "Ten now."),
        reply("Twenty, then: I will change it when you say so."),
    )
    page = vscode.page
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    for turn, prompt in enumerate(("shorter greeting", "make it ten"), 1):
        if turn == 2:  # the second prompt carries #codebase, which a rewind brings back too
            chat.locator("#input").click()
            chat.locator("#input").press_sequentially("#")
            pick_context(vscode, "Codebase")
            chat.locator("#chips .chip-codebase").wait_for()
        send(chat, prompt)
        chat.locator(".item.edit.state-review").get_by_role(
            "button", name="Accept the edit"
        ).click()
        turns_ended(chat, turn)
    after_two = GREETING.replace('"hello"', '"hi"').replace("return 1", "return 10")
    harness.wait_until(lambda: path.read_text() == after_two, 30, "both edits on disk")

    # The user types a line of their own at the top of the file, and saves.
    open_file(vscode, "hello.py")
    page.keyboard.press("Control+Home")
    page.keyboard.type(MINE)
    page.keyboard.press("Enter")
    page.keyboard.press("Control+S")
    harness.wait_until(
        lambda: path.read_text() == f"{MINE}\n{after_two}", 30, "the user's line on disk"
    )

    chat.get_by_role("button", name="Rewind: go back to before this prompt (turn 2)").click()
    dialog = page.locator(".monaco-dialog-box")
    dialog.wait_for()
    assert "The edits of turn 2 are undone" in dialog.inner_text()
    assert dialog.get_by_role("button", name="Rewind Files Only").is_visible()
    dialog.get_by_role("button", name="Rewind Files and Conversation").click()
    review = chat.locator(".item.review-card", has_text="Rewind to before turn 2: hello.py")
    review.wait_for()
    page.locator(".monaco-diff-editor .modified", has_text="return 1").wait_for()
    review.get_by_role("button", name="Accept the edit").click()

    chat.locator(".item.note", has_text="Conversation rewound to before turn 2").wait_for()
    before_two = f"{MINE}\n" + GREETING.replace('"hello"', '"hi"')
    harness.wait_until(lambda: path.read_text() == before_two, 30, "hello.py as before turn 2")
    # Turn 2 is still there to read, folded under its prompt, marked rewound.
    rewound = chat.locator(".item.prompt.rewound")
    assert rewound.locator(".prompt-text").inner_text() == "make it ten"
    assert rewound.locator(".rewound-badge").inner_text() == "Rewound"
    answer = chat.locator(".item.answer", has_text="Ten now.")
    assert "rewound" in (answer.get_attribute("class") or "")
    assert not answer.is_visible()
    assert chat.locator(".item.prompt:not(.rewound)").count() == 1
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-checkpoint.png"))

    # Its prompt is back in the input, with the keyboard: the user edits it and sends it.
    box = chat.locator("#input")
    chat.locator("#input:focus").wait_for()
    assert box.input_value() == "make it ten"
    assert chat.locator("#chips .chip-codebase").is_visible()  # what it carried, back as chips
    for _ in "ten":
        page.keyboard.press("Backspace")
    page.keyboard.type("twenty")
    assert box.input_value() == "make it twenty"
    page.keyboard.press("Enter")
    turns_ended(chat, 3)

    asked = model.requests[-1]
    said = user_texts(asked)
    assert any("shorter greeting" in text for text in said)
    assert "make it twenty" in said[-2]
    assert not any("make it ten" in text for text in said)
    assert "Ten now." not in sent(asked)
    assert "return 10" not in sent(asked)
    assert "Shorter greeting." in sent(asked)
    # The user can still read what the model no longer sees.
    chat.get_by_role("button", name="Show rewound turn 2").click()
    answer.wait_for()
    chat.get_by_role("button", name="Hide rewound turn 2").click()
    answer.wait_for(state="hidden")

    # After a window reload the chat shows the same, from the server's history.
    reload_window(vscode)
    ready(vscode)
    chat = fixtures.chat_frame(page)
    chat.locator(".item.answer", has_text="Twenty, then").wait_for()
    prompts = chat.locator(".item.prompt .prompt-text").all_inner_texts()
    assert prompts == ["shorter greeting", "make it ten", "make it twenty"]
    rewound = chat.locator(".item.prompt.rewound")
    assert rewound.locator(".prompt-text").inner_text() == "make it ten"
    assert not chat.locator(".item.answer", has_text="Ten now.").is_visible()
    assert chat.locator(".item.note", has_text="Conversation rewound to before turn 2").count() == 1
    chat.get_by_role("button", name="Show rewound turn 2").click()
    chat.locator(".item.answer.rewound", has_text="Ten now.").wait_for()
    assert model.remaining == 0
