"""The watcher is trusted only while it shows it works, and its watches stay within budget.

Real git repositories and real watchdog, except where a story needs a watcher that fails: no
real observer can be made to miss events on demand, so those stories use a test double, and
say so. `Relay` is the real inotify observer with a hand on the wire (it can hold back the
events of chosen paths, or report lost events as watchdog does after the kernel's queue
overflowed); `silent_observer` is a watchdog observer whose reader never reads anything.

Nothing here waits a fixed time: a story polls a fact (the note, the watch count, the watching
mode) until it holds, bounded.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import pytest
from watchdog.events import DirAttribEvent, EventsLostEvent, FileSystemEvent, FileSystemEventHandler
from watchdog.observers.api import BaseObserver, EventEmitter, ObservedWatch

from lsp_agent.changes.tracker import (
    ADDED,
    DELETED,
    MODIFIED,
    ChangeTracker,
    FileChangeEntry,
    render_file_changes,
)
from lsp_agent.changes.watch import PROBE_TIMEOUT_S, watch_limit
from tests.test_changes import WAIT_S, by_path, git, has, make_repo, paths, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "project")


class SilentEmitter(EventEmitter):
    """Test double: an emitter that never reads an event, as watchdog 7.1.1 did for the old
    tracker (it subclassed internals that changed): its thread lives, nothing comes."""

    def queue_events(self, timeout: float) -> None:
        self.stopped_event.wait(timeout)


def silent_observer() -> BaseObserver:
    return BaseObserver(SilentEmitter)


def inotify_observer() -> BaseObserver:
    """watchdog's own inotify observer (imported here: the module exists on Linux only)."""
    from watchdog.observers.inotify import InotifyObserver

    return InotifyObserver()


class _Through(FileSystemEventHandler):
    """The tracker's handler behind the relay."""

    def __init__(self, inner: FileSystemEventHandler, relay: Relay) -> None:
        super().__init__()
        self.inner = inner
        self.relay = relay

    def dispatch(self, event: FileSystemEvent) -> None:
        ends = {os.fsdecode(event.src_path), os.fsdecode(event.dest_path)}
        if ends & self.relay.held_back:
            return
        self.relay.seen.append(event)
        self.inner.dispatch(event)


class Relay:
    """Test double around watchdog's real inotify observer: every event still comes from the
    kernel through watchdog; the test may hold back the events of chosen paths (a watcher that
    misses them) and report lost events the way watchdog does after a queue overflow."""

    def __init__(self) -> None:
        self.real = inotify_observer()
        self.held_back: set[str] = set()
        """Absolute paths whose events never reach the tracker."""
        self.seen: list[FileSystemEvent] = []
        """Every event that reached the tracker."""
        self.watches: list[ObservedWatch] = []

    def schedule(
        self,
        event_handler: FileSystemEventHandler,
        path: str,
        *,
        recursive: bool = False,
        event_filter: list[type[FileSystemEvent]] | None = None,
    ) -> ObservedWatch:
        watch = self.real.schedule(
            _Through(event_handler, self), path, recursive=recursive, event_filter=event_filter
        )
        self.watches.append(watch)
        return watch

    def unschedule(self, watch: ObservedWatch) -> None:
        self.watches.remove(watch)
        self.real.unschedule(watch)

    def start(self) -> None:
        self.real.start()

    def stop(self) -> None:
        self.real.stop()

    def join(self, timeout: float | None = None) -> None:
        self.real.join(timeout)

    def is_alive(self) -> bool:
        return self.real.is_alive()

    @property
    def emitters(self) -> Collection[EventEmitter]:
        return self.real.emitters

    def lose_events(self) -> None:
        """What watchdog does after the kernel dropped events: each watch gets an
        `EventsLostEvent`, through the observer's own queue and dispatch thread."""
        for watch in list(self.watches):
            self.real.event_queue.put((EventsLostEvent(watch.path, is_directory=True), watch))


def diff_of(entries: list[FileChangeEntry], path: str) -> str:
    entry = by_path(entries).get(path)
    return (entry.diff or "") if entry is not None else ""


async def until(fact: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not fact():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S} s: {what}")
        await asyncio.sleep(0.05)


async def test_the_start_checks_the_watcher_with_a_change_that_touches_nothing_of_the_users(
    repo: Path,
) -> None:
    relay = Relay()
    logged: list[str] = []
    before = os.stat(repo)
    tracker = ChangeTracker(repo, observer_factory=lambda: relay, log_line=logged.append)
    await tracker.start()
    try:
        after = os.stat(repo)
        probes = [e for e in relay.seen if isinstance(e, DirAttribEvent)]
        assert [os.fsdecode(e.src_path) for e in probes] == [str(repo)]
        assert after.st_mtime_ns == before.st_mtime_ns  # its times set to what they were
        assert after.st_ctime_ns >= before.st_ctime_ns
        assert (tracker.watching, tracker.fallback_reason, logged) == ("inotify", None, [])
        assert tracker.watch_limit == watch_limit(None)
        assert tracker.watch_limit is not None
        assert tracker.watch_limit > 0
        # The probe is no change of the user's.
        await tracker.snapshot()
        (repo / "sentinel.txt").write_text("last\n")
        assert paths(await wait_for(tracker, has("sentinel.txt"))) == {"sentinel.txt"}
    finally:
        await tracker.stop()


async def test_a_watcher_that_delivers_nothing_is_not_trusted_and_the_note_still_tells_all(
    repo: Path,
) -> None:
    logged: list[str] = []
    tracker = ChangeTracker(repo, observer_factory=silent_observer, log_line=logged.append)
    await tracker.start()
    try:
        assert tracker.watching == "polling"
        assert tracker.watches == 0
        assert tracker.watch_limit is None
        reason = tracker.fallback_reason or ""
        assert "delivered no event" in reason
        assert f"{PROBE_TIMEOUT_S:g} s" in reason
        await tracker.snapshot()
        (repo / "src" / "util.py").write_text("X = 1\nY = 3\n")
        (repo / "src" / "fresh.py").write_text("FRESH = 1\n")
        (repo / "README.md").unlink()

        entries = await tracker.changes_since_snapshot()

        found = {(e.path, e.status) for e in entries}
        assert found == {("src/util.py", MODIFIED), ("src/fresh.py", ADDED), ("README.md", DELETED)}
        note = render_file_changes(entries)
        assert "src/util.py: modified by the user" in note
        assert "+Y = 3" in note
        assert "src/fresh.py: added by the user" in note
        assert "README.md: deleted by the user" in note
        assert len(logged) == 1
        assert "delivered no event" in logged[0]
        assert "comparing it once per turn instead" in logged[0]
    finally:
        await tracker.stop()


async def test_lost_events_make_the_next_call_compare_everything(repo: Path) -> None:
    relay = Relay()
    logged: list[str] = []
    tracker = ChangeTracker(repo, observer_factory=lambda: relay, log_line=logged.append)
    await tracker.start()
    try:
        await tracker.snapshot()
        util = repo / "src" / "util.py"
        relay.held_back.add(str(util))  # the kernel's queue overflowed: this change is lost
        util.write_text("X = 1\nY = 5\n")
        (repo / "README.md").write_text("# after\n")
        entries = await wait_for(tracker, has("README.md"))
        assert "src/util.py" not in paths(entries)  # nothing told the tracker yet

        relay.lose_events()

        entries = await wait_for(tracker, has("src/util.py"))
        assert by_path(entries)["src/util.py"].status == MODIFIED
        # A loss the observer reported is no reason to distrust it: it still watches.
        assert (tracker.watching, logged) == ("inotify", [])
    finally:
        await tracker.stop()


async def test_a_full_comparison_that_finds_a_change_never_reported_stops_trusting_the_watcher(
    repo: Path,
) -> None:
    relay = Relay()
    logged: list[str] = []
    tracker = ChangeTracker(
        repo, observer_factory=lambda: relay, log_line=logged.append, in_flight=0.0
    )
    await tracker.start()
    try:
        await tracker.snapshot()
        util = repo / "src" / "util.py"
        written = time.monotonic()
        util.write_text("X = 1\nY = 6\n")
        await tracker.settle(since=written)  # every event of this write has come
        await wait_for(tracker, has("src/util.py"))
        relay.held_back.add(str(util))  # from now on the watcher misses this file
        passed = len(relay.seen)
        util.write_text("X = 1\nY = 7\n")
        (repo / "README.md").write_text("# after\n")
        await wait_for(tracker, has("README.md"))
        assert str(util) not in {os.fsdecode(e.src_path) for e in relay.seen[passed:]}

        # HEAD moves without a commit: the tracker compares everything.
        git(repo, "checkout", "-q", "--orphan", "fresh")
        entries = await wait_for(tracker, lambda _: tracker.watching == "polling")

        assert len(logged) == 1
        assert "missed a change to src/util.py" in logged[0]
        assert "comparing it once per turn instead" in logged[0]
        assert tracker.fallback_reason == "the file watcher missed a change to src/util.py"
        assert "+Y = 7" in (by_path(entries)["src/util.py"].diff or "")
    finally:
        await tracker.stop()


async def test_a_watcher_thread_that_died_is_noticed_at_the_next_call(repo: Path) -> None:
    made: list[BaseObserver] = []

    def real() -> BaseObserver:
        made.append(inotify_observer())
        return made[-1]

    logged: list[str] = []
    tracker = ChangeTracker(repo, observer_factory=real, log_line=logged.append)
    await tracker.start()
    try:
        await tracker.snapshot()
        (emitter,) = [e for e in made[0].emitters if e.watch.path == str(repo / "src")]
        emitter.stop()
        emitter.join()
        (repo / "src" / "util.py").write_text("X = 1\nY = 8\n")

        # A moment passes before a thread's end counts: its folder's deletion may be on its way.
        entries = await wait_for(tracker, lambda _: tracker.watching == "polling")

        assert tracker.watching == "polling"
        assert f"thread for {repo / 'src'} stopped" in (tracker.fallback_reason or "")
        assert len(logged) == 1
        assert by_path(entries)["src/util.py"].status == MODIFIED
    finally:
        await tracker.stop()


async def test_an_npm_install_inside_a_watched_tree_takes_no_watch_and_leaves_the_rest_watched(
    repo: Path,
) -> None:
    (repo / "src" / "web").mkdir()
    made: list[BaseObserver] = []

    def real() -> BaseObserver:
        made.append(inotify_observer())
        return made[-1]

    tracker = ChangeTracker(repo, observer_factory=real)
    await tracker.start()
    try:
        await tracker.snapshot()
        before = tracker.watches
        threads = len(made[0].emitters)
        for package in range(20):  # 200 folders, ten deep each
            deep = repo / "src" / "web" / "node_modules" / f"p{package}"
            deep = deep.joinpath(*(f"d{level}" for level in range(9)))
            deep.mkdir(parents=True)
            (deep / "index.js").write_text("module.exports = 1\n")

        # `src` was one recursive watch: it is cut around node_modules.
        await until(lambda: len(made[0].emitters) > threads, "src cut around node_modules")
        await until(lambda: tracker.watches <= before, "the folders of node_modules let go")
        assert tracker.watches == before
        (repo / "src" / "web" / "app.js").write_text("run()\n")
        (repo / "src" / "pkg" / "core.py").write_text("value = 2\n")
        entries = await wait_for(
            tracker, lambda e: {"src/web/app.js", "src/pkg/core.py"} <= paths(e)
        )
        assert paths(entries) == {"src/web/app.js", "src/pkg/core.py"}
        assert tracker.watches == before
        assert tracker.watching == "inotify"
    finally:
        await tracker.stop()


async def test_a_new_folder_gets_a_watch_and_its_files_are_reported(repo: Path) -> None:
    tracker = ChangeTracker(repo)
    await tracker.start()
    try:
        await tracker.snapshot()
        before = tracker.watches
        (repo / "lib" / "deep").mkdir(parents=True)
        (repo / "lib" / "deep" / "first.py").write_text("A = 1\n")  # maybe before its watch

        await until(lambda: tracker.watches == before + 2, "lib and lib/deep watched")
        (repo / "lib" / "deep" / "second.py").write_text("B = 2\n")  # after it

        entries = await wait_for(
            tracker, lambda e: {"lib/deep/first.py", "lib/deep/second.py"} <= paths(e)
        )
        assert {e.status for e in entries} == {ADDED}
        assert tracker.watching == "inotify"
    finally:
        await tracker.stop()


async def test_past_the_cap_on_watcher_threads_the_tracker_compares_once_a_turn(
    repo: Path,
) -> None:
    # The repository needs four: the root alone, src, the git directory and its refs.
    logged: list[str] = []
    tracker = ChangeTracker(repo, max_emitters=3, log_line=logged.append)
    await tracker.start()
    try:
        assert tracker.watching == "polling"
        assert "cap of 3 watches" in (tracker.fallback_reason or "")
        assert len(logged) == 1
        await tracker.snapshot()
        (repo / "src" / "util.py").write_text("X = 1\nY = 9\n")
        entries = await tracker.changes_since_snapshot()
        assert by_path(entries)["src/util.py"].status == MODIFIED
    finally:
        await tracker.stop()

    later = ChangeTracker(repo, max_emitters=4, log_line=logged.append)
    await later.start()
    try:
        assert later.watching == "inotify"
        await later.snapshot()
        (repo / "docs").mkdir()  # a fifth watch
        (repo / "docs" / "guide.md").write_text("# guide\n")
        await until(lambda: later.watching == "polling", "the cap reached later")
        assert "cap of 4 watches" in (later.fallback_reason or "")
        entries = await later.changes_since_snapshot()
        assert "docs/guide.md" in paths(entries)
    finally:
        await later.stop()


async def test_a_watched_folder_deleted_and_made_again_is_watched_again(repo: Path) -> None:
    logged: list[str] = []
    tracker = ChangeTracker(repo, log_line=logged.append)
    await tracker.start()
    try:
        await tracker.snapshot()
        before = tracker.watches
        deleted = time.monotonic()
        shutil.rmtree(repo / "src")
        (repo / "src" / "pkg").mkdir(parents=True)
        (repo / "src" / "pkg" / "core.py").write_text("value = 3\n")
        await wait_for(tracker, lambda e: "src/pkg/core.py" in paths(e))
        await tracker.settle(since=deleted)  # the watches have followed
        await tracker.changes_since_snapshot()

        written = time.monotonic()
        (repo / "src" / "util.py").write_text("X = 1\nY = 10\n")  # only a new watch sees it
        await tracker.settle(since=written)
        entries = await tracker.changes_since_snapshot()

        assert "+Y = 10" in diff_of(entries, "src/util.py")
        assert by_path(entries)["src/pkg/core.py"].status == MODIFIED
        assert by_path(entries)["src/app.py"].status == DELETED
        assert tracker.watches == before
        assert tracker.watching == "inotify", logged
        assert logged == []
    finally:
        await tracker.stop()


async def test_a_renamed_folder_is_watched_under_its_new_name(repo: Path) -> None:
    logged: list[str] = []
    tracker = ChangeTracker(repo, log_line=logged.append)
    await tracker.start()
    try:
        await tracker.snapshot()
        before = tracker.watches
        (repo / "src").rename(repo / "lib")
        await until(lambda: tracker.watches == before, "lib watched instead of src")
        await wait_for(tracker, lambda e: "lib/util.py" in paths(e))
        (repo / "lib" / "util.py").write_text("X = 1\nY = 11\n")

        entries = await wait_for(tracker, lambda e: "+Y = 11" in diff_of(e, "lib/util.py"))

        assert by_path(entries)["lib/app.py"].old_path == "src/app.py"
        assert (tracker.watching, logged) == ("inotify", [])
    finally:
        await tracker.stop()


async def test_a_folder_watchdog_could_not_watch_later_makes_the_tracker_compare_once_a_turn(
    repo: Path,
) -> None:
    # The kernel's limit cannot be reached on demand without changing it for the whole machine:
    # the story sends the warning watchdog 7.1.1 logs when a folder made later inside a
    # recursive watch could not be watched (its changelog documents it), as watchdog words it.
    logged: list[str] = []
    tracker = ChangeTracker(repo, log_line=logged.append)
    await tracker.start()
    try:
        await tracker.snapshot()
        warn = logging.getLogger("watchdog.observers.inotify").warning
        full = OSError(errno.ENOSPC, "inotify watch limit reached")
        skipped = os.fsencode(repo / "src" / "node_modules" / "x")
        warn("Unable to watch %r: %s", skipped, full)  # a folder never watched anyway
        elsewhere = b"/somewhere/else/entirely"
        warn("Unable to watch %r: %s", elsewhere, full)  # another tracker's
        (repo / "README.md").write_text("# still watched\n")
        await wait_for(tracker, has("README.md"))
        assert tracker.watching == "inotify"

        (repo / "src" / "deep").mkdir()
        warn("Unable to watch %r: %s", os.fsencode(repo / "src" / "deep"), full)
        (repo / "src" / "deep" / "lost.py").write_text("LOST = 1\n")

        await until(lambda: tracker.watching == "polling", "the watcher given up")
        assert "fs.inotify.max_user_watches" in (tracker.fallback_reason or "")
        assert len(logged) == 1
        assert "raise the limit to watch it" in logged[0]
        entries = await tracker.changes_since_snapshot()
        assert "src/deep/lost.py" in paths(entries)
    finally:
        await tracker.stop()


@pytest.fixture
def immutable_root(repo: Path) -> Iterator[Path]:
    """The repository's folder made immutable (`chattr +i`: even root may not set its times),
    as a read-only mount or another owner's folder would be."""
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr to make a folder whose times cannot be set")
    if subprocess.run(["chattr", "+i", str(repo)], capture_output=True).returncode != 0:
        pytest.skip("the file system has no immutable folders")
    try:
        yield repo
    finally:
        subprocess.run(["chattr", "-i", str(repo)], check=True)


async def test_a_watcher_that_cannot_be_probed_is_said_so_and_still_watched(
    immutable_root: Path,
) -> None:
    repo = immutable_root
    logged: list[str] = []
    tracker = ChangeTracker(repo, log_line=logged.append)
    await tracker.start()
    try:
        assert len(logged) == 1
        assert "cannot check the file watcher" in logged[0]
        assert "Operation not permitted" in logged[0]
        assert (tracker.watching, tracker.fallback_reason) == ("inotify", None)
        await tracker.snapshot()
        (repo / "src" / "util.py").write_text("X = 1\nY = 12\n")
        entries = await wait_for(tracker, has("src/util.py"))
        assert by_path(entries)["src/util.py"].status == MODIFIED
        assert len(logged) == 1
    finally:
        await tracker.stop()


async def test_a_folder_a_gitignore_edit_lets_in_is_watched_without_a_restart(repo: Path) -> None:
    # build/ is ignored at the start, so the root is watched on its own and build/ not at all.
    # The user drops it from .gitignore: from then on its files are the user's, and they come
    # as events (the watcher is never caught missing one by the per-turn audit).
    (repo / "build" / "out").mkdir(parents=True)
    (repo / "build" / "out" / "old.txt").write_text("old\n")
    logged: list[str] = []
    tracker = ChangeTracker(repo, log_line=logged.append)
    await tracker.start()
    try:
        await tracker.snapshot()
        before = tracker.watches
        (repo / ".gitignore").write_text("*.log\n")
        await until(lambda: tracker.watches >= before + 2, "build and build/out watched")
        (repo / "build" / "out" / "new.txt").write_text("new\n")

        entries = await wait_for(tracker, lambda e: "build/out/new.txt" in paths(e))
        assert by_path(entries)["build/out/new.txt"].status == ADDED
        assert (tracker.watching, logged) == ("inotify", [])
    finally:
        await tracker.stop()
