"""More of the chat a user meets, end to end in code-server: points the extension's unit tests
covered and no real VS Code had driven.

A key bound to Ask About Selection with its prompt in `args` runs a turn the chat shows as it
runs; the chat in an editor tab keeps the keyboard while an edit's diff opens beside it; the `#`
picker's Problems in the Workspace adds what VS Code reports in files other than the open one;
toasts, the progress and the sessions picker name sessions by title and time, never by id or ISO
date; a turn stopped during its review ends every card and reads the same after a window reload;
a workspace's settings cannot add MCP servers or loosen the command limits; without a sandbox each
question says UNSANDBOXED once, and an Allow for this session holds. Each test reads facts: the
DOM inside the chat's webview, files on disk, what the model was sent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, hang_after, reply, tool_call
from tests.vscode_fixtures import (
    LIMITS,
    VSCode,
    chat_frame,
    last_prompt,
    lines_text,
    open_chat,
    open_file,
    pick_context,
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

SELECTION_PROMPT = "what do these lines do?"
SESSION_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
STORY_SERVER = harness.ROOT / "tests" / "mcp_story_server.py"
USER_MARKS = Path(tempfile.gettempdir()) / f"lsp-agent-story-marks-{os.getpid()}"
"""Where the user's MCP server leaves its marks (settings are fixed before a test's tmp_path)."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "extra_keybindings",
    [
        [
            {
                "key": "ctrl+alt+y",
                "command": "lsp-agent.askSelection",
                "args": SELECTION_PROMPT,
                "when": "editorTextFocus",
            }
        ]
    ],
)
def test_a_key_bound_to_ask_about_selection_with_its_prompt_shows_the_turn_in_the_chat(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(hang_after("They greet."), reply("Second answer."))
    page = vscode.page
    ready(vscode)
    chat = open_chat(vscode)
    open_file(vscode, "hello.py")
    page.keyboard.press("Control+A")
    chat.locator("#chips .chip-selection", has_text="hello.py:1-2").wait_for()

    page.keyboard.press("Control+Alt+Y")
    # The turn is in the chat while it runs: its prompt with the selection, the words so far.
    prompt = chat.locator(".item.prompt", has_text=SELECTION_PROMPT)
    prompt.wait_for()
    assert prompt.locator(".chip-selection", has_text="hello.py:1-2").count() == 1
    chat.locator(".item.answer", has_text="They greet.").wait_for()
    assert chat.locator("#stop").is_visible()
    assert chat.locator(".item.status").count() == 0
    model.release()
    turns_ended(chat, 1)
    (asked,) = model.requests
    assert last_prompt(asked).startswith(SELECTION_PROMPT)
    said = "\n".join(user_texts(asked))
    assert "The user is looking at hello.py, lines 1-2:" in said, said
    assert 'return "hello"' in said, said
    # No input box was asked for: the prompt came with the key.
    assert vscode.workbench.quick_input.locator(".quick-input-title").is_hidden()


@pytest.mark.timeout(600)
def test_the_chat_in_an_editor_tab_keeps_the_keyboard_while_the_diff_opens(
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
    vscode.workbench.run_command("LSP Agent: Open Chat in Editor")
    page.locator(".tab", has_text="LSP Agent Chat").wait_for()
    chat = chat_frame(page)
    box = chat.locator("#input")
    box.wait_for()

    send(chat, "double the workers")
    box.press_sequentially("next I want ", delay=40)
    page.locator(".tab", has_text="limits.py ↔ proposed").wait_for()
    chat.locator(".item.edit.state-review").wait_for()
    page.keyboard.type("tests for it", delay=40)  # the keys go wherever the focus is now

    assert box.input_value() == "next I want tests for it"
    modified = page.locator(".monaco-diff-editor .editor.modified")
    modified.filter(has_text="WORKERS = 8").wait_for()
    assert "tests" not in modified.inner_text()
    # The chat's tab stays in sight beside the diff.
    assert page.locator(".tab.active", has_text="LSP Agent Chat").is_visible()

    chat.locator(".item.edit.state-review").get_by_role("button", name="Accept the edit").click()
    turns_ended(chat, 1)
    expected = lines_text(LIMITS).replace("WORKERS = 4", "WORKERS = 8")
    harness.wait_until(lambda: path.read_text() == expected, 30, "limits.py to hold the edit")
    assert box.input_value() == "next I want tests for it"


@pytest.mark.timeout(600)
def test_problems_in_the_workspace_adds_the_problems_of_files_not_open_here(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "bad.json").write_text('{"name": "demo",, "size": }\n', encoding="utf-8")
    model.add(reply("bad.json has two syntax errors."))
    page = vscode.page
    ready(vscode)
    chat = open_chat(vscode)

    # VS Code's JSON checker reports bad.json's problems; the user moves on to hello.py.
    open_file(vscode, "bad.json")
    page.locator('[id="status.problems"]', has_text=re.compile("[1-9]")).wait_for()
    open_file(vscode, "hello.py")
    box = chat.locator("#input")
    box.click()
    box.press_sequentially("#")
    rows = vscode.workbench.quick_input.locator(".monaco-list-row")
    rows.filter(has_text="File…").wait_for()
    # hello.py has no problem of its own: the file's row is not offered, the workspace's is.
    assert rows.filter(has_text=re.compile(r"^\s*Problems\s*\d")).count() == 0
    pick_context(vscode, "Problems in the Workspace")
    chip = chat.locator("#chips .chip-problems", has_text=re.compile(r"problems \([1-9]\d*\)"))
    chip.wait_for()
    box.press_sequentially("fix these")
    box.press("Enter")

    turns_ended(chat, 1)
    asked = last_prompt(model.requests[0])
    told = "fix these\n\nProblems the user added as context:\n- bad.json:1:"
    assert asked.startswith(told), asked
    assert chat.locator(".item.prompt .chip-problems").count() == 1


def visible_words(vscode: VSCode) -> str:
    """What the toasts and the status bar say now."""
    page = vscode.page
    toasts = page.locator(".notifications-toasts .notification-toast").all_inner_texts()
    status = page.locator(".part.statusbar").inner_text()
    return "\n".join([*toasts, status])


@pytest.mark.timeout(600)
def test_toasts_the_progress_and_the_sessions_picker_show_titles_and_times_never_ids(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(reply("First answer."), hang_after(""))
    workbench = vscode.workbench
    ready(vscode)
    seen: list[str] = []

    def completed(count: int) -> None:
        harness.wait_until(
            lambda: vscode.output().count("_completed_") >= count, 60, f"{count} turns' ends"
        )

    workbench.run_command("LSP Agent: Ask…")
    workbench.answer_input("first question", "LSP Agent: Ask")
    completed(1)

    # The second Ask continues the session: its progress says so, in the user's words.
    workbench.run_command("LSP Agent: Ask…")
    workbench.answer_input("second question", "LSP Agent: Ask")
    progress = ".notifications-toasts .notification-toast, .part.statusbar .statusbar-item"
    continuing = "continuing the session (1 earlier turn)"
    vscode.page.locator(progress, has_text=continuing).first.wait_for()
    seen.append(visible_words(vscode))
    model.release()
    completed(2)

    workbench.run_command("LSP Agent: New Session")
    workbench.notification("a new session started").wait_for()
    seen.append(visible_words(vscode))

    # The sessions: their titles and when they started.
    workbench.run_command("LSP Agent: Show Sessions")
    widget = workbench.quick_input
    widget.locator(".quick-input-title", has_text="LSP Agent: Sessions").wait_for()
    rows = widget.locator(".monaco-list-row")
    rows.filter(has_text="first question").wait_for()
    listed = " ".join(rows.all_inner_texts())
    seen.append(listed)
    assert re.search(r"2 turns · today \d\d:\d\d", listed), listed
    rows.filter(has_text="first question").click()
    workbench.notification("the next Ask continues “first question”").wait_for()
    seen.append(visible_words(vscode))

    everything = "\n".join(seen)
    assert not SESSION_ID.search(everything), everything
    assert not ISO_TIME.search(everything), everything
    assert "session" in everything  # the texts read are the ones about sessions
    # The ids are real and the server has them: it is the texts that leave them out.
    assert SESSION_ID.search(vscode.output()), vscode.output()[-2000:]


@pytest.mark.timeout(900)
def test_a_turn_stopped_during_its_review_ends_every_card_and_reads_the_same_after_a_reload(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"bye"'}),
    )
    page = vscode.page
    ready(vscode)
    chat = open_chat(vscode)

    send(chat, "say bye")
    chat.locator(".item.edit.state-review").wait_for()
    page.locator(".tab", has_text="hello.py ↔ proposed").wait_for()
    chat.get_by_role("button", name="Stop the turn").click()

    def ended_states(chat: Any) -> dict[str, Any]:
        """Each card's state as the conversation shows it."""
        chat.locator(".item.status-cancelled").wait_for()
        return {
            "tools": chat.locator(".item.tool").evaluate_all(
                "(els) => els.map((el) => [el.querySelector('.state-icon')?.className ?? '',"
                " el.innerText.split('\\n')[0]])"
            ),
            "edit": chat.locator(".item.edit").evaluate_all(
                "(els) => els.map((el) => [...el.classList].filter((c) => c.startsWith('state-')))"
            ),
            "stopped": chat.locator(".item.edit").inner_text(),
            "status": chat.locator(".item.status").evaluate_all(
                "(els) => els.map((el) => [...el.classList].filter((c) => c.startsWith('status-')))"
            ),
            "spinning": chat.locator("#log .codicon-modifier-spin").count(),
        }

    before = ended_states(chat)
    assert before["edit"] == [["state-stopped"]], before
    assert "not applied: stopped" in before["stopped"]
    assert before["status"] == [["status-cancelled"]], before
    assert before["spinning"] == 0
    assert before["tools"], before
    assert all("ok" in icon for icon, _ in before["tools"]), before
    page.locator(".tab", has_text="proposed").first.wait_for(state="detached")
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'

    reload_window(vscode)
    ready(vscode)
    chat = chat_frame(page)
    chat.locator(".item.prompt", has_text="say bye").wait_for()
    after = ended_states(chat)
    assert after == before
    assert chat.locator("#stop").is_hidden()
    assert len(model.requests) == 2


WORKSPACE_MCP = "cloned"
USER_MCP = "mine"
ALLOCATE = (
    "python3 -c 'b = bytearray(200 << 20); print(len(b))'; head -c 3000000 /dev/zero > big.bin"
)


def story_server(marks: Path) -> dict[str, Any]:
    """An `mcpServers` entry that runs the tests' MCP server, leaving its marks in `marks`."""
    return {"command": sys.executable, "args": [str(STORY_SERVER), str(marks)]}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "extra_settings",
    [{"lspAgent.mcpServers": {USER_MCP: story_server(USER_MARKS)}}],
)
def test_a_workspaces_settings_cannot_add_mcp_servers_or_loosen_the_command_limits(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    USER_MARKS.mkdir(exist_ok=True)
    try:
        limited(vscode, model, workspace, USER_MARKS)
    finally:
        shutil.rmtree(USER_MARKS, ignore_errors=True)


def limited(vscode: VSCode, model: ScriptedModel, workspace: Path, user_marks: Path) -> None:
    workspace_marks = workspace.parent / "workspace-marks"
    workspace_marks.mkdir()
    folder = workspace / ".vscode"
    folder.mkdir()
    settings = {
        "lspAgent.mcpServers": {WORKSPACE_MCP: story_server(workspace_marks)},
        "lspAgent.commandMemoryMB": 64,
        "lspAgent.commandFileMB": 1,
    }
    (folder / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    model.add(tool_call("bash", {"command": ALLOCATE}), reply("Done."))
    page = vscode.page
    page.reload()  # the window reads the workspace's settings file it now has
    page.locator(".monaco-workbench .part.statusbar").wait_for(state="visible")
    ready(vscode)
    chat = open_chat(vscode)

    send(chat, "allocate and write")
    question = chat.locator(".item.question.state-open")
    question.wait_for()
    question.get_by_role("button", name="Allow", exact=True).click()
    turns_ended(chat, 1)

    offered = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    # The user's MCP server is there (the check could see one); the workspace's is not.
    assert any(name.startswith(f"mcp__{USER_MCP}__") for name in offered), offered
    assert not any(name.startswith(f"mcp__{WORKSPACE_MCP}__") for name in offered), offered
    assert any(mark.name.startswith("started-") for mark in user_marks.iterdir())
    assert list(workspace_marks.iterdir()) == []
    # The command had the user's limits: 200 MiB of memory and a 3 MB file.
    ran = tool_results(model.requests[1])[-1]
    assert "209715200" in ran, ran
    assert "exit code 0" in ran, ran
    assert (workspace / "big.bin").stat().st_size == 3_000_000


WITHOUT_LANDLOCK = (
    "from lsp_agent.safety import landlock\n"
    "landlock.abi = lambda: 0  # a kernel without Landlock\n"
    "from lsp_agent.terminal.cli import main\n"
    "raise SystemExit(main(['serve']))\n"
)
"""The server, on a machine with neither bubblewrap (LSP_AGENT_BWRAP names none) nor Landlock."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "extra_settings", [{"lspAgent.server.command": [sys.executable, "-c", WITHOUT_LANDLOCK]}]
)
@pytest.mark.parametrize("extra_env", [{"LSP_AGENT_BWRAP": ""}])
def test_without_a_sandbox_each_question_says_unsandboxed_once_and_a_session_allow_holds(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("bash", {"command": "ls"}),
        tool_call("bash", {"command": "ls"}),
        tool_call("bash", {"command": "touch made.txt"}),
        reply("Listed twice, made one."),
    )
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "list and make")
    # A read-only command, allowed unasked in a sandbox: asked, for the sandbox alone.
    question = chat.locator(".item.question.state-open")
    question.wait_for()
    text = question.locator(".question-text").inner_text()
    assert "wants to run" in text, text
    assert text.count("UNSANDBOXED") == 1, text
    assert text.count("no sandbox") == 1, text
    assert "Asked also because" not in text, text
    question.get_by_role("button", name="Allow for this session", exact=True).click()

    # The same command again is not asked; another is, with the warning once and its own reason.
    chat.locator(".item.question.state-open", has_text="touch made.txt").wait_for()
    text = chat.locator(".item.question.state-open .question-text").inner_text()
    assert text.count("UNSANDBOXED") == 1, text
    assert text.count("no sandbox") == 1, text
    assert "Asked also because" in text, text
    second = chat.locator(".item.question.state-open")
    second.get_by_role("button", name="Allow", exact=True).click()
    turns_ended(chat, 1)

    assert chat.locator(".item.question").count() == 2
    ran = tool_results(model.requests[3])
    assert [result.startswith("exit code 0") for result in ran] == [True, True, True], ran
    assert "hello.py" in ran[1]  # the second `ls` ran, unasked
    assert (workspace / "made.txt").exists()
