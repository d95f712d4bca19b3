"""Reviews that read as the user lived them, end to end in code-server.

A line the user types next to the agent's change while it is under review is theirs: the review
shows it on both sides (never as a deletion), Accept applies what the review shows, and the chat,
the output and the agent all say the edit was applied and the line is the user's. A hunk the user
takes back reads the same in the chat and the output (partly applied, one of two), and the edit
card's Details show the diff. A code block of an answer is applied to the file as an edit the user
reviews; Ctrl+I on a selection asks about those lines, and the change comes back for review.
Each test reads facts: the DOM, files on disk, what the model was told.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, reply, tool_call
from tests.vscode_fixtures import (
    LIMITS,
    VSCode,
    file_tab,
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


@pytest.mark.timeout(600)
def test_a_line_typed_next_to_the_agents_change_is_the_users_in_the_review_and_after_accept(
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
    ready(vscode)  # the side bar at its default width: the diff shows both sides
    open_file(vscode, "limits.py")
    chat = open_chat(vscode)

    send(chat, "double the workers")
    review_tab = page.locator(".tab", has_text="limits.py ↔ proposed")
    review_tab.wait_for()
    # The user goes back to the file and writes a line right above the line the agent changes.
    file_tab(vscode, "limits.py").click()
    page.locator(".editor-group-container .monaco-editor.focused").wait_for()
    page.keyboard.press("Control+Home")
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    page.keyboard.type("# sized for the load\n")

    # The review shows the user's line on both sides: theirs, not something Accept removes.
    review_tab.click()
    modified = page.locator(".monaco-diff-editor .editor.modified")
    original = page.locator(".monaco-diff-editor .editor.original")
    modified.filter(has_text="# sized for the load").filter(has_text="WORKERS = 8").wait_for()
    original.filter(has_text="# sized for the load").wait_for()
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "review-beside.png"))
    chat.locator(".item.edit.state-review").get_by_role("button", name="Accept the edit").click()

    turns_ended(chat, 1)
    file_tab(vscode, "limits.py").click()
    page.keyboard.press("Control+S")
    expected = lines_text(LIMITS).replace("WORKERS = 4\n", "# sized for the load\nWORKERS = 8\n")
    harness.wait_until(lambda: path.read_text() == expected, 30, "limits.py to hold both lines")

    # The outcome reads as the user did it: applied, and the line is theirs.
    card = chat.locator(".item.edit.state-applied")
    hunks = card.locator(".hunks").inner_text()
    assert "hunk 1 · replaced line 5: accepted" in hunks, hunks
    assert "line 4: your change" in hunks, hunks
    told = tool_results(model.requests[2])[-1]
    assert (
        "your edit to limits.py was applied as proposed, and the user changed other lines" in told
    )
    assert "rejected" not in told
    assert "The user's lines" not in told
    out = vscode.wait_for_output("_completed_")
    assert "  edit limits.py: applied; the user also changed other lines\n" in out
    assert "_edits: 1 proposed, 1 applied (1 not as proposed), 0 rejected_" in out


@pytest.mark.timeout(600)
def test_a_hunk_taken_back_reads_the_same_in_the_chat_and_the_output_and_details_show_the_diff(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    before = lines_text(LIMITS)
    kept = before.replace("TIMEOUT = 30", "TIMEOUT = 60")
    (workspace / "limits.py").write_text(before, encoding="utf-8")
    old = lines_text(LIMITS[1:11]).rstrip("\n")
    new = old.replace("TIMEOUT = 30", "TIMEOUT = 60").replace("LOG_LEVEL = 20", "LOG_LEVEL = 10")
    model.add(
        tool_call("read_file", {"path": "limits.py"}),
        tool_call("edit_file", {"path": "limits.py", "old": old, "new": new}),
        reply("The timeout is 60 seconds now."),
    )
    page = vscode.page
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "raise the timeout and lower the log level")
    modified = page.locator(".monaco-diff-editor .editor.modified")
    modified.filter(has_text="TIMEOUT = 60").filter(has_text="LOG_LEVEL = 10").wait_for()
    # Before deciding, the card's Details show the change the agent proposes.
    card = chat.locator(".item.edit.state-review")
    card.locator(".edit-details > summary").click()
    proposal = card.locator(".edit-details")
    assert "What the agent proposed" in proposal.inner_text()
    proposed = proposal.locator(".code-block code").inner_text()
    assert "-TIMEOUT = 30\n+TIMEOUT = 60" in proposed
    assert "-LOG_LEVEL = 20\n+LOG_LEVEL = 10" in proposed
    assert "-WORKERS" not in proposed  # the lines it leaves alone are not shown as changed
    # The user takes the second hunk back in the proposed side, then accepts.
    modified.locator(".lines-content > .view-lines").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(kept)
    modified.filter(has_text="LOG_LEVEL = 10").wait_for(state="detached")
    card.get_by_role("button", name="Accept the edit").click()

    turns_ended(chat, 1)
    partial = chat.locator(".item.edit.state-partial")
    assert "partly applied" in partial.locator(".badge").inner_text()
    hunks = partial.locator(".hunks").inner_text()
    assert "hunk 1 · replaced line 2: accepted" in hunks
    assert "hunk 2 · replacing line 11: rejected" in hunks
    # Details: the diff the agent proposed; the hunk lines above it say which part landed.
    details = partial.locator(".edit-details")
    if details.get_attribute("open") is None:
        details.locator("summary").click()
    assert "What the agent proposed" in details.inner_text()
    assert "+LOG_LEVEL = 10" in details.locator(".code-block code").first.inner_text()
    out = vscode.wait_for_output("_completed_")
    assert "  edit limits.py: 1 of 2 hunks applied\n" in out
    assert "_edits: 1 proposed, 1 applied (1 not as proposed), 0 rejected_" in out
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-partial.png"))


FRIENDLIER = 'def greet():\n    return "hello, world"\n'


@pytest.mark.timeout(600)
def test_a_code_block_is_applied_to_the_file_as_an_edit_the_user_reviews(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(reply(f"Try this:\n\n```python\n{FRIENDLIER}```\n"))
    page = vscode.page
    ready(vscode)
    widen_sidebar(vscode)
    open_file(vscode, "hello.py")
    chat = open_chat(vscode)

    send(chat, "a friendlier greet?")
    turns_ended(chat, 1)
    apply = chat.get_by_role("button", name="Apply the python code to the file")
    apply.click()
    # The block replaces the function it is a new version of, once the user accepts.
    review = chat.locator(".item.review-card", has_text="apply code to hello.py")
    review.wait_for()
    page.locator(".monaco-diff-editor .modified", has_text='"hello, world"').wait_for()
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    review.get_by_role("button", name="Accept the edit").click()
    chat.locator(".item.note", has_text="Code applied to hello.py.").wait_for()
    harness.wait_until(
        lambda: (workspace / "hello.py").read_text() == FRIENDLIER, 30, "hello.py to hold the code"
    )


@pytest.mark.timeout(600)
def test_ctrl_i_on_a_selection_is_reviewed_in_place_under_the_lines_while_the_user_types_on(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hello, world"'}),
        reply("Done: it greets the world."),
    )
    page, workbench = vscode.page, vscode.workbench
    ready(vscode)
    chat = open_chat(vscode)
    open_file(vscode, "hello.py")
    page.keyboard.press("Control+Home")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Shift+End")

    page.keyboard.press("Control+I")
    workbench.answer_input("make it friendlier", "LSP Agent: Edit Selection (hello.py, lines 2)")
    # The proposal comes back under the lines, in the file's own editor: no diff editor opens.
    thread = page.locator(".review-widget", has_text="make it friendlier")
    thread.locator(".review-title", has_text="Review the change: Accept or Reject").wait_for()
    body = thread.locator(".comment-body").last
    assert '-    return "hello"' in body.inner_text()
    assert '+    return "hello, world"' in body.inner_text()
    assert page.locator(".tab", has_text="↔ proposed").count() == 0

    # The user goes on typing in the file, below: the review follows their text, and their
    # line is never shown as one the change removes.
    page.locator(".editor-instance .monaco-editor .view-lines").first.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("# mine")
    thread.locator(".comment-body", has_text="@@ -1,3 +1,3 @@").wait_for()
    assert "-# mine" not in body.inner_text()
    assert '+    return "hello, world"' in body.inner_text()
    vscode.save_media(workbench.screenshot(vscode.shots / "edit-selection.png"))

    thread.get_by_role("button", name="Accept Edit").click()
    thread.locator(".comment-body", has_text="Applied (1 edit).").wait_for()
    assert "Done: it greets the world." in thread.inner_text()
    # The turn was shown in the chat too, with the lines it was about.
    turns_ended(chat, 1)
    assert chat.locator(".item.prompt .chip-selection", has_text="hello.py:2").count() == 1
    asked = last_prompt(model.requests[0])
    assert asked.startswith("make it friendlier\n\nThe user is looking at hello.py, line 2:")
    assert 'return "hello"' in asked

    file_tab(vscode, "hello.py").click()
    page.keyboard.press("Control+S")
    harness.wait_until(
        lambda: (workspace / "hello.py").read_text() == FRIENDLIER + "# mine",
        30,
        "hello.py edited, with the user's line",
    )
    thread.get_by_role("button", name="Close").click()
    thread.wait_for(state="detached")
