"""The chat view, end to end in code-server: a conversation the user can read, answer and undo.

A streamed answer renders as Markdown with its code block's lines exact; a permission question
waits inside the conversation and a click answers it; a palette Ask shows in the chat too; an edit
arrives as a card that accepts it; Undo turn restores the file and keeps a line the user typed
since; after a window reload the conversation is back. Each test reads facts: the DOM inside the
chat's webview, files on disk, what the model was told.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, reply, tool_call
from tests.vscode_fixtures import (
    VSCode,
    add_file,
    open_chat,
    open_file,
    ready,
    reload_window,
    send,
    tool_results,
    turns_ended,
    user_texts,
    widen_sidebar,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

CODE = "def add(a, b):\n    return a + b\n"
ANSWER = f"Here is the function:\n\n```python\n{CODE}```\n\nIt adds **two** numbers."
GREETING = 'def greet():\n    return "hello"\n\n\ndef part():\n    return 1\n'


@pytest.mark.timeout(600)
def test_a_turn_in_the_chat_renders_its_code_and_a_question_is_answered_in_place(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    # One character per chunk: the code block arrives a character at a time.
    model.add(
        reply(ANSWER, chunks=len(ANSWER)),
        tool_call("bash", {"command": "touch made-by-agent.txt"}),
        reply("I made the file."),
        reply("Asked from the palette, shown in the chat."),
    )
    page, workbench = vscode.page, vscode.workbench
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    # `#` picks a file to go along with the prompt.
    box = chat.locator("#input")
    box.click()
    box.press_sequentially("write add #")
    add_file(vscode, "hello.py")
    chat.locator("#chips .chip-file", has_text="hello.py").wait_for()
    box.press("Enter")
    turns_ended(chat, 1)
    answer = chat.locator(".item.answer").first
    # The code block is rendered, highlighted, with its lines exactly as the model wrote them.
    code = answer.locator(".code-block code")
    assert code.text_content() == CODE
    assert code.locator(".hljs-keyword", has_text="def").count() == 1
    assert answer.locator("strong", has_text="two").is_visible()
    assert answer.locator('button[aria-label="Copy the python code"]').is_visible()
    assert answer.locator('button[aria-label="Insert the python code at the cursor"]').is_visible()
    assert chat.locator(".item.status-completed .status-usage").text_content()
    assert chat.locator(".item.prompt .chip-file", has_text="hello.py").is_visible()
    assert user_texts(model.requests[0])[0] == (
        "write add\n\nFiles the user added as context (read them): `hello.py`"
    )
    vscode.save_media(workbench.screenshot(vscode.shots / "chat.png"))

    # Insert at Cursor puts the code over the selection in the file the user was in (the chip
    # says the extension has seen the selection).
    open_file(vscode, "hello.py")
    page.keyboard.press("Control+A")
    chat.locator("#chips .chip-selection", has_text="hello.py:1-2").wait_for()
    answer.get_by_role("button", name="Insert the python code at the cursor").click()
    page.locator(".editor-instance .view-lines", has_text="return a + b").wait_for()
    workbench.run_command("File: Save")
    harness.wait_until(lambda: (workspace / "hello.py").read_text() == CODE, 30, "the code")

    # A command that needs approval: the question waits in the conversation.
    send(chat, "make a file")
    question = chat.locator(".item.question.state-open")
    question.wait_for()
    assert "touch made-by-agent.txt" in question.locator(".question-text").inner_text()
    for answer_title in ("Allow", "Allow for this session", "Deny"):
        assert question.get_by_role("button", name=answer_title, exact=True).is_visible()
    assert chat.locator("#stop").is_visible()
    vscode.save_media(workbench.screenshot(vscode.shots / "chat-question.png"))
    question.get_by_role("button", name="Allow", exact=True).click()

    turns_ended(chat, 2)
    harness.wait_until(lambda: (workspace / "made-by-agent.txt").exists(), 30, "the command")
    answered = chat.locator(".item.question.state-answered")
    assert "answered: Allow" in answered.inner_text()
    assert chat.locator(".item.tool", has_text="bash").locator(".state-icon.ok").count() == 1
    (ran,) = tool_results(model.requests[2])
    assert "exit code 0" in ran, ran
    # The chat was on screen: the question was not raised over it as a notification too.
    assert workbench.notification("wants to run").count() == 0
    assert chat.locator("#send").is_visible()

    # A palette Ask shows its turn in the chat view as well.
    workbench.run_command("LSP Agent: Ask…")
    workbench.answer_input("from the palette", "LSP Agent: Ask")
    turns_ended(chat, 3)
    assert chat.locator(".item.prompt").nth(2).inner_text().endswith("from the palette")
    chat.locator(".item.answer", has_text="Asked from the palette, shown in the chat.").wait_for()
    assert model.remaining == 0


@pytest.mark.timeout(900)
def test_an_edit_card_accepts_undo_keeps_the_users_line_and_a_reload_brings_it_all_back(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    path = workspace / "hello.py"
    path.write_text(GREETING, encoding="utf-8")
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi there"'}),
        reply("I made it say **hi there**."),
        reply("Noted: the greeting is back."),
    )
    page, workbench = vscode.page, vscode.workbench
    ready(vscode)
    widen_sidebar(vscode)
    open_file(vscode, "hello.py")
    chat = open_chat(vscode)
    chat.locator(".chip-selection", has_text="hello.py").wait_for()

    send(chat, "make it friendlier")
    # The edit arrives as a card with Review, Accept and Reject; the diff is open beside it.
    card = chat.locator(".item.edit.state-review")
    card.wait_for()
    assert card.get_by_role("button", name="Review hello.py in the diff editor").is_visible()
    assert card.get_by_role("button", name="Reject the edit").is_visible()
    page.locator(".tab", has_text="hello.py ↔ proposed").wait_for()
    vscode.save_media(workbench.screenshot(vscode.shots / "chat-edit.png"))
    card.get_by_role("button", name="Accept the edit").click()

    turns_ended(chat, 1)
    friendly = GREETING.replace('"hello"', '"hi there"')
    harness.wait_until(lambda: path.read_text() == friendly, 30, "hello.py to hold the edit")
    applied = chat.locator(".item.edit.state-applied")
    assert "hunk 1 · replaced line 2: accepted" in applied.locator(".hunks").inner_text()
    assert "The user is looking at hello.py" in user_texts(model.requests[0])[0]
    assert tool_results(model.requests[2])[-1].startswith("applied: hello.py")

    # The user types a line of their own, far from the agent's change, and saves.
    page.locator(".editor-instance .monaco-editor .view-lines").first.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("# typed by the user")
    page.keyboard.press("Control+S")
    mine = friendly + "# typed by the user"
    harness.wait_until(lambda: path.read_text() == mine, 30, "the user's line on disk")

    # Undo turn: the undo is reviewed like any edit, from a card in the conversation.
    chat.get_by_role("button", name="Undo turn 1: restore the files its edits changed").click()
    review = chat.locator(".item.review-card", has_text="Undo of turn 1: hello.py")
    review.wait_for()
    page.locator(".monaco-diff-editor .modified", has_text='return "hello"').wait_for()
    vscode.save_media(workbench.screenshot(vscode.shots / "chat-undo.png"))
    review.get_by_role("button", name="Accept the edit").click()
    chat.locator(".item.note", has_text="Turn 1 undone: hello.py").wait_for()
    restored = GREETING + "# typed by the user"
    harness.wait_until(lambda: path.read_text() == restored, 30, "hello.py restored, with the line")
    assert chat.locator(".item.status").first.locator("text=undone").is_visible()

    # The model hears of it with the next prompt.
    send(chat, "and now?")
    turns_ended(chat, 2)
    assert any("The user undid turn 1" in text for text in user_texts(model.requests[-1]))

    # After a window reload the conversation is back, from the server's history. (The reload is
    # waited for as a navigation: the old page's status bar and chat answered the waits below
    # before the reload had even begun, and the assertions then read a page going away.)
    reload_window(vscode)
    ready(vscode)
    chat = fixtures.chat_frame(page)
    chat.locator(".item.status").nth(1).wait_for()
    prompts = chat.locator(".item.prompt .prompt-text").all_inner_texts()
    assert prompts == ["make it friendlier", "and now?"]
    assert chat.locator(".item.prompt .chip-selection", has_text="hello.py").count() == 2
    edit = chat.locator(".item.edit.state-applied")
    assert "hunk 1 · replaced line 2: accepted" in edit.locator(".hunks").inner_text()
    assert "hello.py" in edit.locator(".edit-target").inner_text()
    assert chat.locator(".item.note", has_text="Turn 1 undone: hello.py").count() == 1
    assert chat.locator(".item.answer", has_text="Noted: the greeting is back.").count() == 1
    assert "make it friendlier" in chat.locator("#session-title").inner_text()
    vscode.save_media(workbench.screenshot(vscode.shots / "chat-restored.png"))
    assert model.remaining == 0
