"""Watching the workspace: which folders matter, and the observer that reports their changes.

- **What is watched**: one inotify watch per directory that matters. `.git` internals,
  `node_modules`, virtualenvs, caches and `.gitignore`d directories are never descended into;
  the git directory is watched apart, for `HEAD`, the index and the refs only (branch switches,
  commits, staging). Other platforms use watchdog's native observer.
- **The watch budget**: when the inotify watch limit (or the tracker's own cap) is hit at start,
  nothing is watched and the tracker compares once per turn instead; when it is hit later (new
  folders), the tracker is told and switches the same way. Nothing is polled in the background:
  a polled tree of 200 000 files costs tens of seconds of CPU a minute and hundreds of MB.
- **Events** are filtered and coalesced under a lock in watchdog's thread; the tracker takes
  them all at once (`drain`) on its own loop when it refreshes.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pathspec
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
    FileSystemMovedEvent,
)
from watchdog.observers.api import BaseObserver

log = logging.getLogger(__name__)

ObserverKind = Literal["auto", "inotify", "polling", "none"]
"""What the tracker is asked to use; `polling` and `none` watch nothing (one comparison a turn)."""

EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
    }
)
"""Directories never watched nor reported, whatever `.gitignore` says."""

GIT_WATCHED = ("HEAD", "index", "packed-refs")
"""Files of the git directory whose change can change every path's status."""
GIT_REF_DIRS = ("refs", "reftable")
"""Folders of the git directory that hold the branches (files, or the reftable format)."""
_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
"""Events that can change a file's content or existence; opens and reads are left out (the
tracker's own reads would otherwise wake it)."""


def excluded_parts(rel: str) -> bool:
    """Whether `rel` lies in one of `EXCLUDED_DIRS`."""
    return any(part in EXCLUDED_DIRS for part in rel.split("/"))


def under_any(rel: str, dirs: Iterable[str]) -> bool:
    """Whether `rel` is one of `dirs` or below one."""
    return any(rel == d or rel.startswith(d + "/") for d in dirs)


class IgnoreRules:
    """What the tracker never watches nor reports: `EXCLUDED_DIRS`, virtualenvs (a folder with a
    `pyvenv.cfg`), and `.gitignore` files (each below its folder) with `.git/info/exclude`.

    Read lazily, folder by folder, and re-read when a `.gitignore` changes. In a git repository
    git has the last word on what is ignored; these rules keep watches and events off the rest.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        """The workspace folder."""
        self._lock = threading.Lock()
        """Watchdog's threads and the loop both ask."""
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        """Folder → its `.gitignore`, parsed (None: it has none)."""
        self._dirs: dict[str, bool] = {}
        """Folder → ignored, memoised."""
        self._exclude: pathspec.GitIgnoreSpec | None = None
        """`.git/info/exclude`."""
        self._venvs: frozenset[str] = frozenset()
        """Virtualenv folders found so far."""

    def add_exclude_file(self, path: Path) -> None:
        """Honour a repository's `info/exclude`."""
        with self._lock:
            self._exclude = _read_spec(path)
            self._dirs.clear()

    def reload(self, rel_dir: str) -> None:
        """The `.gitignore` of `rel_dir` changed."""
        with self._lock:
            self._specs.pop(rel_dir, None)
            self._dirs.clear()

    def skip_dir(self, rel: str) -> bool:
        """Whether the folder `rel` is neither watched nor walked."""
        name = rel.rpartition("/")[2]
        if name in EXCLUDED_DIRS:
            return True
        if (self.root / rel / "pyvenv.cfg").is_file():
            with self._lock:
                self._venvs |= {rel}
            return True
        return self.ignored(rel, is_dir=True)

    def excluded(self, rel: str, is_dir: bool) -> bool:
        """Whether `rel` is left out of the tracker's view."""
        if excluded_parts(rel):
            return True
        venvs = self._venvs
        if venvs and under_any(rel, venvs):
            return True
        return self.ignored(rel, is_dir=is_dir)

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        """What the ignore files say of `rel`."""
        with self._lock:
            parts = rel.split("/")
            for depth in range(1, len(parts)):
                if self._dir_ignored("/".join(parts[:depth])):
                    return True
            return self._dir_ignored(rel) if is_dir else self._match(rel, is_dir=False)

    def walk_files(self, rel_dir: str = "") -> Iterator[str]:
        """Every file below `rel_dir` that is not left out (links are not followed)."""
        start = self.root / rel_dir if rel_dir else self.root
        for top, dirnames, filenames in os.walk(start):
            top_rel = Path(top).relative_to(self.root).as_posix()
            top_rel = "" if top_rel == "." else top_rel
            dirnames[:] = [
                name for name in dirnames if not self.skip_dir(f"{top_rel}/{name}".lstrip("/"))
            ]
            for name in filenames:
                rel = f"{top_rel}/{name}" if top_rel else name
                if not self.excluded(rel, is_dir=False):
                    yield rel

    def _dir_ignored(self, rel: str) -> bool:
        known = self._dirs.get(rel)
        if known is None:
            known = self._dirs[rel] = self._match(rel, is_dir=True)
        return known

    def _match(self, rel: str, *, is_dir: bool) -> bool:
        suffix = "/" if is_dir else ""
        result: bool | None = None
        if self._exclude is not None:
            result = self._exclude.check_file(rel + suffix).include
        parts = rel.split("/")
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            spec = self._spec(folder)
            if spec is None:
                continue
            verdict = spec.check_file("/".join(parts[depth:]) + suffix).include
            if verdict is not None:
                result = verdict
        return bool(result)

    def _spec(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            self._specs[folder] = _read_spec(self.root / folder / ".gitignore")
        return self._specs[folder]


def _read_spec(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


@dataclass
class Events:
    """What the watcher saw since the last `drain`."""

    paths: set[str] = field(default_factory=set)
    """Files created, changed, deleted or moved (both ends), workspace-relative."""
    dirs: set[str] = field(default_factory=set)
    """Folders created, deleted or moved: everything below them may have changed."""
    moves: list[tuple[str, str]] = field(default_factory=list)
    """File moves (source, destination)."""
    times: dict[str, float] = field(default_factory=dict)
    """When each path last changed (`time.monotonic()`)."""
    git: bool = False
    """HEAD, the index or a ref changed."""
    ignore_files: bool = False
    """A `.gitignore` changed."""
    lost: bool = False
    """The kernel dropped events: everything must be compared."""


class Watcher:
    """The observer of one workspace folder and its git directory, and the events it saw."""

    def __init__(
        self,
        root: Path,
        rules: IgnoreRules,
        *,
        git_roots: Iterable[Path] = (),
        max_watches: int | None = None,
        exhausted: Callable[[OSError], None] = lambda error: None,
    ) -> None:
        """`exhausted` is called (from watchdog's thread) when inotify runs out of watches
        after start; `max_watches` caps the watches (as if it were the kernel's limit)."""
        self.root = root
        """The workspace folder."""
        self.rules = rules
        """What is left out."""
        self.git_roots = list(dict.fromkeys(git_roots))
        """The git directory and the common one (watched for HEAD, index and refs)."""
        self.kind = "none"
        """`inotify`, `native` or `none`: how the tree is watched now."""
        self.failure: OSError | None = None
        """The inotify error that kept the watcher from starting, if any."""
        self._budget = _WatchBudget(max_watches, exhausted, self._lost)
        """The inotify watches taken, against the cap."""
        self._observer: BaseObserver | None = None
        """The running observer."""
        self._lock = threading.Lock()
        """Guards `_observer` and `_inbox`."""
        self._inbox = Events()
        """Events not drained yet."""
        self._last_event = 0.0
        """`time.monotonic()` of the last event kept."""
        self._stopped = False
        """`stop()` was called: a start still under way must not leave an observer running."""

    @property
    def watches(self) -> int:
        """inotify watches held now (0 when not watching with inotify)."""
        return self._budget.used if self.kind == "inotify" else 0

    @property
    def last_event(self) -> float:
        """`time.monotonic()` of the last event kept (0 before any)."""
        return self._last_event

    def start(self, kind: ObserverKind) -> None:
        """Start the best observer `kind` allows (runs in a worker thread). When inotify's limit
        is hit, `failure` says so and nothing is watched."""
        if kind in ("none", "polling"):
            return
        if not sys.platform.startswith("linux"):
            if kind == "auto":
                self._start_native()
            return
        try:
            observer = _inotify_observer(self._prune_bytes, self._budget)
        except OSError as error:
            self.failure = error
            return
        except (ImportError, AttributeError, TypeError) as error:
            # watchdog's internals moved (a major release): its own observer still works, it
            # just also watches the directories that are pruned here.
            log.warning("lsp-agent: pruned inotify watching unavailable: %r", error)
            self._start_native()
            return
        try:
            self._schedule(observer)
            observer.start()
        except OSError as error:
            _halt(observer)
            self.failure = error
            return
        self._keep(observer, "inotify")

    def stop(self) -> None:
        """Stop watching (waits for watchdog's threads); safe to call twice, and while `start`
        is still running in another thread."""
        with self._lock:
            self._stopped = True
            observer, self._observer = self._observer, None
        if observer is not None:
            _halt(observer)
        self.kind = "none"

    def drain(self) -> Events:
        """The events seen since the last call."""
        with self._lock:
            events, self._inbox = self._inbox, Events()
        return events

    def _start_native(self) -> None:
        from watchdog.observers import Observer

        native: BaseObserver = Observer()
        self._schedule(native)
        native.start()
        self._keep(native, "native")

    def _keep(self, observer: BaseObserver, kind: str) -> None:
        with self._lock:
            stopped = self._stopped
            if not stopped:
                self._observer, self.kind = observer, kind
        if stopped:
            _halt(observer)

    def _schedule(self, observer: BaseObserver) -> None:
        observer.schedule(
            _Handler(self, None), str(self.root), recursive=True, event_filter=_EVENTS
        )
        for git_root in self.git_roots:
            observer.schedule(
                _Handler(self, git_root), str(git_root), recursive=True, event_filter=_EVENTS
            )

    def _lost(self) -> None:
        with self._lock:
            self._inbox.lost = True

    def on_event(self, event: FileSystemEvent, git_root: Path | None) -> None:
        """A watchdog event (watchdog's thread): filter it and keep it."""
        paths = [os.fsdecode(event.src_path)]
        if isinstance(event, FileSystemMovedEvent) and event.dest_path:
            paths.append(os.fsdecode(event.dest_path))
        if git_root is not None:
            if any(_is_git_state(path, git_root) for path in paths):
                with self._lock:
                    self._inbox.git = True
            return
        rels: list[str | None] = []
        ignore_files = False
        for path in paths:
            rel = self._rel(path)
            if rel is None or self.rules.excluded(rel, event.is_directory):
                rels.append(None)
                continue
            rels.append(rel)
            if rel == ".gitignore" or rel.endswith("/.gitignore"):
                self.rules.reload(rel.rpartition("/")[0])
                ignore_files = True
        now = time.monotonic()
        with self._lock:
            inbox = self._inbox
            inbox.ignore_files |= ignore_files
            for rel in rels:
                if rel is not None:
                    (inbox.dirs if event.is_directory else inbox.paths).add(rel)
                    inbox.times[rel] = now
                    self._last_event = now
            if len(rels) == 2 and None not in rels and not event.is_directory:
                inbox.moves.append((rels[0] or "", rels[1] or ""))

    def _rel(self, path: str) -> str | None:
        root = str(self.root)
        if path == root or not path.startswith(root + os.sep):
            return None
        rel = path[len(root) + 1 :]
        return rel if os.sep == "/" else rel.replace(os.sep, "/")

    def _prune_bytes(self, parent: bytes, path: bytes) -> bool:
        """For the inotify walk: True for a directory not to watch nor descend into.

        Inside a git directory only `refs/` (or `reftable/`) is kept; in the work tree `.git`
        itself is skipped (it is watched apart). Once stopped, everything is: a walk still
        placing watches ends at once instead of delaying the process's exit.
        """
        if self._stopped:
            return True
        parent_text, path_text = os.fsdecode(parent), os.fsdecode(path)
        for git_root in self.git_roots:
            text = str(git_root)
            if parent_text == text or parent_text.startswith(text + os.sep):
                inside = path_text[len(text) + 1 :].replace(os.sep, "/")
                return inside.split("/", 1)[0] not in GIT_REF_DIRS
        rel = self._rel(path_text)
        return rel is not None and self.rules.skip_dir(rel)


def limit_reached(error: OSError, cap: int | None) -> str:
    """Which limit an inotify error means, in the user's words."""
    if cap is not None and error.errno == errno.ENOSPC:
        return f"the tracker's cap of {cap} inotify watches"
    if error.errno == errno.ENOSPC:
        try:
            limit = Path("/proc/sys/fs/inotify/max_user_watches").read_text().strip()
        except OSError:
            limit = "unknown"
        return f"the inotify watch limit (fs.inotify.max_user_watches = {limit})"
    if error.errno == errno.EMFILE:
        return "the inotify instance limit (fs.inotify.max_user_instances)"
    return f"an inotify error ({error})"


def _is_git_state(path: str, git_root: Path) -> bool:
    text = str(git_root)
    if not path.startswith(text + os.sep):
        return False
    inside = path[len(text) + 1 :].replace(os.sep, "/")
    return inside in GIT_WATCHED or inside.split("/", 1)[0] in GIT_REF_DIRS


class _Handler(FileSystemEventHandler):
    """Hands every watchdog event of one tree to the watcher."""

    def __init__(self, watcher: Watcher, git_root: Path | None) -> None:
        super().__init__()
        self.watcher = watcher
        """Who keeps the events."""
        self.git_root = git_root
        """The git directory this handler watches; None for the work tree."""

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self.watcher.on_event(event, self.git_root)
        except Exception:  # never kill watchdog's thread: a lost event is better than none later
            log.exception("lsp-agent: handling a file event failed")


class _WatchBudget:
    """Counts inotify watches against an optional cap; reports running out after start."""

    def __init__(
        self,
        cap: int | None,
        exhausted: Callable[[OSError], None],
        overflowed: Callable[[], None],
    ) -> None:
        self.cap = cap
        """At most this many watches (None: the kernel's limit only)."""
        self.used = 0
        """Watches held now."""
        self.exhausted = exhausted
        """Told once when the watches run out after start."""
        self.overflowed = overflowed
        """Told when the kernel dropped events."""
        self._lock = threading.Lock()
        """watchdog's reader thread and the starting thread both count."""
        self._reported = False
        """Whether `exhausted` was called."""

    def take(self) -> None:
        with self._lock:
            if self.cap is not None and self.used >= self.cap:
                raise OSError(errno.ENOSPC, "inotify watch cap reached")
            self.used += 1

    def give_back(self) -> None:
        with self._lock:
            self.used = max(0, self.used - 1)

    def report(self, error: OSError) -> None:
        with self._lock:
            if self._reported:
                return
            self._reported = True
        self.exhausted(error)


def _inotify_observer(prune: Callable[[bytes, bytes], bool], budget: _WatchBudget) -> BaseObserver:
    """watchdog's inotify observer, except that it does not descend into pruned directories
    (`changes/inotify.py`, imported here: Linux only)."""
    from lsp_agent.changes.inotify import PrunedObserver

    return PrunedObserver(prune, budget)


def _halt(observer: BaseObserver) -> None:
    """Stop an observer, started or not, and wait for its threads."""
    observer.stop()
    with contextlib.suppress(RuntimeError):  # never started
        observer.join(timeout=10)
