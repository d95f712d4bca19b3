"""The change tracker on real git repositories, with real watchdog and real `git`.

Nothing here waits a fixed time: a test polls `changes_since_snapshot()` until what it expects
shows up (bounded), and a test that expects something *not* to show up writes a sentinel file
last and waits for the sentinel, so every event before it has been seen.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
import pytest_asyncio

from lsp_agent.changes.compare import pair_renames
from lsp_agent.changes.tracker import (
    ADDED,
    AGENT,
    BRANCH,
    DELETED,
    FORMATTER,
    MODIFIED,
    RENAMED,
    STARTED_LATE,
    STARTING,
    UNSAVED,
    UNSEEN,
    USER,
    ChangeTracker,
    FileChangeEntry,
    render_file_changes,
)

WAIT_S = 15.0
"""Upper bound for an expected change to show up (generous: CI machines are slow)."""

Entries = list[FileChangeEntry]


def git(root: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def make_repo(root: Path) -> Path:
    """A small project: sources, ignored build output, a virtualenv and node_modules."""
    root.mkdir(parents=True)
    files = {
        ".gitignore": "build/\n*.log\n",
        "src/app.py": "def greet():\n    return 'hello'\n\n\ndef main():\n    print(greet())\n",
        "src/util.py": "X = 1\nY = 2\n",
        "src/pkg/__init__.py": "",
        "src/pkg/core.py": "value = 1\n",
        "README.md": "# project\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    for folder in ("build", ".venv/lib", "node_modules/left-pad", "env2"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "env2" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "project")


@pytest_asyncio.fixture
async def tracker(repo: Path) -> AsyncIterator[ChangeTracker]:
    started = ChangeTracker(repo)
    await started.start()
    yield started
    await started.stop()


async def wait_for(
    tracker: ChangeTracker,
    predicate: Callable[[Entries], bool],
    *,
    key: str = "default",
    include_agent: bool = False,
) -> Entries:
    """Poll until `predicate(entries)` holds; fail with the last entries seen."""
    deadline = time.monotonic() + WAIT_S
    entries: Entries = []
    while time.monotonic() < deadline:
        entries = await tracker.changes_since_snapshot(key, include_agent=include_agent)
        if predicate(entries):
            return entries
        await asyncio.sleep(0.05)
    raise AssertionError(f"not seen within {WAIT_S} s; last entries: {entries}")


def paths(entries: Sequence[FileChangeEntry]) -> set[str]:
    return {e.path for e in entries if e.status != BRANCH}


def has(path: str) -> Callable[[Entries], bool]:
    return lambda entries: path in paths(entries)


def by_path(entries: Sequence[FileChangeEntry]) -> dict[str, FileChangeEntry]:
    return {e.path: e for e in entries if e.status != BRANCH}


async def test_a_file_the_user_edits_on_disk_between_turns_is_reported_with_its_diff(
    tracker: ChangeTracker, repo: Path
) -> None:
    app = repo / "src" / "app.py"
    tracker.agent_read(app, app.read_text())
    await tracker.snapshot()
    app.write_text(app.read_text().replace("'hello'", "'bonjour'"))

    entries = await wait_for(tracker, has("src/app.py"))

    entry = by_path(entries)["src/app.py"]
    assert (entry.status, entry.source) == (MODIFIED, USER)
    assert entry.diff is not None
    assert "-    return 'hello'" in entry.diff
    assert "+    return 'bonjour'" in entry.diff
    note = render_file_changes(entries)
    assert "src/app.py: modified by the user" in note
    assert "+    return 'bonjour'" in note
    assert "Read a file again before editing it" in note


async def test_a_change_to_a_file_the_agent_never_read_is_diffed_against_the_commit(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    (repo / "src" / "util.py").write_text("X = 1\nY = 3\n")

    entries = await wait_for(tracker, has("src/util.py"))

    diff = by_path(entries)["src/util.py"].diff
    assert diff is not None
    assert "-Y = 2" in diff
    assert "+Y = 3" in diff


async def test_a_staged_change_is_diffed_against_the_commit(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    (repo / "src" / "util.py").write_text("X = 1\nY = 4\n")
    git(repo, "add", "src/util.py")

    entries = await wait_for(
        tracker, lambda e: has("src/util.py")(e) and by_path(e)["src/util.py"].diff is not None
    )

    diff = by_path(entries)["src/util.py"].diff
    assert diff is not None
    assert "-Y = 2" in diff
    assert "+Y = 4" in diff


def test_a_move_reported_by_inode_never_pairs_files_of_different_content() -> None:
    # watchdog's polling observer tells moves by inode, and inodes of deleted files are reused.
    found = {
        "old/a.py": (DELETED, None, "blob-a"),
        "old/b.py": (DELETED, None, "blob-b"),
        "new/a.py": (ADDED, "blob-a", None),
        "new/b.py": (ADDED, "blob-b", None),
        "gone.py": (DELETED, None, "blob-g"),
        "edited.py": (ADDED, "blob-e", None),
    }
    moves = [("old/a.py", "new/b.py"), ("old/b.py", "new/a.py"), ("gone.py", "edited.py")]

    assert pair_renames(found, moves) == {
        "new/a.py": "old/a.py",
        "new/b.py": "old/b.py",
        "edited.py": "gone.py",  # a real move whose content changed on the way
    }


async def test_a_large_change_is_listed_without_its_diff(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    (repo / "src" / "util.py").write_text("".join(f"Z{i} = {i}\n" for i in range(60)))

    entries = await wait_for(tracker, has("src/util.py"))

    entry = by_path(entries)["src/util.py"]
    assert entry.status == MODIFIED
    assert entry.diff is None


async def test_ignored_files_virtualenvs_and_node_modules_are_never_reported(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    (repo / "build" / "out.bin").write_bytes(b"\0" * 100)
    (repo / "build" / "deep").mkdir()
    (repo / "build" / "deep" / "x.txt").write_text("x")
    (repo / ".venv" / "lib" / "site.py").write_text("x = 1\n")
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    (repo / "env2" / "lib.py").write_text("x = 1\n")
    (repo / "debug.log").write_text("noise\n")
    (repo / "src" / "__pycache__").mkdir()
    (repo / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0")
    (repo / "sentinel.txt").write_text("last\n")

    entries = await wait_for(tracker, has("sentinel.txt"))

    assert paths(entries) == {"sentinel.txt"}


async def test_a_git_checkout_of_another_branch_is_one_line(
    tracker: ChangeTracker, repo: Path
) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    for name in ("src/app.py", "src/util.py", "README.md"):
        (repo / name).write_text((repo / name).read_text() + "# feature\n")
    (repo / "src" / "feature.py").write_text("NEW = 1\n")
    git(repo, "add", "src", "README.md")
    git(repo, "commit", "-q", "-m", "feature work")
    git(repo, "checkout", "-q", "main")
    await tracker.settle()  # the events of the checkout back come before the snapshot
    await tracker.snapshot()

    git(repo, "checkout", "-q", "feature")

    entries = await wait_for(tracker, lambda e: any(x.status == BRANCH for x in e))
    await tracker.settle()
    entries = await tracker.changes_since_snapshot()
    assert [e.detail for e in entries] == ["branch changed from main to feature; 4 files differ"]
    assert render_file_changes(entries).count("\n- ") == 1


async def test_a_commit_of_the_users_work_says_the_branch_moved_and_lists_no_file(
    tracker: ChangeTracker, repo: Path
) -> None:
    (repo / "src" / "util.py").write_text("X = 1\nY = 20\n")
    await tracker.settle()
    await tracker.snapshot()

    git(repo, "commit", "-q", "-am", "user work")

    entries = await wait_for(tracker, lambda e: any(x.status == BRANCH for x in e))
    assert paths(entries) == set()
    detail = entries[0].detail or ""
    assert detail.startswith("branch main moved from ")
    assert detail.endswith("; 1 file differ")


async def test_the_agents_own_applied_edit_is_not_reported_as_the_users(
    tracker: ChangeTracker, repo: Path
) -> None:
    app = repo / "src" / "app.py"
    tracker.agent_read(app, app.read_text())
    await tracker.snapshot()
    after = app.read_text().replace("'hello'", "'hi'")
    tracker.agent_applied(app, after)
    app.write_text(after)  # the editor saves what the agent proposed
    (repo / "sentinel.txt").write_text("last\n")

    entries = await wait_for(tracker, has("sentinel.txt"))

    assert paths(entries) == {"sentinel.txt"}
    everything = await tracker.changes_since_snapshot(include_agent=True)
    assert by_path(everything)["src/app.py"].source == AGENT
    assert "src/app.py" not in render_file_changes(everything)


async def test_the_users_change_on_top_of_the_agents_edit_is_reported(
    tracker: ChangeTracker, repo: Path
) -> None:
    app = repo / "src" / "app.py"
    await tracker.snapshot()
    after = app.read_text().replace("'hello'", "'hi'")
    tracker.agent_applied(app, after)
    app.write_text(after)
    app.write_text(after.replace("main()", "run()"))

    entries = await wait_for(
        tracker,
        lambda e: "src/app.py" in paths(e) and "run()" in (by_path(e)["src/app.py"].diff or ""),
    )

    entry = by_path(entries)["src/app.py"]
    assert entry.source == USER
    assert entry.diff is not None
    assert "+def run():" in entry.diff
    assert "+    return 'hi'" not in entry.diff  # the agent's part is not the user's change


async def test_a_whitespace_only_rewrite_right_after_the_agents_edit_is_the_formatters(
    tracker: ChangeTracker, repo: Path
) -> None:
    util = repo / "src" / "util.py"
    await tracker.snapshot()
    after = "X = 1\nY = 2\nZ=3\n"
    tracker.agent_applied(util, after)
    util.write_text(after)
    tracker.buffer_saved(util)
    util.write_text("X = 1\nY = 2\nZ = 3\n")  # format on save

    entries = await wait_for(
        tracker,
        lambda e: "src/util.py" in paths(e) and "Z = 3" in (by_path(e)["src/util.py"].diff or ""),
    )

    assert by_path(entries)["src/util.py"].source == FORMATTER
    assert "by a formatter" in render_file_changes(entries)


async def test_typing_in_an_open_buffer_of_a_known_file_is_modified_in_editor_unsaved(
    tracker: ChangeTracker, repo: Path
) -> None:
    app = repo / "src" / "app.py"
    text = app.read_text()
    tracker.agent_read(app, text)
    tracker.buffer_changed(app, text, 1)
    await tracker.snapshot()

    tracker.buffer_changed(app, text.replace("main()", "start()"), 2)

    entries = await tracker.changes_since_snapshot()
    entry = by_path(entries)["src/app.py"]
    assert (entry.status, entry.source) == (UNSAVED, USER)
    assert entry.diff is not None
    assert "+def start():" in entry.diff
    assert "src/app.py: modified in editor, unsaved by the user" in render_file_changes(entries)

    # Saved: the disk now holds the text, and the file is an ordinary modification.
    app.write_text(text.replace("main()", "start()"))
    tracker.buffer_saved(app)
    entries = await wait_for(
        tracker,
        lambda e: "src/app.py" in paths(e) and by_path(e)["src/app.py"].status == MODIFIED,
    )


async def test_the_agents_edit_landing_in_a_buffer_is_not_reported(
    tracker: ChangeTracker, repo: Path
) -> None:
    app = repo / "src" / "app.py"
    text = app.read_text()
    tracker.agent_read(app, text)
    await tracker.snapshot()
    after = text.replace("'hello'", "'hey'")
    tracker.agent_applied(app, after)
    tracker.buffer_changed(app, after, 7)

    assert await tracker.changes_since_snapshot() == []
    everything = await tracker.changes_since_snapshot(include_agent=True)
    assert [(e.path, e.status, e.source) for e in everything] == [("src/app.py", UNSAVED, AGENT)]


async def test_typing_in_a_buffer_the_agent_never_read_is_reported_unsaved_too(
    tracker: ChangeTracker, repo: Path
) -> None:
    tracker.buffer_changed(repo / "README.md", "# project\n", 1)  # opened, as on disk
    await tracker.snapshot()
    tracker.buffer_changed(repo / "README.md", "# changed\n", 3)

    entries = await tracker.changes_since_snapshot()

    entry = by_path(entries)["README.md"]
    assert (entry.status, entry.source) == (UNSAVED, USER)
    assert entry.diff == "@@ -1 +1 @@\n-# project\n+# changed"


async def test_a_file_new_on_disk_and_typed_in_is_reported_with_its_buffer_text(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    fresh = repo / "src" / "fresh.py"
    fresh.write_text("A = 1\n")
    tracker.buffer_changed(fresh, "A = 1\n", 1)
    tracker.buffer_changed(fresh, "A = 1\nB = 2\n", 2)

    # Once the watcher has seen the file appear, the model gets the whole buffer: it knew none
    # of the file.
    entries = await wait_for(
        tracker,
        lambda e: any(x.path == "src/fresh.py" and "@@ -0,0" in (x.diff or "") for x in e),
    )

    assert [(e.path, e.status) for e in entries] == [("src/fresh.py", UNSAVED)]
    assert entries[0].diff == "@@ -0,0 +1,2 @@\n+A = 1\n+B = 2"


async def test_an_open_buffer_that_matches_the_disk_is_not_reported(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    tracker.buffer_changed(repo / "README.md", "# project\n", 1)
    tracker.buffer_changed(repo / "src" / "util.py", "X = 1\nY = 2\n", 1)

    assert await tracker.changes_since_snapshot() == []


async def test_a_file_read_again_drops_out_of_the_note(tracker: ChangeTracker, repo: Path) -> None:
    util = repo / "src" / "util.py"
    await tracker.snapshot()
    util.write_text("X = 10\nY = 2\n")
    await wait_for(tracker, has("src/util.py"))

    tracker.agent_read(util, util.read_text())

    assert await tracker.changes_since_snapshot() == []
    util.write_text("X = 11\nY = 2\n")
    entries = await wait_for(tracker, has("src/util.py"))
    assert by_path(entries)["src/util.py"].diff == "@@ -1,2 +1,2 @@\n-X = 10\n+X = 11\n Y = 2"


async def test_deleted_added_and_renamed_files(tracker: ChangeTracker, repo: Path) -> None:
    await tracker.snapshot()
    (repo / "README.md").unlink()
    (repo / "src" / "util.py").rename(repo / "src" / "helpers.py")
    git(repo, "mv", "src/pkg/core.py", "src/pkg/engine.py")  # a staged rename
    (repo / "src" / "new.py").write_text("NEW = 1\n")

    entries = await wait_for(tracker, lambda e: len(paths(e)) == 4)

    found = {(e.path, e.status, e.old_path) for e in entries}
    assert found == {
        ("README.md", DELETED, None),
        ("src/helpers.py", RENAMED, "src/util.py"),
        ("src/pkg/engine.py", RENAMED, "src/pkg/core.py"),
        ("src/new.py", ADDED, None),
    }
    note = render_file_changes(entries)
    assert "src/util.py → src/helpers.py: renamed by the user" in note
    assert "README.md: deleted by the user" in note


async def test_a_moved_folder_reports_each_file_as_renamed(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot()
    (repo / "src" / "pkg").rename(repo / "src" / "lib")

    entries = await wait_for(tracker, lambda e: len(paths(e)) == 2)

    assert {(e.path, e.status, e.old_path) for e in entries} == {
        ("src/lib/__init__.py", RENAMED, "src/pkg/__init__.py"),
        ("src/lib/core.py", RENAMED, "src/pkg/core.py"),
    }


async def test_a_change_undone_before_the_next_call_is_not_reported(
    tracker: ChangeTracker, repo: Path
) -> None:
    util = repo / "src" / "util.py"
    original = util.read_text()
    await tracker.snapshot()
    util.write_text("changed\n")
    await wait_for(tracker, has("src/util.py"))
    util.write_text(original)
    (repo / "sentinel.txt").write_text("x")

    entries = await wait_for(tracker, has("sentinel.txt"))

    assert paths(entries) == {"sentinel.txt"}


async def test_calls_made_while_the_tracker_starts_wait_for_it(repo: Path) -> None:
    tracker = ChangeTracker(repo)
    starting = asyncio.create_task(tracker.start())
    await asyncio.sleep(0)  # the server's background task has begun
    try:
        await tracker.snapshot()  # waits for the first status instead of comparing with nothing
        assert starting.done()
        (repo / "README.md").write_text("# changed\n")
        await wait_for(tracker, has("README.md"))
    finally:
        await starting
        await tracker.stop()


async def test_a_turn_that_starts_before_the_tracker_is_ready_does_not_wait_and_says_so(
    repo: Path,
) -> None:
    tracker = ChangeTracker(repo)
    starting = asyncio.create_task(tracker.start())  # not even begun: nothing awaited yet
    try:
        # The session's first snapshot and the calls of its first turn answer at once.
        await tracker.snapshot("first", wait=False, first=True)
        assert not tracker.ready
        assert await tracker.changes_since_snapshot("first", wait=False) == []
        # A turn that ended before the tracker was ready: the next one is told what it missed.
        await tracker.snapshot("later", wait=False)
        still = await tracker.changes_since_snapshot("later", wait=False)
        assert not tracker.ready
        assert [e.detail for e in still] == [STARTING]
        assert STARTING in render_file_changes(still)

        await starting
        assert tracker.ready
        (repo / "README.md").write_text("# after the start\n")
        entries = await wait_for(tracker, has("README.md"), key="later")
        assert entries[0].detail == STARTED_LATE
        first = await wait_for(tracker, has("README.md"), key="first")
        assert all(e.status != UNSEEN for e in first)
    finally:
        await starting
        await tracker.stop()


async def test_without_a_snapshot_there_is_nothing_to_report(
    tracker: ChangeTracker, repo: Path
) -> None:
    (repo / "src" / "util.py").write_text("changed\n")
    assert await tracker.changes_since_snapshot() == []
    assert await tracker.changes_since_snapshot("another-session") == []


async def test_each_session_compares_with_its_own_snapshot(
    tracker: ChangeTracker, repo: Path
) -> None:
    await tracker.snapshot("a")
    (repo / "src" / "util.py").write_text("X = 5\n")
    await wait_for(tracker, has("src/util.py"), key="a")
    await tracker.snapshot("b")
    (repo / "README.md").write_text("# new title\n")

    a = await wait_for(tracker, has("README.md"), key="a")
    b = await wait_for(tracker, has("README.md"), key="b")

    assert paths(a) == {"src/util.py", "README.md"}
    assert paths(b) == {"README.md"}


async def test_a_workspace_folder_inside_a_larger_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "mono")
    tracker = ChangeTracker(repo / "src")
    await tracker.start()
    try:
        await tracker.snapshot()
        (repo / "src" / "util.py").write_text("X = 2\n")
        (repo / "README.md").write_text("outside the folder\n")
        (repo / "src" / "sentinel.txt").write_text("x")
        entries = await wait_for(tracker, has("sentinel.txt"))
        assert paths(entries) == {"util.py", "sentinel.txt"}
    finally:
        await tracker.stop()


async def test_outside_git_content_hashes_tell_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "docs").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    (root / "docs" / "c.txt").write_text("gamma\n")
    (root / "node_modules").mkdir()
    (root / "cache").mkdir()
    (root / ".gitignore").write_text("cache/\n*.tmp\n")  # honoured outside git too
    tracker = ChangeTracker(root)
    await tracker.start()
    try:
        assert tracker.mode == "hashes"
        await tracker.snapshot()
        (root / "a.txt").write_text("ALPHA\n")
        (root / "b.txt").write_text("beta\n")  # rewritten with the same content
        (root / "docs" / "c.txt").rename(root / "docs" / "d.txt")
        (root / "new.txt").write_text("new\n")
        (root / "node_modules" / "x.js").write_text("x")
        (root / "cache" / "blob.bin").write_text("x")
        (root / "docs" / "scratch.tmp").write_text("x")
        (root / "sentinel.txt").write_text("x")

        entries = await wait_for(tracker, lambda e: len(paths(e)) == 4)

        assert {(e.path, e.status) for e in entries} == {
            ("a.txt", MODIFIED),
            ("docs/d.txt", RENAMED),
            ("new.txt", ADDED),
            ("sentinel.txt", ADDED),
        }
        assert by_path(entries)["a.txt"].diff is None  # the agent never read it: nothing to diff
        (root / "docs" / "d.txt").unlink()
        entries = await wait_for(
            tracker, lambda e: ("docs/c.txt", DELETED) in {(x.path, x.status) for x in e}
        )
    finally:
        await tracker.stop()


async def test_without_a_watcher_one_comparison_per_turn_reports_the_same(repo: Path) -> None:
    tracker = ChangeTracker(repo, observer="polling")
    await tracker.start()
    try:
        assert tracker.watching == "polling"
        await tracker.snapshot()
        (repo / "src" / "util.py").write_text("X = 3\n")
        (repo / "build" / "out.txt").write_text("ignored\n")
        git(repo, "checkout", "-q", "-b", "other")

        entries = await tracker.changes_since_snapshot()

        assert paths(entries) == {"src/util.py"}
        assert (
            entries[0].detail == "branch changed from main to other; same commit, no file differs"
        )
        # Later calls of the same turn do not compare again; what changed meanwhile is told by
        # the next turn's comparison (the end of the turn does not take it in unseen).
        (repo / "README.md").write_text("# the user typed this during the turn\n")
        assert paths(await tracker.changes_since_snapshot()) == {"src/util.py"}
        await tracker.snapshot()
        (repo / "src" / "pkg" / "core.py").write_text("value = 2\n")
        assert paths(await tracker.changes_since_snapshot()) == {"README.md", "src/pkg/core.py"}
        await tracker.snapshot()
        assert paths(await tracker.changes_since_snapshot()) == set()
    finally:
        await tracker.stop()


async def test_pruned_folders_take_no_inotify_watch(repo: Path) -> None:
    # Hundreds of folders under node_modules, .venv and build/: within a cap of 20 watches the
    # tracker still watches with inotify, because it never descends into them.
    for top in ("node_modules", ".venv/lib", "build"):
        for i in range(150):
            (repo / top / f"d{i}").mkdir(parents=True)
    logged: list[str] = []
    tracker = ChangeTracker(repo, max_watches=20, log_line=logged.append)
    await tracker.start()
    try:
        assert (tracker.watching, logged) == ("inotify", [])
        assert tracker.watches < 20
    finally:
        await tracker.stop()


async def test_running_out_of_inotify_watches_compares_once_a_turn_logged_once(
    repo: Path,
) -> None:
    logged: list[str] = []
    tracker = ChangeTracker(repo, max_watches=2, log_line=logged.append)
    await tracker.start()
    try:
        assert (tracker.watching, tracker.watches) == ("polling", 0)
        assert len(logged) == 1
        assert "comparing it once per turn instead" in logged[0]
        assert "cap of 2 inotify watches" in logged[0]
        await tracker.snapshot()
        (repo / "src" / "util.py").write_text("X = 4\n")
        entries = await tracker.changes_since_snapshot()
        assert by_path(entries)["src/util.py"].status == MODIFIED
    finally:
        await tracker.stop()


async def test_running_out_of_watches_later_stops_watching_without_losing_changes(
    repo: Path,
) -> None:
    logged: list[str] = []
    measuring = ChangeTracker(repo)
    await measuring.start()
    needed = measuring.watches  # root, src, src/pkg, .git, .git/refs and its folders
    await measuring.stop()
    assert 5 <= needed < 12
    tracker = ChangeTracker(repo, max_watches=needed + 1, log_line=logged.append)
    await tracker.start()
    try:
        assert tracker.watching == "inotify"
        await tracker.snapshot()
        for i in range(5):
            (repo / "src" / f"new{i}").mkdir()
            (repo / "src" / f"new{i}" / "m.py").write_text(f"N = {i}\n")
        entries = await wait_for(tracker, lambda e: len(paths(e)) == 5)
        assert {e.path for e in entries} == {f"src/new{i}/m.py" for i in range(5)}
        deadline = time.monotonic() + WAIT_S
        while tracker.watching != "polling" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert tracker.watching == "polling"
        assert len(logged) == 1
        (repo / "src" / "util.py").write_text("X = 9\n")  # during the turn: told at the next
        await tracker.snapshot()
        (repo / "README.md").write_text("# next turn\n")
        assert paths(await tracker.changes_since_snapshot()) == {"README.md", "src/util.py"}
    finally:
        await tracker.stop()


async def test_stop_ends_every_watching_thread(repo: Path) -> None:
    before = set(threading.enumerate())
    tracker = ChangeTracker(repo)
    await tracker.start()
    assert len(set(threading.enumerate()) - before) >= 2
    await tracker.stop()
    await tracker.stop()  # twice is fine

    def left() -> set[threading.Thread]:
        # asyncio's own worker threads (asyncio.to_thread) belong to the loop, not the tracker.
        started = set(threading.enumerate()) - before
        return {t for t in started if t.is_alive() and not t.name.startswith("asyncio_")}

    deadline = time.monotonic() + WAIT_S
    while left() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert left() == set()


async def test_the_editor_leaving_while_the_tracker_starts_leaves_nothing_running(
    repo: Path,
) -> None:
    for i in range(200):
        (repo / "src" / f"d{i}").mkdir()
    before = set(threading.enumerate())
    for ticks in (0, 1, 2, 4, 8, 16, 32):
        tracker = ChangeTracker(repo)
        starting = asyncio.create_task(tracker.start())
        for _ in range(ticks):
            await asyncio.sleep(0)
        starting.cancel()  # the server's background task, cancelled when the editor leaves
        await asyncio.gather(starting, return_exceptions=True)
        await asyncio.wait_for(tracker.stop(), WAIT_S)

    def left() -> set[threading.Thread]:
        started = set(threading.enumerate()) - before
        return {t for t in started if t.is_alive() and not t.name.startswith("asyncio_")}

    # A git whose creation was cancelled is killed as soon as it exists: wait for that.
    deadline = time.monotonic() + WAIT_S
    while (left() or _children()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert left() == set()
    assert _children() == []


def _children() -> list[str]:
    """Commands of this process's children that are still running."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat_fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            if int(stat_fields[1]) == os.getpid() and stat_fields[0] != "Z":
                found.append((entry / "cmdline").read_text().replace("\0", " "))
        except (OSError, ValueError, IndexError):
            continue
    return found


async def test_a_deleted_workspace_does_not_crash_the_tracker(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "gone")
    tracker = ChangeTracker(repo)
    await tracker.start()
    try:
        await tracker.snapshot()
        deleted = time.monotonic()
        shutil.rmtree(repo)
        await tracker.settle(quiet=0.01, since=deleted)  # once the watcher has seen it go
        assert tracker._watcher is not None
        assert tracker._watcher.last_event > deleted
        entries = await tracker.changes_since_snapshot()
        assert isinstance(entries, list)
    finally:
        await tracker.stop()


def test_the_note_is_bounded_and_counts_what_it_left_out() -> None:
    entries = [
        FileChangeEntry("", BRANCH, USER, detail="branch changed from main to dev; 2 files differ"),
        FileChangeEntry("mine.py", MODIFIED, AGENT),
        *(FileChangeEntry(f"src/file{i:03d}.py", MODIFIED, USER) for i in range(200)),
    ]

    note = render_file_changes(entries, limit_chars=1500)

    assert len(note) <= 1500
    assert note.startswith("<file_changes>\n")
    assert note.endswith("\n</file_changes>")
    assert "- branch changed from main to dev; 2 files differ" in note
    assert "mine.py" not in note
    shown = note.count(": modified by the user")
    assert 0 < shown < 200
    assert f"… and {200 - shown} more files" in note


def test_a_diff_that_does_not_fit_is_left_out_but_the_file_is_listed() -> None:
    big = "\n".join(f"+line {i}" for i in range(40))
    entries = [FileChangeEntry("a.py", MODIFIED, USER, diff=big)]

    note = render_file_changes(entries, limit_chars=400)

    assert "- a.py: modified by the user (diff left out: read the file)" in note
    assert "+line 0" not in note


def test_nothing_to_report_renders_nothing() -> None:
    assert render_file_changes([]) == ""
    assert render_file_changes([FileChangeEntry("a.py", MODIFIED, AGENT)]) == ""
