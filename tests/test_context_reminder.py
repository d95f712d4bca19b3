"""The late-injected reminder: context, the plan, and files someone else changed between turns."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lsp_agent.changes.git import current_branch
from lsp_agent.changes.session import SessionChanges
from lsp_agent.changes.tracker import ChangeTracker
from lsp_agent.context.reminder import reminder_message, render
from lsp_agent.tools.todo import TodoItem, render_plan

NOON = datetime(2026, 3, 1, 12, 0, 59, tzinfo=UTC)


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
    assert "<todos>" not in message["content"]
    assert "<file_changes>" not in message["content"]


async def test_a_plan_shows_in_todos() -> None:
    plan = [
        TodoItem("Reproduce the bug", "done"),
        TodoItem("Fix the parser", "in_progress"),
        TodoItem("Run the tests", "pending"),
    ]

    text = render(Path("/w"), "main", NOON, plan=render_plan(plan))

    assert text.endswith(
        "</context>\n<todos>\n"
        "[x] Reproduce the bug\n[~] Fix the parser\n[ ] Run the tests\n"
        "</todos>"
    )


def test_a_block_rendered_by_the_tracker_goes_in_as_it_is() -> None:
    block = "<file_changes>\n- modified: a.py\n</file_changes>"

    assert render(Path("/w"), "main", NOON, file_changes=block).endswith("</context>\n" + block)
    assert "file_changes" not in render(Path("/w"), "main", NOON, file_changes="")


async def test_the_branch_is_read_without_running_git(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError("git was run")

    git(workspace, "checkout", "-q", "-b", "feature/context")
    (workspace / "sub").mkdir()
    monkeypatch.setattr("subprocess.Popen", no_git)

    assert await current_branch(workspace) == "feature/context"
    assert await current_branch(workspace / "sub") == "feature/context", "found from a subfolder"


async def test_a_detached_head_and_a_folder_outside_git(workspace: Path, tmp_path: Path) -> None:
    git(workspace, "checkout", "-q", "--detach")
    assert await current_branch(workspace) == "(detached)"

    plain = tmp_path / "plain"
    plain.mkdir()
    message = await reminder_message(plain, now=NOON)
    assert "git: not a git repository" in message["content"]


async def test_a_worktree_reads_its_own_head(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(workspace, "worktree", "add", "-q", "-b", "side", str(other))

    assert (other / ".git").is_file()
    assert await current_branch(other) == "side"


async def test_the_branch_follows_a_switch_and_a_repository_made_inside(
    workspace: Path,
) -> None:
    """The reminder asks before every call; what it found first must not stick."""
    sub = workspace / "sub"
    sub.mkdir()
    assert await current_branch(sub) == "main"
    git(workspace, "checkout", "-q", "-b", "feature/next")
    assert await current_branch(sub) == "feature/next"
    git(sub, "init", "-q", "-b", "inner")
    assert await current_branch(sub) == "inner"
    assert await current_branch(workspace) == "feature/next"


async def session_changes(root: Path) -> tuple[SessionChanges, ChangeTracker]:
    """What `lsp-agent run` uses: a tracker without watcher, through a session's view."""
    tracker = ChangeTracker(root, observer="none")
    await tracker.start()
    return SessionChanges(tracker, "session"), tracker


async def test_the_first_call_of_a_session_reports_nothing(workspace: Path) -> None:
    changes, tracker = await session_changes(workspace)
    (workspace / "hello.py").write_text("changed\n")

    assert await changes.changes() == ""
    await tracker.stop()


async def test_what_the_user_did_between_turns_is_reported(workspace: Path) -> None:
    (workspace / "agent.py").write_text("the agent wrote this during its turn\n")
    (workspace / "gone.py").write_text("x\n")
    git(workspace, "add", "gone.py")
    git(workspace, "commit", "-q", "-m", "gone")
    changes, tracker = await session_changes(workspace)
    await changes.snapshot()

    (workspace / "hello.py").write_text("def greet():\n    return 'hi'\n")
    (workspace / "notes.txt").write_text("new\n")
    (workspace / "gone.py").unlink()

    note = await changes.changes()
    assert "- gone.py: deleted by the user" in note
    assert "- hello.py: modified by the user" in note
    assert "- notes.txt: added by the user" in note
    assert "agent.py" not in note
    await tracker.stop()


async def test_a_commit_or_a_stage_alone_lists_no_file(workspace: Path) -> None:
    (workspace / "hello.py").write_text("the agent's edit\n")
    (workspace / "more.py").write_text("also the agent's\n")
    changes, tracker = await session_changes(workspace)
    await changes.snapshot()

    git(workspace, "add", "more.py")
    git(workspace, "commit", "-q", "-am", "the user commits the agent's work")

    note = await changes.changes()
    assert "branch main moved from" in note
    assert "; 2 files differ" in note
    assert "hello.py" not in note
    assert "more.py" not in note
    await tracker.stop()


async def test_a_rename_names_both_paths(workspace: Path) -> None:
    changes, tracker = await session_changes(workspace)
    await changes.snapshot()

    git(workspace, "mv", "hello.py", "greeting.py")

    assert "- hello.py → greeting.py: renamed by the user" in await changes.changes()
    await tracker.stop()


async def test_paths_are_relative_to_the_workspace_inside_a_bigger_repository(
    workspace: Path,
) -> None:
    package = workspace / "pkg"
    package.mkdir()
    changes, tracker = await session_changes(package)
    await changes.snapshot()

    (package / "mod.py").write_text("x = 1\n")
    (workspace / "outside.py").write_text("not under the workspace\n")

    note = await changes.changes()
    assert "- mod.py: added by the user" in note
    assert "outside.py" not in note
    await tracker.stop()


async def test_changes_are_compared_once_per_turn(workspace: Path) -> None:
    changes, tracker = await session_changes(workspace)
    await changes.snapshot()
    (workspace / "hello.py").write_text("by the user\n")
    first = await changes.changes()

    (workspace / "notes.py").write_text("typed by the user, mid-turn\n")

    assert await changes.changes() == first
    assert "- hello.py: modified by the user" in first
    assert "notes.py" not in first
    await changes.snapshot()
    # The next turn's one comparison tells what changed since this turn's.
    second = await changes.changes()
    assert "- notes.py: added by the user" in second
    assert "hello.py" not in second
    await changes.snapshot()
    assert await changes.changes() == ""
    await tracker.stop()


async def test_outside_git_files_are_compared_by_content(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    changes, tracker = await session_changes(tmp_path)
    await changes.snapshot()
    (tmp_path / "a.txt").write_text("A\n")
    (tmp_path / "b.txt").write_text("b\n")

    note = await changes.changes()
    assert "- a.txt: modified by the user" in note
    assert "- b.txt: added by the user" in note
    await tracker.stop()
