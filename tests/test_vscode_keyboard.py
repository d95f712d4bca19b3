"""The chat keeps the keyboard and the user's place, end to end in code-server.

The user goes on typing while the agent's edit arrives: the diff opens without taking the
keyboard, every key lands in the chat, and the proposal holds only the agent's change; the user
moves to the diff with a key. A prompt sent while the conversation is scrolled up is brought into
view, and what arrives below the fold later shows a "New messages" marker. A prompt typed while a
turn runs waits in a queue (removable) and goes when the turn ends; Stop ends every card's
spinner with its real state and holds the queue until the user sends it on. Each test reads
facts: the DOM inside the chat's webview, files on disk, what the model was told.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, hang_after, reply, tool_call
from tests.vscode_fixtures import (
    LIMITS,
    VSCode,
    in_view,
    last_prompt,
    lines_text,
    open_chat,
    open_file,
    ready,
    send,
    tool_results,
    turns_ended,
    widen_sidebar,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

LONG_ANSWER = "\n\n".join(f"Paragraph {i}: the workers pool is sized here." for i in range(40))


@pytest.mark.timeout(600)
def test_the_diff_never_takes_the_keyboard_from_the_chat_and_a_key_moves_to_it(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    path = workspace / "limits.py"
    path.write_text(lines_text(LIMITS), encoding="utf-8")
    model.add(
        tool_call("read_file", {"path": "limits.py"}),
        tool_call("edit_file", {"path": "limits.py", "old": "WORKERS = 4", "new": "WORKERS = 8"}),
        reply("Eight workers now."),
    )
    page = vscode.page
    ready(vscode)
    open_file(vscode, "limits.py")
    chat = open_chat(vscode)
    box = chat.locator("#input")

    send(chat, "double the workers")
    # The user goes on typing their next thought while the edit arrives.
    box.press_sequentially("next I want ", delay=40)
    page.locator(".tab", has_text="limits.py ↔ proposed").wait_for()
    chat.locator(".item.edit.state-review").wait_for()
    page.keyboard.type("tests for it", delay=40)  # the keys go wherever the focus is now

    # Every key went into the chat; none into the proposal.
    assert box.input_value() == "next I want tests for it"
    modified = page.locator(".monaco-diff-editor .editor.modified")
    modified.filter(has_text="WORKERS = 8").wait_for()
    assert "tests" not in modified.inner_text()

    # The user moves to the diff deliberately: a key brings the keyboard to the proposed side.
    page.keyboard.press("Control+Alt+D")
    page.locator(".monaco-diff-editor .modified .monaco-editor.focused").wait_for()
    page.keyboard.press("Control+Alt+Enter")  # Accept Edit

    turns_ended(chat, 1)
    expected = lines_text(LIMITS).replace("WORKERS = 4", "WORKERS = 8")
    harness.wait_until(lambda: path.read_text() == expected, 30, "limits.py to hold the edit")
    assert box.input_value() == "next I want tests for it"  # the draft is still the user's
    assert "applied: limits.py" in tool_results(model.requests[2])[-1]


@pytest.mark.timeout(600)
def test_a_prompt_sent_while_scrolled_up_is_shown_and_what_arrives_below_shows_a_marker(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        reply(LONG_ANSWER, chunks=4),
        hang_after("The second answer begins…"),
    )
    page = vscode.page
    ready(vscode)
    chat = open_chat(vscode)

    send(chat, "explain the pool")
    turns_ended(chat, 1)
    # A long conversation at the default side bar width squeezes nothing of the header.
    header_clear = chat.locator("body").evaluate(
        """() => document.getElementById('mode').getBoundingClientRect().bottom
            <= document.querySelector('.log-wrap').getBoundingClientRect().top + 0.5"""
    )
    assert header_clear
    log = chat.locator("#log")
    # The user scrolls back up to the top, and opens the tool line there.
    log.hover()
    for _ in range(30):
        page.mouse.wheel(0, -800)
        if log.evaluate("(el) => el.scrollTop") == 0:
            break
    tool = chat.locator(".item.tool").first
    tool.locator("summary").click()
    assert not in_view(chat, chat.locator(".item.status").first)

    # Sending a prompt shows it, wherever the user was.
    send(chat, "and the second part?")
    second = chat.locator(".item.prompt").nth(1)
    second.wait_for()
    harness.wait_until(lambda: in_view(chat, second), 30, "the sent prompt in view")
    chat.locator(".item.answer", has_text="The second answer begins").wait_for()

    # The user scrolls up again; the next words arrive below: a marker says so.
    log.hover()
    page.mouse.wheel(0, -2000)
    marker = chat.locator("#new-messages")
    harness.wait_until(lambda: not in_view(chat, second), 30, "the prompt scrolled out of view")
    assert marker.is_hidden()
    model.release()
    marker.wait_for(state="visible")
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-new-messages.png"))
    marker.click()
    status = chat.locator(".item.status").nth(1)
    status.wait_for()
    harness.wait_until(lambda: in_view(chat, status), 30, "the end of the turn in view")
    assert marker.is_hidden()


@pytest.mark.timeout(600)
def test_a_prompt_typed_while_a_turn_runs_is_queued_and_sent_when_it_ends(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(
        hang_after("Looking at it"),
        reply("Second answer."),
    )
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "first question")
    chat.locator(".item.answer", has_text="Looking at it").wait_for()
    assert chat.locator("#send").inner_text().strip() == "Queue"
    # Two more prompts while the turn runs: both wait in sight.
    send(chat, "second question")
    send(chat, "third question")
    queued = chat.locator("#queue .queued")
    queued.nth(1).wait_for()
    assert queued.all_inner_texts()[0].endswith("second question")
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-queue.png"))
    # The user changes their mind about the third: it goes back into the input, not lost.
    chat.get_by_role("button", name="Remove the queued prompt: third question").click()
    queued.nth(1).wait_for(state="detached")
    assert chat.locator("#input").input_value() == "third question"

    model.release()
    turns_ended(chat, 2)
    assert chat.locator(".item.prompt .prompt-text").all_inner_texts() == [
        "first question",
        "second question",
    ]
    chat.locator(".item.answer", has_text="Second answer.").wait_for()
    assert last_prompt(model.requests[1]).endswith("second question")
    assert queued.count() == 0
    assert model.remaining == 0


@pytest.mark.timeout(600)
def test_stop_during_a_review_ends_every_spinner_and_holds_the_queue(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"bye"'}),
        reply("Held back, then sent."),
    )
    page = vscode.page
    ready(vscode)
    chat = open_chat(vscode)

    send(chat, "say bye")
    card = chat.locator(".item.edit.state-review")
    card.wait_for()
    send(chat, "then explain")  # queued behind the turn
    chat.locator("#queue .queued").wait_for()
    chat.get_by_role("button", name="Stop the turn").click()

    # The turn ends; its edit card says what became of it, and nothing spins any more.
    chat.locator(".item.status-cancelled").wait_for()
    stopped = chat.locator(".item.edit.state-stopped")
    stopped.wait_for()
    assert "not applied: stopped" in stopped.inner_text()
    assert chat.locator("#log .codicon-modifier-spin").count() == 0
    page.locator(".tab", has_text="proposed").first.wait_for(state="detached")
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    # What was queued behind the stopped turn waits for the user's word.
    held = chat.locator("#queue .queued.held")
    held.wait_for()
    assert len(model.requests) == 2
    held.get_by_role("button", name="Send the queued prompt now: then explain").click()
    turns_ended(chat, 2)
    chat.locator(".item.answer", has_text="Held back, then sent.").wait_for()
    assert last_prompt(model.requests[-1]).endswith("then explain")
