"""The moments of the VS Code extension that meet the user, end to end in code-server.

A streamed answer shows the model's lines exactly, and a second Ask never cuts into it; a server
that cannot start says what was tried, once, with the way to the setting; a question stays in
sight until answered, and an answer that comes after the turn ended is ignored quietly; typing in
a file under review moves the proposal onto the user's text. Each test reads facts: the output
channel's text as the extension wrote it, the DOM, files on disk, what the model was told.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, hang_after, reply, tool_call
from tests.vscode_fixtures import (
    LIMITS,
    VSCode,
    lines_text,
    output_lines,
    ready,
    replace_editor_text,
    review_button,
    tool_results,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

ANSWER = (
    "Here is the function:\n\n"
    "```python\n"
    "def add(a, b):\n"
    "    return a + b\n"
    "```\n\n"
    "It adds two numbers."
)


def ask(vscode: VSCode, prompt: str) -> None:
    vscode.workbench.run_command("LSP Agent: Ask…")
    vscode.workbench.answer_input(prompt, "LSP Agent: Ask")


@pytest.mark.timeout(600)
def test_a_streamed_code_block_keeps_the_models_lines_and_a_second_ask_never_cuts_into_it(
    vscode: VSCode, model: ScriptedModel
) -> None:
    # One character per chunk: every line break arrives as a chunk of its own.
    model.add(
        reply(ANSWER, chunks=len(ANSWER)),
        hang_after("The answer is forty"),
        reply("Second answer."),
    )
    page, workbench = vscode.page, vscode.workbench
    ready(vscode)

    ask(vscode, "write add")
    out = vscode.wait_for_output("_completed_")
    assert "\n## write add\n\n" + ANSWER + "\n\n_completed_\n" in out
    workbench.run_command("View: Toggle Maximized Panel")
    output_lines(page).filter(has_text="return a + b").wait_for()
    vscode.save_media(workbench.screenshot(vscode.shots / "code-block.png"))
    workbench.run_command("View: Toggle Maximized Panel")

    # A turn that is still streaming; the user asks again in the same session.
    ask(vscode, "explain slowly")
    vscode.wait_for_output("The answer is forty")
    workbench.run_command("LSP Agent: Ask…")
    busy = workbench.notification("still working on “explain slowly”")
    busy.wait_for()
    assert workbench.notification_button("still working", "Cancel Turn").is_visible()
    assert not page.locator(".quick-input-widget", has_text="LSP Agent: Ask").is_visible()
    # Read and closed: VS Code shows three toasts at most, and the turn's progress is one.
    busy.hover()  # its close button shows under the pointer
    busy.locator(".codicon-notifications-clear").click()
    busy.wait_for(state="detached")

    # In a new session the user may ask at once: that answer waits for the running one.
    workbench.run_command("LSP Agent: New Session")
    # Its own toast (the running turn's progress may still read "start a new session …").
    started = workbench.notification("a new session started")
    started.wait_for()
    started.hover()
    started.locator(".codicon-notifications-clear").click()
    started.wait_for(state="detached")
    ask(vscode, "second question")
    workbench.notification("the answer to “second question” is ready").wait_for()
    assert "second question" not in vscode.output()
    assert vscode.output().endswith("The answer is forty")

    model.release()
    out = vscode.wait_for_output("Second answer.")
    # The second turn of the session says it continues it; each turn ends with its token use.
    first = re.search(
        r"\n## explain slowly\n_continuing session \S+ \(1 earlier turn\)[^\n]*_\n\n"
        r"The answer is forty\n\n_completed_\n_tokens: [^\n]*_\n",
        out,
    )
    assert first is not None, out
    after = out[first.end() :]
    assert re.fullmatch(
        r"\n_a new session_\n\n## second question\n\nSecond answer\.\n\n_completed_\n"
        r"_tokens: [^\n]*_\n",
        after,
    ), after


@pytest.mark.timeout(600)
@pytest.mark.parametrize("extra_settings", [{"lspAgent.server.command": [], "lspAgent.model": ""}])
@pytest.mark.parametrize("extra_env", [{"PATH": "/usr/bin:/bin", "PYTHONPATH": ""}])
def test_a_server_that_cannot_start_says_what_was_tried_and_leads_to_the_setting(
    vscode: VSCode, model: ScriptedModel
) -> None:
    # No lspAgent.server.command, no lsp-agent on the PATH VS Code sees: the Python fallback,
    # Debian's python3, which has no lsp_agent module.
    page, workbench = vscode.page, vscode.workbench
    said = (
        "LSP Agent could not start its server. Tried python3 -m lsp_agent serve (lsp-agent is not "
        "on the PATH VS Code sees, so the Python fallback): it exited with code 1: "
        "/usr/bin/python3: No module named lsp_agent."
    )
    error = workbench.notification(said)
    error.wait_for()
    for button in ("Open Settings", "Show Log"):
        assert workbench.notification_button(said, button).is_visible()
    # One notification, not the language client's own on top of it.
    assert page.locator(".notifications-toasts .notification-toast").count() == 1
    workbench.status_item("server not running").wait_for()
    vscode.save_media(workbench.screenshot(vscode.shots / "server-missing.png"))

    # Ask says so again, instead of doing nothing.
    error.locator(".codicon-notifications-clear").click()
    error.wait_for(state="detached")
    workbench.run_command("LSP Agent: Ask…")
    error.wait_for()
    assert not page.locator(".quick-input-widget", has_text="LSP Agent: Ask").is_visible()

    # Open Settings shows the setting to fix (a machine setting: the Remote tab in code-server).
    workbench.notification_button(said, "Open Settings").click()
    settings_editor = page.locator(".settings-editor")
    setting = settings_editor.locator(".setting-item-contents", has_text="Server: Command")
    setting.wait_for()

    # The user points it at a Python that has lsp-agent: the server starts at once.
    setting.locator("a", has_text="Edit in settings.json").click()
    page.locator(".tab.active", has_text="settings.json").wait_for()
    working = [sys.executable, "-m", "lsp_agent", "serve"]
    # VS Code adds the setting to the file first; the user's line replaces the whole.
    replace_editor_text(
        vscode,
        json.dumps({"lspAgent.server.command": working}),
        shown='"lspAgent.server.command"',
    )
    ready(vscode, "no model")

    # No model is set: the failed turn's notification opens the setting it names.
    ask(vscode, "hello")
    failed = workbench.notification("no model configured: set lspAgent.model")
    failed.wait_for()
    workbench.notification_button("no model configured", "Open Setting").click()
    settings_editor.locator(".setting-item-contents", has_text="Model").first.wait_for()
    search = settings_editor.locator(".settings-header .suggest-input-container")
    harness.wait_until(lambda: "lspAgent.model" in search.inner_text(), 30, "the settings search")
    assert model.requests == []


@pytest.mark.timeout(600)
def test_a_question_stays_in_sight_and_an_answer_after_its_turn_ended_is_ignored_quietly(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(tool_call("bash", {"command": "touch made-by-agent.txt"}))
    page, workbench = vscode.page, vscode.workbench
    ready(vscode)

    ask(vscode, "make a file")
    question = "lsp-agent wants to run"
    workbench.notification(question).wait_for()
    waiting = workbench.status_item("LSP Agent is waiting for your answer")
    waiting.wait_for()
    workbench.status_item("waiting for your answer").first.wait_for()
    vscode.save_media(workbench.screenshot(vscode.shots / "question.png"))

    # The status bar item brings the question back (after VS Code hid the notification).
    waiting.click()
    picker = page.locator(".quick-input-widget", has_text="LSP Agent asks")
    picker.wait_for()
    for answer in ("Allow", "Allow for this session", "Deny"):
        assert picker.locator(".label-name", has_text=re.compile(f"^{answer}$")).is_visible()
    page.keyboard.press("Escape")  # answer later
    picker.wait_for(state="hidden")
    assert waiting.is_visible()

    # The user cancels the turn instead: the question goes away with it.
    workbench.run_command("LSP Agent: Cancel")
    vscode.wait_for_output("_cancelled_")
    waiting.wait_for(state="detached")

    # A late click on the question's old notification (in the notification centre).
    workbench.run_command("Notifications: Show Notifications")
    centre = page.locator(".notifications-center .notification-list-item", has_text=question)
    centre.locator(".monaco-button", has_text=re.compile("^Allow$")).click()
    workbench.status_item("that question was already closed").wait_for()
    errors = page.locator(".notification-list-item, .notification-toast", has_text="Error")
    assert errors.count() == 0, errors.all_inner_texts()
    assert not (workspace / "made-by-agent.txt").exists()
    assert model.remaining == 0


def open_file(vscode: VSCode, name: str) -> None:
    """Quick Open (Ctrl+P) the file and wait for its tab."""
    page = vscode.page
    page.locator(".monaco-workbench").click(position={"x": 640, "y": 300})
    page.keyboard.press("Control+P")
    box = vscode.workbench.quick_input.locator("input.input")
    box.wait_for(state="visible")
    box.fill(name)
    vscode.workbench.quick_input.locator(".monaco-list-row", has_text=name).first.click()
    file_tab(vscode, name).wait_for()


def file_tab(vscode: VSCode, name: str) -> Any:
    """The editor tab of the file itself (not its review)."""
    label = vscode.page.locator(".label-name", has_text=re.compile(f"^{re.escape(name)}$"))
    return vscode.page.locator(".tab").filter(has=label)


@pytest.mark.timeout(600)
def test_typing_in_a_file_under_review_moves_the_proposal_onto_the_users_text(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    path = workspace / "limits.py"
    path.write_text(lines_text(LIMITS), encoding="utf-8")
    model.add(
        tool_call("read_file", {"path": "limits.py"}),
        tool_call("edit_file", {"path": "limits.py", "old": "LEVEL = 20", "new": "LEVEL = 10"}),
        reply("The log level is 10 now.", chunks=2),
    )
    page, workbench = vscode.page, vscode.workbench
    ready(vscode)
    open_file(vscode, "limits.py")

    ask(vscode, "lower the log level")
    review_tab = page.locator(".tab", has_text="limits.py ↔ proposed")
    review_tab.wait_for()
    modified = page.locator(".monaco-diff-editor .modified")
    modified.filter(has_text="LOG_LEVEL = 10").wait_for()

    # The user goes on typing at the top of the file, in its own editor.
    file_tab(vscode, "limits.py").click()
    page.locator(".editor-instance .monaco-editor .view-lines").first.click()
    page.keyboard.press("Control+Home")
    page.keyboard.type("# tuned for production\n")

    # The review follows: the proposed side has the user's line and the agent's change, so the
    # user's line is not shown as removed.
    review_tab.click()
    modified.filter(has_text="# tuned for production").filter(has_text="LOG_LEVEL = 10").wait_for()
    workbench.notification("the proposal now applies to your text").wait_for()
    vscode.save_media(workbench.screenshot(vscode.shots / "rebased.png"))
    review_button(page, "Accept Edit").click()

    # The agent's change lands on the user's text, without a second review.
    vscode.wait_for_output("_completed_")
    assert page.locator(".tab", has_text="proposed").count() == 0
    file_tab(vscode, "limits.py").click()
    page.keyboard.press("Control+S")
    expected = "# tuned for production\n" + lines_text(LIMITS).replace("LEVEL = 20", "LEVEL = 10")
    harness.wait_until(lambda: path.read_text() == expected, 30, "limits.py to hold both changes")

    # The model was told its edit landed on the user's text (not rejected, not redone by them).
    assert model.remaining == 0, model.rejections
    *_, told = tool_results(model.requests[2])
    assert "your edit was applied on top of their text" in told, told
    assert "rejected" not in told
