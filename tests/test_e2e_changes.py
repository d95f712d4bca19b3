"""The agent hears what the user changed, and its edits survive the user's typing: the change
tracker wired into the real server over stdio (real watchdog, real git, a scripted model on
loopback). The stories share the module's server, with VS Code's client capabilities: what the
user changes reaches the server the same way from every client (the files, `didChange`), and how
each client's WorkspaceEdit looks is tests/test_workspace_edit.py's. A branch switch and a folder
outside git need a workspace of their own.

A change on disk reaches the server through the watcher, in its own time: a story waits for the
note to mention it (`until_noted`), and a story about what is never reported waits for a change
made after it to be noted."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.conftest import Launcher, settings_for, stop
from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel, note, reply, tool_call, until_noted

TEN_LINES = "".join(f"line {n}\n" for n in range(1, 11))

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def editor_name() -> str:
    return "visual-studio-code"


@pytest.fixture
def editor(shared_editor: Editor) -> Editor:
    return shared_editor


@pytest.fixture
def workspace(shared_editor: Editor) -> Path:
    return shared_editor.root


@pytest.fixture(scope="module")
def shared_workspace(shared_workspace: Path) -> Path:
    """The project ignores its build output and logs, as most do."""
    (shared_workspace / ".gitignore").write_text("build/\n*.log\n")
    git(shared_workspace, "add", ".gitignore")
    git(shared_workspace, "commit", "-q", "-m", "ignore build output")
    return shared_workspace


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def git(root: Path, *args: str) -> None:
    base = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*base, *args], check=True, capture_output=True)


async def test_a_file_the_user_changes_on_disk_between_turns_arrives_with_its_diff(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(tool_call("read_file", {"path": "hello.py"}), reply("read it"))
    await editor.ask("look at hello.py")

    (workspace / "hello.py").write_text('def greet():\n    return "bonjour"\n')
    model.add(*until_noted("hello.py: modified", reply("seen")))
    await editor.ask("and now?")

    block = note(model.requests[-1])
    assert "- hello.py: modified by the user" in block
    assert '-    return "hello"' in block
    assert '+    return "bonjour"' in block
    assert note(model.requests[0]) == ""
    assert note(model.requests[1]) == ""
    watched = (await editor.command("lspAgent.status", {})).changes
    assert watched.watching == "inotify"
    assert watched.mode == "git"
    assert watched.watches >= 2


async def test_typing_in_an_open_buffer_the_agent_knows_is_reported_unsaved(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.open("hello.py", language="python")
    model.add(tool_call("read_file", {"path": "hello.py"}), reply("read it"), reply("seen"))
    await editor.ask("look at hello.py")

    editor.type("hello.py", 'def greet():\n    return "typed"\n')
    await editor.command("lspAgent.status", {})  # a round trip: the server has the change
    await editor.ask("and now?")

    block = note(model.requests[-1])
    assert "- hello.py: modified in editor, unsaved by the user" in block
    assert '+    return "typed"' in block
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'


async def test_the_agents_own_accepted_edit_is_not_reported_back(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        reply("edited"),
    )
    first = await editor.ask("say hi")
    # Noted once the watcher has passed the agent's edit, which came before.
    (workspace / "later.txt").write_text("the user's own file\n")
    model.add(*until_noted("later.txt: added", reply("nothing new")))
    await editor.ask("anything changed?")

    assert first.edits.applied == 1
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hi"\n'
    assert all("hello.py" not in note(request) for request in model.requests)
    assert "- later.txt: added by the user" in note(model.requests[-1])


async def test_a_branch_switch_is_one_line_not_a_flood(
    launch: Launcher, model: ScriptedModel
) -> None:
    """A server of its own: the story leaves the repository on another branch."""
    workspace = launch.root
    git(workspace, "checkout", "-q", "-b", "feature")
    for n in range(8):
        (workspace / f"module_{n}.py").write_text(f"VALUE = {n}\n")
    (workspace / "hello.py").write_text('def greet():\n    return "feature"\n')
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "feature work")
    git(workspace, "checkout", "-q", "main")
    async with launch("visual-studio-code", settings_for(model)) as editor:
        await editor.tracker_ready()  # the first turn's snapshot knows the branch it ends on
        model.add(reply("on main"))
        await editor.ask("where are we?")

        git(workspace, "checkout", "-q", "feature")
        model.add(*until_noted("branch changed", reply("noted")))
        await editor.ask("and now?")

    block = note(model.requests[-1])
    assert "branch changed from main to feature; 9 files differ" in block
    assert block.count("\n- ") == 1, block


async def test_ignored_and_tool_folders_are_never_reported(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(reply("ready"))
    await editor.ask("start")

    for rel in (
        "build/out.o",
        "build/deep/x.o",
        "debug.log",
        ".venv/lib/site.py",
        "node_modules/a/index.js",
    ):
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("churn\n")
    # Noted once the watcher has passed the churn, which came before.
    (workspace / "later.txt").write_text("the user's own file\n")
    model.add(*until_noted("later.txt: added", reply("nothing")))
    await editor.ask("anything?")

    notes = "".join(note(request) for request in model.requests)
    assert not any(part in notes for part in ("build/", ".log", ".venv", "node_modules")), notes
    block = note(model.requests[-1])
    assert "- later.txt: added by the user" in block
    assert block.count("\n- ") == 1, block


async def test_the_user_types_elsewhere_between_plan_and_apply_and_the_edit_is_rebased(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "lines.txt").write_text(TEN_LINES)
    editor.open("lines.txt")
    typed: list[bool] = []

    def type_once() -> None:
        # The user appends a line while the edit is on its way: VS Code refuses the edit
        # computed for the older version, and the server must merge and send it again.
        if not typed:
            typed.append(True)
            buffer = editor.buffers[editor.uri("lines.txt")]
            editor.type("lines.txt", buffer.text + "typed by the user\n")

    editor.before_apply = type_once
    model.add(
        tool_call("read_file", {"path": "lines.txt"}),
        tool_call("edit_file", {"path": "lines.txt", "old": "line 2\n", "new": "line two\n"}),
        reply("done"),
    )

    result = await editor.ask("spell out line 2")

    assert result.edits.applied == 1
    assert result.edits.rejected == 0
    assert len(editor.edits_seen) == 2
    expected = TEN_LINES.replace("line 2\n", "line two\n") + "typed by the user\n"
    assert editor.buffers[editor.uri("lines.txt")].text == expected
    told = tool_results(model.requests[-1])[-1]
    assert told.startswith("lines.txt changed since you read it (the user edited line 11)")
    assert "applied: lines.txt" in told


async def test_typing_after_the_read_away_from_the_edit_is_merged_not_refused(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "lines.txt").write_text(TEN_LINES)
    editor.open("lines.txt")
    typed = asyncio.Event()

    async def type_after_the_read() -> None:
        await editor.wait_for_event("toolResult")
        editor.type("lines.txt", "# a header the user wrote\n" + TEN_LINES)
        await editor.command("lspAgent.status", {})
        typed.set()

    loop = asyncio.get_running_loop()

    def edit_once_typed(request: dict[str, Any]) -> Any:
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(typed.wait(), 20), loop).result()
        return tool_call(
            "edit_file", {"path": "lines.txt", "old": "line 9\n", "new": "line nine\n"}
        )

    model.add(tool_call("read_file", {"path": "lines.txt"}), edit_once_typed, reply("ok"))
    typing = asyncio.create_task(type_after_the_read())
    result = await editor.ask("spell out line 9")
    await typing

    assert result.edits.applied == 1
    expected = "# a header the user wrote\n" + TEN_LINES.replace("line 9\n", "line nine\n")
    assert editor.buffers[editor.uri("lines.txt")].text == expected
    assert "the user edited line 1" in tool_results(model.requests[-1])[-1]


async def test_the_user_keeps_one_of_two_hunks_and_the_model_hears_which(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "lines.txt").write_text(TEN_LINES)
    apply_all = editor.apply

    def untick_the_second_hunk(
        params: types.ApplyWorkspaceEditParams,
    ) -> types.ApplyWorkspaceEditResult:
        # What VS Code's Refactor Preview does when the user unticks a hunk: the edit is
        # applied without it, and the answer is still `applied: true`.
        for change in params.edit.document_changes or []:
            if isinstance(change, types.TextDocumentEdit):
                change.edits = change.edits[:1]
        if params.edit.changes is not None:
            params.edit.changes = {
                uri: list(text_edits[:1]) for uri, text_edits in params.edit.changes.items()
            }
        return apply_all(params)

    editor.apply = untick_the_second_hunk  # type: ignore[method-assign]
    old = "line 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\n"
    new = old.replace("line 2", "line two").replace("line 9", "line nine")
    model.add(
        tool_call("read_file", {"path": "lines.txt"}),
        tool_call("edit_file", {"path": "lines.txt", "old": old, "new": new}),
        reply("ok"),
    )

    await editor.ask("spell out lines 2 and 9")

    assert (workspace / "lines.txt").read_text() == TEN_LINES.replace("line 2", "line two")
    told = tool_results(model.requests[-1])[-1]
    assert "the user applied part of your edit to lines.txt (1 of 2 hunks applied" in told
    assert "- hunk 1: replaced line 2: applied" in told
    assert "- hunk 2: replacing line 9: not applied by the user" in told
    # The events say the same, as facts an editor's chat reads without parsing the text.
    [result] = [e for e in editor.events_of("toolResult") if e["name"] == "edit_file"]
    assert [(h["hunk"], h["status"], h["what"]) for h in result["hunks"]] == [
        ("hunk 1", "accepted", "replaced line 2"),
        ("hunk 2", "rejected", "replacing line 9"),
    ]
    [edit] = editor.events_of("edit")
    assert (edit["applied"], edit["outcome"]) == (True, "1 of 2 hunks applied")
    # And so does the history after a restart.
    items = await editor.command("lspAgent.history", {"session": edit["session"]})
    [tool] = [item for item in items if getattr(item, "name", None) == "edit_file"]
    assert [(h.hunk, h.status, h.what) for h in tool.hunks] == [
        (h["hunk"], h["status"], h["what"]) for h in result["hunks"]
    ]


@pytest_asyncio.fixture(loop_scope="module")
async def plain_folder_editor(
    tmp_path: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> AsyncIterator[tuple[Editor, Path]]:
    """The server on a folder that is not a git repository (the tracker hashes files)."""
    root = tmp_path / "plain"
    root.mkdir()
    (root / "notes.txt").write_text("one\ntwo\n")
    started = await start_editor(
        root, "visual-studio-code", settings_for(model), state_dir=state_dir, home=home
    )
    yield started, root
    await stop(started)


async def test_outside_git_a_changed_file_is_reported_and_sandbox_scaffolding_is_not(
    plain_folder_editor: tuple[Editor, Path], model: ScriptedModel
) -> None:
    editor, root = plain_folder_editor
    editor.answer = lambda _: "Allow"
    model.add(
        tool_call("read_file", {"path": "notes.txt"}),
        tool_call("bash", {"command": "ls -a"}),
        reply("listed"),
    )
    await editor.ask("list the folder")
    (root / "notes.txt").write_text("one\nTWO\n")
    model.add(*until_noted("notes.txt: modified", reply("seen")))
    await editor.ask("and now?")

    # The sandbox makes placeholder folders (.git, .vscode, ...) for the life of a command.
    assert all(note(request) == "" for request in model.requests[:3])
    block = note(model.requests[-1])
    assert "- notes.txt: modified by the user" in block
    assert "+TWO" in block
    assert ".vscode" not in block
    assert ".git" not in block
