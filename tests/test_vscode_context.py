"""What goes with a prompt, and the rest of the chat a user meets, end to end in code-server.

`#` adds the selection (pinned), the problems of a file and a file; ask mode asks for an answer
without changes; a rewind restores the files to before an earlier prompt in one reviewed edit
that keeps what the user typed since; a question says what "Allow for this session" covers and
folds away once answered; code blocks take the colour theme's own token colours; at VS Code's
default side bar width nothing of the header or the input is cut; the session picker shows
titles and times people read, no ids; and a workspace's settings cannot redirect the endpoint,
loosen the walls or replace the server. Each test reads facts: the DOM inside the chat's webview,
files on disk, what the model was sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, reply, tool_call
from tests.vscode_fixtures import (
    VSCode,
    add_file,
    last_prompt,
    open_chat,
    open_file,
    pick_context,
    ready,
    send,
    tool_results,
    turns_ended,
    widen_sidebar,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

GREETING = (
    'def greet():\n    return "hello"\n\n\n# one\n# two\n# three\n\ndef part():\n    return 1\n'
)


@pytest.mark.timeout(600)
def test_hash_adds_the_selection_the_problems_and_a_file_to_the_prompt(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "bad.json").write_text('{"name": "demo",, "size": }\n', encoding="utf-8")
    model.add(reply("I see the two problems."))
    page = vscode.page
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)
    box = chat.locator("#input")

    # The selection, pinned: it goes along even after the user moves to another file.
    open_file(vscode, "hello.py")
    page.keyboard.press("Control+A")
    chat.locator("#chips .chip-selection", has_text="hello.py:1-2").wait_for()
    box.click()
    box.press_sequentially("#")
    pick_context(vscode, "Selection")
    chat.locator("#chips .chip-selection", has_text="hello.py:1-2 (pinned)").wait_for()
    # The problems VS Code knows in bad.json (its JSON checker's).
    open_file(vscode, "bad.json")
    page.locator('[id="status.problems"]', has_text=re.compile("[1-9]")).wait_for()
    box.click()
    box.press_sequentially("#")
    pick_context(vscode, "Problems")
    problems = chat.locator("#chips .chip-problems", has_text="problems: bad.json")
    problems.wait_for()
    box.press_sequentially("what is wrong? #")
    add_file(vscode, "hello.py")
    chat.locator("#chips .chip-file", has_text="hello.py").wait_for()
    assert chat.locator("#chips .chip-selection", has_text="hello.py:1-2 (pinned)").count() == 1
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-context.png"))
    box.press("Enter")

    turns_ended(chat, 1)
    asked = last_prompt(model.requests[0])
    assert asked.startswith("what is wrong?\n\nProblems the user added as context:\n- bad.json:1:")
    assert "Files the user added as context (read them): `hello.py`" in asked
    assert "The user is looking at hello.py, lines 1-2:" in asked
    shown = chat.locator(".item.prompt")
    assert shown.locator(".prompt-text").inner_text() == "what is wrong?"
    for kind in ("selection", "problems", "file"):
        assert shown.locator(f".chip-{kind}").count() == 1, kind
    assert chat.locator("#chips .chip").count() == 1  # the next prompt starts afresh


@pytest.mark.timeout(600)
def test_ask_mode_answers_without_changes(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(reply("greet returns the string hello."))
    ready(vscode)
    chat = open_chat(vscode)

    chat.get_by_role("button", name=re.compile("^Mode: Agent")).click()
    chat.locator("#mode[aria-pressed=true]").wait_for()
    assert "answers only" in chat.locator("#input").get_attribute("placeholder")
    send(chat, "what does greet return?")
    turns_ended(chat, 1)
    offered = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    assert "read_file" in offered
    assert not offered & {"edit_file", "write_file", "apply_patch", "bash"}
    assert chat.locator(".item.prompt .mode-badge", has_text="Ask").count() == 1
    chat.get_by_role("button", name=re.compile("^Mode: Ask")).click()
    chat.locator("#mode[aria-pressed=false]").wait_for()


def edit(old: str, new: str, answer: str) -> list[Any]:
    return [
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": old, "new": new}),
        reply(answer),
    ]


@pytest.mark.timeout(900)
def test_a_rewind_restores_the_files_to_before_a_prompt_and_keeps_the_users_later_line(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    path = workspace / "hello.py"
    path.write_text(GREETING, encoding="utf-8")
    model.add(
        *edit('"hello"', '"hi"', "Shorter greeting."),
        *edit("return 1", "return 10", "Ten now."),
    )
    page = vscode.page
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    for turn, prompt in enumerate(("shorter greeting", "make it ten"), 1):
        send(chat, prompt)
        chat.locator(".item.edit.state-review").get_by_role(
            "button", name="Accept the edit"
        ).click()
        turns_ended(chat, turn)
    edited = GREETING.replace('"hello"', '"hi"').replace("return 1", "return 10")
    harness.wait_until(lambda: path.read_text() == edited, 30, "both edits on disk")
    # The user changes a line of their own afterwards, away from the agent's changes, and saves.
    path.write_text(edited.replace("# two", "# two (mine)"), encoding="utf-8")

    chat.get_by_role("button", name="Rewind: go back to before this prompt (turn 1)").click()
    dialog = page.locator(".monaco-dialog-box")
    dialog.wait_for()
    assert "turns 1, 2" in dialog.inner_text()
    dialog.get_by_role("button", name="Rewind Files Only").click()
    review = chat.locator(".item.review-card", has_text="Rewind to before turn 1: hello.py")
    review.wait_for()
    page.locator(".monaco-diff-editor .modified", has_text='return "hello"').wait_for()
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-rewind.png"))
    review.get_by_role("button", name="Accept the edit").click()
    chat.locator(".item.note", has_text="Rewound to before turn 1 (turns 1, 2 undone)").wait_for()
    restored = GREETING.replace("# two", "# two (mine)")
    harness.wait_until(lambda: path.read_text() == restored, 30, "hello.py as before turn 1")
    undone = chat.locator(".item.status", has_text="undone")
    assert undone.count() == 2
    # The files only: the conversation goes on as it was, and can still go back.
    assert chat.locator(".item.rewound").count() == 0
    assert chat.get_by_role("button", name=re.compile("^Rewind:")).count() == 2


@pytest.mark.timeout(600)
def test_a_question_says_what_allow_for_this_session_covers_and_folds_once_answered(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("bash", {"command": "touch made.txt"}),
        reply("Made it."),
    )
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "make a file")
    question = chat.locator(".item.question.state-open")
    question.wait_for()
    covers = question.locator(".covers").inner_text()
    assert "allows this exact command again until the session ends" in covers
    assert "any other command, even a similar one, is asked" in covers
    question.get_by_role("button", name="Allow for this session", exact=True).click()

    folded = chat.locator("details.question.folded.state-answered")
    folded.wait_for()
    assert "answered: Allow for this session" in folded.locator("summary").inner_text()
    assert not folded.locator(".question-text").is_visible()  # folded away
    turns_ended(chat, 1)
    harness.wait_until(lambda: (workspace / "made.txt").exists(), 30, "the command to run")
    assert "exit code 0" in tool_results(model.requests[1])[-1]


PYTHON = "def add(a, b):\n    # the sum\n    return a + b\n"


@pytest.mark.timeout(600)
def test_code_blocks_take_the_themes_token_colours_and_a_narrow_side_bar_cuts_nothing(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(reply(f"Like this:\n\n```python\n{PYTHON}```\n"))
    ready(vscode)
    chat = open_chat(vscode)  # the side bar at VS Code's default width

    send(chat, "show me add")
    turns_ended(chat, 1)
    code = chat.locator(".item.answer .code-block code")

    def colour(selector: str) -> str:
        return str(code.locator(selector).first.evaluate("(el) => getComputedStyle(el).color"))

    # Default Dark Modern: keywords #569cd6, comments #6a9955 (the theme's tokenColors).
    harness.wait_until(
        lambda: colour(".hljs-keyword") == "rgb(86, 156, 214)", 30, "the keyword colour"
    )
    assert colour(".hljs-comment") == "rgb(106, 153, 85)"
    plain = chat.locator("body").evaluate("(el) => getComputedStyle(el).color")
    assert colour(".hljs-keyword") != plain

    # Nothing of the header or the input is cut at this width.
    cut = chat.locator("body").evaluate(
        """() => {
            const ids = ['session', 'model', 'mode', 'attach', 'send', 'input'];
            const width = document.documentElement.clientWidth;
            return ids.filter((id) => {
                const box = document.getElementById(id).getBoundingClientRect();
                return box.width === 0 || box.left < 0 || box.right > width + 0.5;
            });
        }"""
    )
    assert cut == [], cut
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-narrow.png"))

    # The sessions, as people tell them apart: titles and times, no ids, no ISO dates.
    chat.get_by_role("button", name=re.compile("^Session:")).click()
    rows = vscode.workbench.quick_input.locator(".monaco-list-row")
    rows.nth(1).wait_for()
    listed = " ".join(rows.all_inner_texts())
    assert "show me add" in listed
    assert not re.search(r"\d{8}-\d{6}|\d{4}-\d{2}-\d{2}T", listed), listed
    assert re.search(r"today \d\d:\d\d", listed), listed
    vscode.page.keyboard.press("Escape")


WORKSPACE_SETTINGS = {
    "lspAgent.baseUrl": "http://127.0.0.1:9/v1",
    "lspAgent.provider": "anthropic",
    "lspAgent.mode": "auto",
    "lspAgent.review": "auto",
    "lspAgent.permissions": [{"tool": "bash", "decision": "allow"}],
}


@pytest.mark.timeout(600)
def test_a_workspaces_settings_cannot_redirect_the_endpoint_loosen_the_walls_or_swap_the_server(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    marker = workspace.parent / "swapped-server-ran"
    settings = {
        **WORKSPACE_SETTINGS,
        "lspAgent.server.command": ["/bin/sh", "-c", f"touch {marker}; exit 1"],
    }
    folder = workspace / ".vscode"
    folder.mkdir()
    (folder / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        tool_call("bash", {"command": "touch made.txt"}),
        reply("Done."),
    )
    page = vscode.page
    page.reload()  # the window reads the workspace's settings file it now has
    page.locator(".monaco-workbench .part.statusbar").wait_for(state="visible")
    ready(vscode)
    chat = open_chat(vscode)

    send(chat, "greet with hi and make a file")
    # The user's endpoint answered (not the workspace's), and the edit is reviewed, not auto.
    card = chat.locator(".item.edit.state-review")
    card.wait_for()
    card.get_by_role("button", name="Accept the edit").click()
    # The command is asked about, not allowed by the workspace's rule.
    question = chat.locator(".item.question.state-open")
    question.wait_for()
    question.get_by_role("button", name="Deny", exact=True).click()
    turns_ended(chat, 1)
    assert len(model.requests) == 4
    assert not (workspace / "made.txt").exists()
    assert not marker.exists()
    assert "denied" in tool_results(model.requests[3])[-1]
