"""The VS Code extension end to end, in a real VS Code: code-server driven by Playwright.

The extension (`editors/vscode`) is built into a `.vsix` and installed into a code-server with its
own user data; the user settings point it at the real server (`python -m lsp_agent serve`) and the
scripted model on loopback. The test plays the user in Chromium: the command palette, the Ask
input box, the streamed answer in the output panel, the diff review's Accept / Reject buttons. It
then checks the files on disk and what the model was told.

Building the extension and installing code-server are cached in `.cache/` (see
tests/vscode_harness.py); cold, they take about a minute and a half. Node 20 and npm are required:
without them the test fails, it never skips.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, reply, tool_call, tool_calls
from tests.vscode_fixtures import (
    LIMITS,
    VSCode,
    lines_text,
    output_lines,
    review_button,
    tool_results,
)

# The fixtures every VS Code test module uses (pytest finds them as module attributes).
build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings


@pytest.mark.timeout(900)  # the first test also builds the extension and installs code-server
def test_ask_streams_the_answer_and_the_user_accepts_one_edit_and_rejects_another(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "settings.py").write_text("TIMEOUT = 30\n", encoding="utf-8")
    model.add(
        tool_calls(
            [("read_file", {"path": "hello.py"}), ("read_file", {"path": "settings.py"})],
            text="Let me read both files first.",
        ),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hello, world"'}),
        tool_call("edit_file", {"path": "settings.py", "old": "30", "new": "5"}),
        reply("The greeting is friendlier now; the timeout stays at 30.", chunks=4),
    )
    page, workbench = vscode.page, vscode.workbench

    # The extension is up and talks to the server: its status bar item shows the model.
    page.locator(".part.statusbar", has_text="test-model").wait_for(state="visible")

    workbench.run_command("LSP Agent: Ask…")
    workbench.answer_input("make the greeting friendlier and shorten the timeout", "LSP Agent: Ask")

    # The streamed text appears in the output panel while the turn runs.
    output_lines(page).filter(has_text="Let me read both files first.").wait_for()

    # First edit: the diff review of hello.py; the user accepts it.
    page.locator(".tab", has_text="hello.py ↔ proposed").wait_for(state="visible")
    page.locator(".monaco-diff-editor .modified", has_text='"hello, world"').wait_for()
    accept = review_button(page, "Accept Edit")
    accept.wait_for(state="visible")
    review = vscode.shots / "review.png"
    workbench.screenshot(review)
    accept.click()

    # Second edit: settings.py; the user rejects it with a reason.
    page.locator(".tab", has_text="settings.py ↔ proposed").wait_for(state="visible")
    page.locator(".monaco-diff-editor .modified", has_text="TIMEOUT = 5").wait_for()
    review_button(page, "Reject Edit").click()
    workbench.answer_input("keep the timeout at 30 seconds", "Reject Edit")

    # The answer and the outcome in the output panel.
    lines = output_lines(page)
    lines.filter(has_text="the timeout stays at 30").wait_for()
    lines.filter(has_text="_completed_").wait_for()
    lines.filter(has_text="2 proposed, 1 applied, 1 rejected").wait_for()
    page.locator(".tab", has_text="proposed").first.wait_for(state="detached")
    workbench.run_command("View: Toggle Maximized Panel")  # the whole turn in one picture
    lines.filter(has_text="Let me read both files first.").wait_for()
    output = vscode.shots / "output.png"
    workbench.screenshot(output)

    # On disk: the accepted edit landed, the rejected one did not.
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello, world"\n'
    assert (workspace / "settings.py").read_text() == "TIMEOUT = 30\n"

    # What the model was told: applied, then rejected with the user's reason.
    assert model.remaining == 0, model.rejections
    *_, after_accept = tool_results(model.requests[2])
    assert "applied" in after_accept
    assert "rejected" not in after_accept
    *_, after_reject = tool_results(model.requests[3])
    assert "rejected" in after_reject
    assert "keep the timeout at 30 seconds" in after_reject

    vscode.save_media(review, output)


@pytest.mark.timeout(900)  # run alone, it also builds the extension and installs code-server
def test_the_user_reverts_one_hunk_in_the_review_and_the_model_hears_which(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    before = lines_text(LIMITS)
    kept = before.replace("TIMEOUT = 30", "TIMEOUT = 60")  # the first hunk only
    (workspace / "limits.py").write_text(before, encoding="utf-8")
    # One edit_file whose old text spans lines 2-11: two hunks, nine unchanged lines apart.
    old = lines_text(LIMITS[1:11]).rstrip("\n")
    new = old.replace("TIMEOUT = 30", "TIMEOUT = 60").replace("LOG_LEVEL = 20", "LOG_LEVEL = 10")
    model.add(
        tool_call("read_file", {"path": "limits.py"}),
        tool_call("edit_file", {"path": "limits.py", "old": old, "new": new}),
        reply("The timeout is 60 seconds now; the log level stays at 20.", chunks=2),
    )
    page, workbench = vscode.page, vscode.workbench
    page.locator(".part.statusbar", has_text="test-model").wait_for(state="visible")

    workbench.run_command("LSP Agent: Ask…")
    workbench.answer_input("raise the timeout and lower the log level", "LSP Agent: Ask")

    # The review shows both changes on the proposed side.
    page.locator(".tab", has_text="limits.py ↔ proposed").wait_for(state="visible")
    modified = page.locator(".monaco-diff-editor .modified")
    modified.filter(has_text="TIMEOUT = 60").filter(has_text="LOG_LEVEL = 10").wait_for()

    # The user reverts the second hunk: the proposed side's whole text, retyped without it.
    modified.locator(".view-lines").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(kept)
    modified.filter(has_text="LOG_LEVEL = 10").wait_for(state="detached")
    modified.filter(has_text="TIMEOUT = 60").filter(has_text="LOG_LEVEL = 20").wait_for()
    review_button(page, "Accept Edit").click()

    lines = output_lines(page)
    lines.filter(has_text="_completed_").wait_for()
    page.locator(".tab", has_text="proposed").first.wait_for(state="detached")

    # On disk: the first change only.
    path = workspace / "limits.py"
    harness.wait_until(lambda: path.read_text() == kept, 30, "limits.py to hold the first hunk")

    # What the model was told: which hunk landed and which the user took back.
    assert model.remaining == 0, model.rejections
    *_, after_accept = tool_results(model.requests[2])
    assert "the user applied part of your edit to limits.py (1 of 2 hunks" in after_accept
    assert "hunk 1: replaced line 2: applied" in after_accept
    assert "hunk 2: replacing line 11: not applied by the user" in after_accept
