"""The late-injected reminder: context, the plan, and files someone else changed between turns."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from lsp_agent.context.reminder import (
    ChangedFile,
    ChangeEntry,
    GitStatusChanges,
    git_branch,
    reminder_message,
    render,
)
from lsp_agent.tools.todo import TodoItem

NOON = datetime(2026, 3, 1, 12, 0, 59, tzinfo=timezone.utc)


def git(root: Path, *args: str) -> str:
    command = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    return subprocess.run([*command, *args], check=True, capture_output=True, text=True).stdout


async def test_the_reminder_says_when_where_and_on_which_branch(workspace: Path) -> None:
    message = await reminder_message(workspace, now=NOON)

    assert message["role"] == "user"
    assert message["content"] == (
        "<context>\ntime: 2026-03-01 12:00 UTC\ngit branch: main\n"
        f"workspace root: {workspace}\n</context>"
    )


async def test_called_as_before_it_still_works(workspace: Path) -> None:
    message = await reminder_message(workspace)

    assert message["content"].startswith("<context>\ntime: ")
    assert "<todos>" not in message["content"] and "<file_changes>" not in message["content"]


async def test_a_plan_shows_in_todos() -> None:
    plan = [
        TodoItem("Reproduce the bug", "done"),
        TodoItem("Fix the parser", "in_progress"),
        TodoItem("Run the tests", "pending"),
    ]

    text = render(Path("/w"), "main", NOON, todos=plan)

    assert text.endswith(
        "</context>\n<todos>\n"
        "[x] Reproduce the bug\n[~] Fix the parser\n[ ] Run the tests\n"
        "</todos>"
    )


@dataclass(frozen=True)
class TrackerEntry:
    """Shaped like the change tracker's entries: a Path, and extra fields."""

    path: Path
    status: str
    old_path: str | None = None
    detail: str | None = None


def test_changed_files_are_listed_with_their_status_and_the_instruction() -> None:
    root = Path("/w")
    changes: list[ChangeEntry] = [
        ChangedFile("src/a.py", "modified"),
        TrackerEntry(root / "b.txt", "modified in editor, unsaved"),
        ChangedFile("new.py", "renamed", old_path="old.py"),
    ]

    text = render(root, "main", NOON, file_changes=changes)

    block = text.split("</context>\n", 1)[1]
    assert block == (
        "<file_changes>\n"
        "These files were changed by someone else since your last turn. "
        "Read them again before editing them:\n"
        "- modified: src/a.py\n"
        "- modified in editor, unsaved: b.txt\n"
        "- renamed: new.py (was old.py)\n"
        "</file_changes>"
    )


def test_a_block_rendered_by_the_tracker_goes_in_as_it_is() -> None:
    block = "<file_changes>\n- modified: a.py\n</file_changes>"

    assert render(Path("/w"), "main", NOON, file_changes=block).endswith("</context>\n" + block)
    assert "file_changes" not in render(Path("/w"), "main", NOON, file_changes="")


async def test_the_branch_is_read_without_running_git(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError("git was run")

    git(workspace, "checkout", "-q", "-b", "feature/context")
    monkeypatch.setattr("asyncio.create_subprocess_exec", no_git)

    assert await git_branch(workspace) == "feature/context"
    (workspace / "sub").mkdir()
    assert await git_branch(workspace / "sub") == "feature/context", "found from a subfolder"


async def test_a_detached_head_and_a_folder_outside_git(workspace: Path, tmp_path: Path) -> None:
    git(workspace, "checkout", "-q", "--detach")
    assert await git_branch(workspace) == "(detached)"

    plain = tmp_path / "plain"
    plain.mkdir()
    message = await reminder_message(plain, now=NOON)
    assert "git: not a git repository" in message["content"]


async def test_a_worktree_reads_its_own_head(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(workspace, "worktree", "add", "-q", "-b", "side", str(other))

    assert (other / ".git").is_file()
    assert await git_branch(other) == "side"


async def test_before_the_first_snapshot_nothing_is_reported(workspace: Path) -> None:
    (workspace / "hello.py").write_text("changed\n")

    assert await GitStatusChanges(workspace).changes() == []


async def test_what_the_user_did_between_turns_is_reported(workspace: Path) -> None:
    (workspace / "agent.py").write_text("the agent wrote this during its turn\n")
    (workspace / "gone.py").write_text("x\n")
    git(workspace, "add", "gone.py")
    git(workspace, "commit", "-q", "-m", "gone")
    changes = GitStatusChanges(workspace)
    await changes.snapshot()

    (workspace / "hello.py").write_text("def greet():\n    return 'hi'\n")
    (workspace / "notes.txt").write_text("new\n")
    (workspace / "gone.py").unlink()

    assert await changes.changes() == [
        ChangedFile("gone.py", "deleted"),
        ChangedFile("hello.py", "modified"),
        ChangedFile("notes.txt", "added"),
    ]


async def test_a_file_already_dirty_is_reported_when_it_changes_again(workspace: Path) -> None:
    (workspace / "hello.py").write_text("the agent's edit\n")
    changes = GitStatusChanges(workspace)
    await changes.snapshot()

    (workspace / "hello.py").write_text("the user's edit on top, longer\n")

    assert await changes.changes() == [ChangedFile("hello.py", "modified")]


async def test_a_commit_or_a_stage_alone_is_not_a_change(workspace: Path) -> None:
    (workspace / "hello.py").write_text("the agent's edit\n")
    (workspace / "more.py").write_text("also the agent's\n")
    changes = GitStatusChanges(workspace)
    await changes.snapshot()

    git(workspace, "add", "more.py")
    git(workspace, "commit", "-q", "-am", "the user commits the agent's work")

    assert await changes.changes() == []


async def test_a_rename_names_both_paths(workspace: Path) -> None:
    changes = GitStatusChanges(workspace)
    await changes.snapshot()

    git(workspace, "mv", "hello.py", "greeting.py")

    assert await changes.changes() == [ChangedFile("greeting.py", "renamed", "hello.py")]


async def test_paths_are_relative_to_the_workspace_inside_a_bigger_repository(
    workspace: Path,
) -> None:
    package = workspace / "pkg"
    package.mkdir()
    changes = GitStatusChanges(package)
    await changes.snapshot()

    (package / "mod.py").write_text("x = 1\n")
    (workspace / "outside.py").write_text("not under the workspace\n")

    assert await changes.changes() == [ChangedFile("mod.py", "added")]


async def test_changes_are_compared_once_per_turn(workspace: Path) -> None:
    changes = GitStatusChanges(workspace)
    await changes.snapshot()
    (workspace / "hello.py").write_text("by the user\n")
    first = await changes.changes()

    (workspace / "agent_edit.py").write_text("the agent's own edit, mid-turn\n")

    assert await changes.changes() == first == [ChangedFile("hello.py", "modified")]
    await changes.snapshot()
    assert await changes.changes() == []


async def test_outside_git_the_fallback_reports_nothing(tmp_path: Path) -> None:
    changes = GitStatusChanges(tmp_path)
    await changes.snapshot()
    (tmp_path / "a.txt").write_text("x\n")

    assert await changes.changes() == []
