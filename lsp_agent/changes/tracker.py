"""What changed in the workspace since the agent's last turn, and who changed it.

`ChangeTracker` watches one workspace folder with watchdog and keeps, between turns, what the
agent needs to hear in `<file_changes>` (DESIGN §5):

- **Watching**: one inotify watch per directory that matters: `.git` internals, `node_modules`,
  virtualenvs, caches and `.gitignore`d directories are never descended into; the git directory
  is watched apart, for `HEAD`, the index and the refs only (branch switches, commits, staging).
  Events are coalesced under a lock in watchdog's thread and handed to the asyncio loop with one
  `loop.call_soon_threadsafe`. When the inotify watch limit is hit (at start or later), that
  tree is polled instead, logged once; the tracker never crashes on it. Other platforms use
  watchdog's native observer.
- **Labels**: in a git repository, the tracker keeps the status (porcelain v2) and content digest
  (git's blob hash) of every path that differs from HEAD. Each refresh runs
  `git status --porcelain=v2 -z` limited to the paths watchdog saw change (several changed
  files of one folder count as the folder), so its cost follows the number of changed files,
  not the size of the repository (git still reads the index: ~0.15× a full status on 50 000
  files); past `MAX_PATHSPECS` one full status is cheaper and runs instead, as it does at
  start. Outside git, the digests of all files play that part.
- **Snapshots**: `snapshot()` at the end of a turn starts a baseline; from then on, the first
  time a path's state changes, its previous state is kept (copy on write).
  `changes_since_snapshot()` compares each such path's state then and now, and the branch (one
  line for a switch).
- **Sources**: `agent_applied()` registers the digest of the agent's own accepted edits, so they
  are not reported as the user's; an edit that lands within `FORMATTER_WINDOW_S` of an agent edit
  or a save of it and changes only whitespace is the formatter's. `agent_read()` marks what the
  agent has seen, so a file it read again drops out of the note.
- **Open buffers**: `buffer_changed()` (the editor's didChange) on a file the agent knows makes it
  "modified in editor, unsaved" while the buffer differs from the disk.
- **Diffs**: for small text changes (≤ `DIFF_MAX_LINES` changed lines) the entry carries the
  unified diff against what the agent last saw (a bounded cache of the texts it read or edited),
  or against HEAD's version for a file that was clean (read by one long-lived
  `git cat-file --batch`).
- **Cheap repeats**: an answer is reused until an event, an agent read/edit or a buffer change
  could change it, so the calls of one turn cost nothing when nobody touched the workspace.

`render_file_changes()` turns the entries into the `<file_changes>` block, bounded in size.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import re
import stat
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

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
from watchdog.observers.polling import PollingObserverVFS

from lsp_agent.text import unified_diff

log = logging.getLogger(__name__)

MODIFIED = "modified"
ADDED = "added"
DELETED = "deleted"
RENAMED = "renamed"
UNSAVED = "modified in editor, unsaved"
BRANCH = "branch changed"
"""Entry statuses; `BRANCH` is the one line about the checked-out branch or commit."""

USER = "user"
AGENT = "agent"
FORMATTER = "formatter"
"""Entry sources."""

DIFF_MAX_LINES = 40
"""An entry carries its diff when at most this many lines were added or removed."""
MAX_DIFFS = 20
"""Diffs computed per call at most (the note is bounded anyway)."""
FORMATTER_WINDOW_S = 5.0
"""A whitespace-only change this close to an agent edit or a save of it is the formatter's."""
POLL_INTERVAL_S = 2.0
"""How often a polled tree is scanned when inotify cannot watch it."""
MAX_HASH_BYTES = 8 * 1024 * 1024
"""Larger files are told apart by size and modification time instead of content."""
MAX_TEXT_BYTES = 1024 * 1024
"""Larger files get no diff."""
MAX_SCANNED_FILES = 100_000
"""Outside git, at most this many files are known at start."""
MAX_SCANNED_BYTES = 256 * 1024 * 1024
"""Outside git, at most this many bytes are hashed at start; the other files are known by size
and modification time (rewriting one with the same bytes then counts as a change)."""
MAX_PATHSPECS = 100
"""Past this many pathspecs one full `git status` is cheaper: git matches every index entry
against every pathspec (measured on 50 000 files: 5 paths ≈ 0.15×, 200 paths > 1× a full one)."""
FOLD_SIBLINGS = 3
"""This many changed files in one folder are asked about as the folder (one pathspec)."""
MAX_BASELINES = 32
"""Snapshots kept (one per session key); the least recently used is dropped."""

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

_GIT_WATCHED = ("HEAD", "index", "packed-refs")
"""Files of the git directory whose change can change every path's status."""
_GIT_REF_DIRS = ("refs", "reftable")
"""Folders of the git directory that hold the branches (files, or the reftable format)."""
_LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
"""inotify's "watch limit" and "instance limit" errors."""
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
_WHITESPACE = re.compile(r"\s+")

Mode = Literal["git", "hashes"]
ObserverKind = Literal["auto", "inotify", "polling", "none"]


@dataclass(frozen=True)
class FileChangeEntry:
    """One line of `<file_changes>`: a file someone changed since the agent's last turn."""

    path: str
    """Workspace-relative POSIX path (the new path of a rename); empty for a `BRANCH` entry."""
    status: str
    """`modified`, `added`, `deleted`, `renamed`, `modified in editor, unsaved`, or
    `branch changed`."""
    source: str = USER
    """Who changed it: `user`, `agent` (only with `include_agent`) or `formatter`."""
    old_path: str | None = None
    """For a rename: the path it had."""
    diff: str | None = None
    """Unified diff hunks (no file header) from what the agent last saw, for small text changes."""
    detail: str | None = None
    """For `BRANCH`: the sentence, e.g. "branch changed from main to feature; 3 files differ"."""


@dataclass(frozen=True)
class _State:
    """A path that differs from HEAD (git) or any file (outside git), as last refreshed."""

    code: str
    """git's XY status (`.M`, `A.`, `D.`, `??`, …); empty outside git."""
    digest: str | None
    """git blob hash of the file's bytes (or a size/time stamp when huge); None: no file."""
    base_blob: str | None = None
    """For a tracked path, the blob it had when clean: HEAD's (the index's when HEAD has none)."""


@dataclass
class _Buffer:
    """An open editor buffer of a file the agent knows."""

    text: str
    version: int | None
    changed_at: float


@dataclass
class _Baseline:
    """What the agent knew at the end of a turn, kept by copy on write."""

    head: str | None
    branch: str | None
    old: dict[str, _State | None] = field(default_factory=dict)
    """Each path changed since the snapshot → its state at the snapshot (None: clean/absent)."""
    buffers: dict[str, str | None] = field(default_factory=dict)
    """Each buffer changed since → digest of the buffer then (None: it matched the disk)."""
    seen: dict[str, set[str]] = field(default_factory=dict)
    """Digests the agent has read or written since the snapshot, per path."""
    moves: list[tuple[str, str]] = field(default_factory=list)
    """File moves watchdog reported since the snapshot (source, destination)."""
    used: float = 0.0
    cache: tuple[int, bool, list[FileChangeEntry]] | None = None
    """(generation, include_agent, entries) of the last answer: reused while nothing changed."""


@dataclass(frozen=True)
class _Context:
    """What `_entries` needs, copied on the loop so the worker thread reads no live state."""

    root: Path
    mode: Mode
    states: dict[str, _State]
    old: dict[str, _State | None]
    moves: list[tuple[str, str]]
    seen: dict[str, frozenset[str]]
    agent: dict[str, frozenset[str]]
    agent_texts: dict[str, tuple[str, float]]
    saves: dict[str, float]
    event_times: dict[str, float]
    texts: dict[str, str]
    buffers: dict[str, tuple[_Buffer, str | None]]
    include_agent: bool
    blob_texts: dict[str, str]
    blobs: _BlobReader | None


class ChangeTracker:
    """Watches one workspace folder; tells what changed since a snapshot, and who changed it.

    Call `await start()` on the event loop that will use it and `await stop()` at shutdown.
    Every other method runs on that loop; the watchdog threads only touch a locked inbox.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        log_line: Callable[[str], None] | None = None,
        observer: ObserverKind = "auto",
        poll_interval: float = POLL_INTERVAL_S,
        max_watches: int | None = None,
        text_cache_files: int = 64,
        text_cache_chars: int = 4_000_000,
    ) -> None:
        """`log_line` gets the log lines (the server's `window/logMessage`); `observer` forces
        a kind of watching (`none`: refresh only on `buffer_*`/explicit calls, for tests);
        `max_watches` caps the inotify watches this tracker may take (the polling fallback
        takes over past it, exactly as when the kernel's limit is hit)."""
        self.root = Path(root).resolve()
        """The workspace folder, absolute, symlinks resolved."""
        self.mode: Mode = "hashes"
        """`git` inside a git work tree, else `hashes`; known after `start()`."""
        self.watching = "none"
        """`inotify`, `polling`, `native` or `none`: how the tree is watched now."""
        self.fallback_reason: str | None = None
        """Why the tracker polls instead of using inotify, when it does."""
        self._log_line = log_line or (lambda line: log.info("%s", line))
        self._observer_kind = observer
        self._poll_interval = poll_interval
        self._max_watches = max_watches
        self._loop: asyncio.AbstractEventLoop | None = None
        self._observer: BaseObserver | None = None
        self._observer_lock = threading.Lock()
        self._budget: _WatchBudget | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._ready = asyncio.Event()
        """Set once `start()` has finished (or failed)."""

        self._git_top: Path | None = None
        self._git_dir: Path | None = None
        self._git_common: Path | None = None
        self._prefix = ""
        """The root relative to the repository's top level, with a trailing slash (or "")."""
        self._head: str | None = None
        self._branch: str | None = None
        self._differ_counts: dict[tuple[str, str], int] = {}

        self._inbox_lock = threading.Lock()
        self._inbox_paths: set[str] = set()
        self._inbox_dirs: set[str] = set()
        self._inbox_moves: list[tuple[str, str]] = []
        self._inbox_times: dict[str, float] = {}
        self._inbox_git = False
        self._inbox_resync = False
        self._wake_pending = False

        self._dirty: set[str] = set()
        self._dirty_dirs: set[str] = set()
        self._moves: list[tuple[str, str]] = []
        self._git_changed = False
        self._resync_needed = False
        self._event_times: dict[str, float] = {}
        self._refresh_lock = asyncio.Lock()

        self._states: dict[str, _State] = {}
        self._baselines: OrderedDict[str, _Baseline] = OrderedDict()
        self._known: set[str] = set()
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._text_chars = 0
        self._text_cache_files = text_cache_files
        self._text_cache_chars = text_cache_chars
        self._blob_texts: OrderedDict[str, str] = OrderedDict()
        """Texts of index blobs fetched for diffs (blobs never change: cached by id)."""
        self._blobs: _BlobReader | None = None
        """Reads HEAD's version of files for diffs (git mode)."""
        self._generation = 0
        """Bumped by anything that can change an answer of `changes_since_snapshot`."""
        self._agent_digests: dict[str, deque[str]] = {}
        self._agent_texts: dict[str, tuple[str, float]] = {}
        self._saves: dict[str, float] = {}
        self._buffers: dict[str, _Buffer] = {}

        self._ignore = _IgnoreRules(self.root)
        self._venvs: set[str] = set()
        self._logged: set[str] = set()

    async def start(self) -> None:
        """Find the repository, take the first status, and start watching.

        Takes a while on a large repository (one full `git status`, one walk to place the
        watches): run it as a background task; `snapshot()` and `changes_since_snapshot()` wait
        for it.
        """
        self._loop = asyncio.get_running_loop()
        try:
            await self._find_repository()
            if self.mode == "git":
                self._head, self._branch = await self._read_head()
                self._states = await self._full_status()
            else:
                self._states = await asyncio.to_thread(self._scan_all)
            if self._observer_kind != "none" and not self._closed:
                await asyncio.to_thread(self._start_observer)
        finally:
            self._ready.set()

    async def stop(self) -> None:
        """Stop watching; safe to call twice and before `start()`."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.to_thread(self._stop_observer)
        if self._blobs is not None:
            await asyncio.to_thread(self._blobs.close)

    async def snapshot(self, key: str = "default") -> None:
        """Record the state at the end of the agent's turn: the next call compares with it."""
        await self._started()
        async with self._refresh_lock:
            await self._refresh()
            self._baselines.pop(key, None)
            self._baselines[key] = _Baseline(self._head, self._branch, used=time.monotonic())
            while len(self._baselines) > MAX_BASELINES:
                self._baselines.popitem(last=False)

    def forget(self, key: str) -> None:
        """Drop the snapshot of a session that ended."""
        self._baselines.pop(key, None)

    async def changes_since_snapshot(
        self, key: str = "default", *, include_agent: bool = False
    ) -> list[FileChangeEntry]:
        """Files changed since `snapshot(key)` by someone else than the agent, and the branch.

        Empty when no snapshot was taken under `key`. Entries from the agent's own edits are left
        out unless `include_agent`. The branch line (if any) comes first, then files the agent
        knows, then the rest by path.
        """
        await self._started()
        async with self._refresh_lock:
            await self._refresh()
            baseline = self._baselines.get(key)
            if baseline is None:
                return []
            baseline.used = time.monotonic()
            self._baselines.move_to_end(key)
            cached = baseline.cache
            if cached is not None and cached[:2] == (self._generation, include_agent):
                entries = cached[2]
            else:
                context = self._context(baseline, include_agent)
                entries, blobs = await asyncio.to_thread(_entries, context)
                for blob, text in blobs.items():
                    self._blob_texts[blob] = text
                while len(self._blob_texts) > self._text_cache_files:
                    self._blob_texts.popitem(last=False)
                baseline.cache = (self._generation, include_agent, entries)
            head_line = await self._branch_entry(baseline)
        known = [e for e in entries if e.path in self._known]
        rest = [e for e in entries if e.path not in self._known]
        return ([head_line] if head_line else []) + known + rest

    def agent_read(self, path: str | os.PathLike[str], text: str, key: str = "default") -> None:
        """The agent read `path` and saw `text`: remember it, and stop reporting it as changed."""
        rel = self._relative(path)
        if rel is None:
            return
        self._known.add(rel)
        self._remember_text(rel, text)
        self._mark_seen(rel, text, key)
        self._generation += 1

    def agent_applied(self, path: str | os.PathLike[str], text: str, key: str = "default") -> None:
        """An edit of the agent's landed and `path` now holds `text`: not the user's change."""
        rel = self._relative(path)
        if rel is None:
            return
        self._known.add(rel)
        self._remember_text(rel, text)
        digests = self._agent_digests.setdefault(rel, deque(maxlen=4))
        digests.extend(_text_digests(text))
        self._agent_texts[rel] = (text, time.monotonic())
        self._mark_seen(rel, text, key)
        self._generation += 1

    def known_text(self, path: str | os.PathLike[str]) -> str | None:
        """The text the agent last read or wrote for `path`, if still cached (a rebase base)."""
        rel = self._relative(path)
        return self._texts.get(rel) if rel is not None else None

    def buffer_changed(self, path: str | os.PathLike[str], text: str, version: int | None) -> None:
        """The editor's buffer for `path` changed (didOpen/didChange); tracked for known files."""
        rel = self._relative(path)
        if rel is None or rel not in self._known:
            return
        previous = self._buffers.get(rel)
        for baseline in self._baselines.values():
            if rel not in baseline.buffers:
                baseline.buffers[rel] = (
                    _blob_digest(previous.text.encode("utf-8", "surrogatepass"))
                    if previous is not None
                    else None
                )
        self._buffers[rel] = _Buffer(text, version, time.monotonic())
        self._generation += 1

    def buffer_saved(self, path: str | os.PathLike[str]) -> None:
        """The editor saved `path` (didSave): a formatter may rewrite it in the next moment."""
        rel = self._relative(path)
        if rel is not None:
            self._saves[rel] = time.monotonic()
            self._generation += 1

    def buffer_closed(self, path: str | os.PathLike[str]) -> None:
        """The editor closed `path` (didClose): the disk is what counts again."""
        rel = self._relative(path)
        if rel is not None:
            self._buffers.pop(rel, None)
            self._generation += 1

    @property
    def watches(self) -> int:
        """inotify watches held now (0 when polling or not on Linux): for `status` and tests."""
        return self._budget.used if self._budget is not None and self.watching == "inotify" else 0

    def status_map(self) -> dict[str, str]:
        """Path → git status code of every path the tracker sees differing from HEAD (git mode).

        For checks and benchmarks: it should equal what a full `git status` reports.
        """
        return {rel: state.code for rel, state in self._states.items()}

    async def settle(
        self, quiet: float = 0.2, timeout: float = 5.0, *, since: float | None = None
    ) -> None:
        """Wait until no event arrived for `quiet` seconds (tests and benchmarks).

        With `since` (a `time.monotonic()` value), first wait for an event newer than it: a
        polled tree reports a change only at its next scan.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = max(self._event_times.values(), default=0.0)
            with self._inbox_lock:
                last = max([last, *self._inbox_times.values()])
            waiting = since is not None and last <= since
            if not waiting and time.monotonic() - last >= quiet:
                return
            await asyncio.sleep(quiet / 4)

    async def _started(self) -> None:
        if self._loop is not None:  # start() was called: wait for it to finish
            await self._ready.wait()

    async def _find_repository(self) -> None:
        code, out = await self._git(
            "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"
        )
        lines = out.decode("utf-8", "surrogateescape").splitlines()
        if code != 0 or len(lines) < 3:
            self.mode = "hashes"
            return
        top = Path(lines[0]).resolve()
        if not self.root.is_relative_to(top):
            self.mode = "hashes"
            return
        self.mode = "git"
        self._blobs = _BlobReader(self.root)
        self._git_top = top
        self._git_dir = Path(lines[1]).resolve()
        common = Path(lines[2])
        self._git_common = (common if common.is_absolute() else self.root / common).resolve()
        inside = self.root.relative_to(top).as_posix()
        self._prefix = "" if inside == "." else inside + "/"
        self._ignore.add_exclude_file(self._git_common / "info" / "exclude")

    async def _read_head(self) -> tuple[str | None, str | None]:
        (code_c, commit), (code_b, branch) = await asyncio.gather(
            self._git("rev-parse", "--verify", "-q", "HEAD"),
            self._git("symbolic-ref", "-q", "--short", "HEAD"),
        )
        head = commit.decode().strip() if code_c == 0 else None
        name = branch.decode("utf-8", "replace").strip() if code_b == 0 else None
        if name is None:
            name = f"(detached at {head[:7]})" if head else "(detached)"
        return head, name

    async def _full_status(self) -> dict[str, _State]:
        code, out = await self._git(*_STATUS_ARGS)
        if code != 0:
            self._log_once("status", f"lsp-agent: git status failed in {self.root}")
            return {}
        codes = self._parse_status(out)
        return await asyncio.to_thread(self._hash_states, codes)

    async def _limited_status(self, specs: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        # Preloading the index checks every entry with threads: for a few paths, slower.
        code, out = await self._git(
            "-c", "core.preloadIndex=false", *_STATUS_ARGS, "--", *sorted(specs)
        )
        return self._parse_status(out) if code == 0 else {}

    def _parse_status(self, out: bytes) -> dict[str, tuple[str, str | None]]:
        """Path (relative to the root) → (XY, index blob) from `git status --porcelain=v2 -z`."""
        found: dict[str, tuple[str, str | None]] = {}
        for kind, xy, base_blob, path in _parse_porcelain(out):
            if not path.startswith(self._prefix):
                continue
            rel = path[len(self._prefix) :]
            if _excluded_parts(rel):
                continue
            found[rel] = ("??" if kind == "?" else xy, base_blob)
        return found

    def _hash_states(self, codes: dict[str, tuple[str, str | None]]) -> dict[str, _State]:
        return {
            rel: _State(code, _file_digest(self.root / rel), base_blob)
            for rel, (code, base_blob) in codes.items()
        }

    def _scan_all(self) -> dict[str, _State]:
        states: dict[str, _State] = {}
        budget = MAX_SCANNED_BYTES
        for rel in self._walk_files(""):
            if len(states) >= MAX_SCANNED_FILES:
                self._log_once(
                    "scan",
                    f"lsp-agent: more than {MAX_SCANNED_FILES} files in {self.root} (not a git "
                    "repository): changes to the others are reported as new files",
                )
                break
            path = self.root / rel
            digest = _file_digest(path) if budget > 0 else _stat_digest(path)
            if digest is not None:
                states[rel] = _State("", digest)
                if budget > 0:
                    with contextlib.suppress(OSError):
                        budget -= path.lstat().st_size
        return states

    def _walk_files(self, rel_dir: str) -> Iterator[str]:
        start = self.root / rel_dir if rel_dir else self.root
        for top, dirnames, filenames in os.walk(start):
            top_rel = Path(top).relative_to(self.root).as_posix()
            top_rel = "" if top_rel == "." else top_rel
            dirnames[:] = [
                name
                for name in dirnames
                if not self._skip_dir(f"{top_rel}/{name}" if top_rel else name, top)
            ]
            for name in filenames:
                rel = f"{top_rel}/{name}" if top_rel else name
                if not self._excluded(rel, is_dir=False):
                    yield rel

    async def _refresh(self) -> None:
        """Bring the states up to date with the events received; record changes in baselines."""
        await asyncio.sleep(0)  # a drain scheduled by watchdog's thread runs first
        self._drain()
        dirty, dirs, moves = self._dirty, self._dirty_dirs, self._moves
        self._dirty, self._dirty_dirs, self._moves = set(), set(), []
        git_changed, self._git_changed = self._git_changed, False
        resync, self._resync_needed = self._resync_needed, False
        if self.mode == "git":
            if git_changed or resync:
                head, branch = await self._read_head()
                if head != self._head and head and self._head:
                    dirty |= await self._diff_names(self._head, head)
                elif head != self._head:
                    resync = True
                self._head, self._branch = head, branch
                dirty |= set(self._states)
            specs, folded = _pathspecs(dirty, dirs)
            if resync or len(specs) > MAX_PATHSPECS:
                new_states = await self._full_status()
                affected = set(self._states) | set(new_states)
            elif specs:
                codes = await self._limited_status(specs)
                new_states = await asyncio.to_thread(self._hash_states, codes)
                scope = dirs | folded
                affected = set(new_states) | dirty
                affected |= {rel for rel in self._states if _under_any(rel, scope)}
            else:
                new_states, affected = {}, set()
        else:
            if resync:
                new_states = await asyncio.to_thread(self._scan_all)
                affected = set(self._states) | set(new_states)
            else:
                new_states = await asyncio.to_thread(self._hash_paths, dirty, dirs)
                affected = set(new_states) | dirty
                affected |= {rel for rel in self._states if _under_any(rel, dirs)}
        for rel in affected:
            old = self._states.get(rel)
            new = new_states.get(rel)
            if old == new:
                continue
            if new is None:
                del self._states[rel]
            else:
                self._states[rel] = new
            self._generation += 1
            for baseline in self._baselines.values():
                baseline.old.setdefault(rel, old)
        if git_changed or resync:
            self._generation += 1
        if moves:
            self._generation += 1
            for baseline in self._baselines.values():
                baseline.moves.extend(moves)
                del baseline.moves[:-1000]

    def _hash_paths(self, paths: set[str], dirs: set[str]) -> dict[str, _State]:
        states: dict[str, _State] = {}
        for rel in paths:
            digest = _file_digest(self.root / rel)
            if digest is not None:
                states[rel] = _State("", digest)
        for rel_dir in dirs:
            if (self.root / rel_dir).is_dir():
                for rel in self._walk_files(rel_dir):
                    digest = _file_digest(self.root / rel)
                    if digest is not None:
                        states[rel] = _State("", digest)
        return states

    async def _diff_names(self, old: str, new: str) -> set[str]:
        code, out = await self._git(
            "diff", "--name-only", "-z", "--no-renames", old, new, "--", "."
        )
        if code != 0:
            return set()
        names = set()
        for raw in out.split(b"\0"):
            if raw:
                path = os.fsdecode(raw)
                if path.startswith(self._prefix):
                    names.add(path[len(self._prefix) :])
        return names

    async def _branch_entry(self, baseline: _Baseline) -> FileChangeEntry | None:
        if self.mode != "git" or (baseline.head == self._head and baseline.branch == self._branch):
            return None
        differ = "; same commit, no file differs"
        if baseline.head and self._head and baseline.head != self._head:
            pair = (baseline.head, self._head)
            if pair not in self._differ_counts:
                if len(self._differ_counts) > 64:
                    self._differ_counts.clear()
                self._differ_counts[pair] = len(await self._diff_names(*pair))
            count = self._differ_counts[pair]
            differ = f"; {count} file{'' if count == 1 else 's'} differ"
        elif baseline.head != self._head:
            differ = ""
        if baseline.branch != self._branch:
            sentence = f"branch changed from {baseline.branch} to {self._branch}{differ}"
        else:
            old = (baseline.head or "none")[:7]
            new = (self._head or "none")[:7]
            sentence = (
                f"branch {self._branch} moved from {old} to {new} (a commit, pull or reset){differ}"
            )
        return FileChangeEntry("", BRANCH, USER, detail=sentence)

    def _context(self, baseline: _Baseline, include_agent: bool) -> _Context:
        buffers: dict[str, tuple[_Buffer, str | None]] = {
            rel: (self._buffers[rel], before)
            for rel, before in baseline.buffers.items()
            if rel in self._buffers
        }
        wanted = set(baseline.old) | set(buffers)
        return _Context(
            root=self.root,
            mode=self.mode,
            states={rel: self._states[rel] for rel in wanted if rel in self._states},
            old=dict(baseline.old),
            moves=list(baseline.moves),
            seen={rel: frozenset(d) for rel, d in baseline.seen.items() if rel in wanted},
            agent={rel: frozenset(d) for rel, d in self._agent_digests.items() if rel in wanted},
            agent_texts={rel: t for rel, t in self._agent_texts.items() if rel in wanted},
            saves={rel: t for rel, t in self._saves.items() if rel in wanted},
            event_times={rel: t for rel, t in self._event_times.items() if rel in wanted},
            texts={rel: t for rel, t in self._texts.items() if rel in wanted},
            buffers=buffers,
            include_agent=include_agent,
            blob_texts=dict(self._blob_texts),
            blobs=self._blobs,
        )

    def _remember_text(self, rel: str, text: str) -> None:
        old = self._texts.pop(rel, None)
        if old is not None:
            self._text_chars -= len(old)
        if len(text) > self._text_cache_chars:
            return
        self._texts[rel] = text
        self._text_chars += len(text)
        while self._texts and (
            len(self._texts) > self._text_cache_files or self._text_chars > self._text_cache_chars
        ):
            _, dropped = self._texts.popitem(last=False)
            self._text_chars -= len(dropped)

    def _mark_seen(self, rel: str, text: str, key: str) -> None:
        baseline = self._baselines.get(key)
        if baseline is not None:
            baseline.seen.setdefault(rel, set()).update(_text_digests(text))

    def _relative(self, path: str | os.PathLike[str]) -> str | None:
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        if not candidate.is_relative_to(self.root):
            # Spelled through a symlink (macOS's /tmp, a linked checkout): resolve it, once.
            candidate = candidate.resolve()
            if not candidate.is_relative_to(self.root):
                return None
        rel = candidate.relative_to(self.root).as_posix()
        return None if rel == "." else rel

    async def _git(self, *args: str) -> tuple[int, bytes]:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_LITERAL_PATHSPECS": "1"}
        try:
            process = await asyncio.create_subprocess_exec(
                "git",
                "-c",
                "core.quotepath=false",
                *args,
                cwd=self.root,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError:
            return 127, b""
        out, _ = await process.communicate()
        return process.returncode or 0, out

    def _start_observer(self) -> None:
        """Start the best observer available; runs in a worker thread."""
        kind = self._observer_kind
        if kind in ("auto", "inotify") and sys.platform.startswith("linux"):
            try:
                observer = _inotify_observer(self._prune_bytes, self._watch_budget())
            except OSError as error:
                self._fall_back(error)
            except (ImportError, AttributeError, TypeError) as error:
                # watchdog's internals moved (a major release): its own observer still works,
                # it just also watches the directories that are pruned here.
                self._log_once(
                    "watchdog", f"lsp-agent: pruned inotify watching unavailable: {error!r}"
                )
                self._start_native()
                return
            else:
                try:
                    self._schedule(observer)
                    observer.start()
                except OSError as error:
                    _halt(observer)
                    self._fall_back(error)
                else:
                    with self._observer_lock:
                        self._observer = observer
                    self.watching = "inotify"
                    return
        elif kind == "auto":
            self._start_native()
            return
        self._start_polling()

    def _start_native(self) -> None:
        from watchdog.observers import Observer

        native: BaseObserver = Observer()
        self._schedule(native)
        native.start()
        with self._observer_lock:
            self._observer = native
        self.watching = "native"

    def _start_polling(self) -> None:
        observer = PollingObserverVFS(
            cast(Callable[[str], os.stat_result], _slim_stat),
            self._pruned_scandir,
            polling_interval=self._poll_interval,
        )
        self._schedule(observer)
        observer.start()
        with self._observer_lock:
            self._observer = observer
        self.watching = "polling"

    def _schedule(self, observer: BaseObserver) -> None:
        observer.schedule(
            _Handler(self, "work"), str(self.root), recursive=True, event_filter=_EVENTS
        )
        for git_root in self._git_roots():
            observer.schedule(
                _Handler(self, "git", git_root), str(git_root), recursive=True, event_filter=_EVENTS
            )

    def _git_roots(self) -> list[Path]:
        roots = [p for p in (self._git_dir, self._git_common) if p is not None]
        return list(dict.fromkeys(roots))

    def _stop_observer(self) -> None:
        with self._observer_lock:
            observer, self._observer = self._observer, None
        if observer is not None:
            _halt(observer)
        self.watching = "none"

    def _fall_back(self, error: OSError) -> None:
        limit = _read_int("/proc/sys/fs/inotify/max_user_watches")
        if self._max_watches is not None and error.errno == errno.ENOSPC:
            why = f"the tracker's cap of {self._max_watches} inotify watches"
        elif error.errno == errno.ENOSPC:
            why = f"the inotify watch limit (fs.inotify.max_user_watches = {limit})"
        elif error.errno == errno.EMFILE:
            why = "the inotify instance limit (fs.inotify.max_user_instances)"
        else:
            why = f"an inotify error ({error})"
        self.fallback_reason = why
        self._log_once(
            "fallback",
            f"lsp-agent: {why} is reached for {self.root}; polling it every "
            f"{self._poll_interval:g} s instead (raise the limit to watch it without polling)",
        )

    def _watch_budget(self) -> _WatchBudget:
        self._budget = _WatchBudget(self._max_watches, self._limit_hit_later, self._overflowed)
        return self._budget

    def _limit_hit_later(self, error: OSError) -> None:
        """inotify ran out of watches after start (new directories): poll from now on."""
        self._call_on_loop(lambda: self._spawn(self._switch_to_polling(error)))

    def _overflowed(self) -> None:
        """The kernel dropped events: the next refresh compares everything."""
        with self._inbox_lock:
            self._inbox_resync = True
        self._wake()

    async def _switch_to_polling(self, error: OSError) -> None:
        if self.watching != "inotify" or self._closed:
            return
        await asyncio.to_thread(self._stop_observer)
        self._fall_back(error)
        await asyncio.to_thread(self._start_polling)
        self._resync_needed = True

    def _spawn(self, coroutine: Any) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coroutine)
        self._tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                self._log_line(f"lsp-agent: change tracking failed: {finished.exception()!r}")

        task.add_done_callback(done)

    def _call_on_loop(self, callback: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None or self._closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under us: nothing to tell
            loop.call_soon_threadsafe(callback)

    def _on_event(self, tree: str, event: FileSystemEvent, git_root: Path | None = None) -> None:
        """A watchdog event (watchdog's thread): filter, coalesce, wake the loop once."""
        paths = [os.fsdecode(event.src_path)]
        if isinstance(event, FileSystemMovedEvent) and event.dest_path:
            paths.append(os.fsdecode(event.dest_path))
        if tree == "git":
            assert git_root is not None
            if any(_is_git_state(path, git_root) for path in paths):
                with self._inbox_lock:
                    self._inbox_git = True
                self._wake()
            return
        rels: list[str | None] = []
        for path in paths:
            rel = self._rel_of_event(path)
            if rel is None or self._excluded(rel, event.is_directory):
                rels.append(None)
                continue
            rels.append(rel)
            if rel == ".gitignore" or rel.endswith("/.gitignore"):
                self._ignore.reload(rel.rpartition("/")[0])
        now = time.monotonic()
        with self._inbox_lock:
            for rel in rels:
                if rel is None:
                    continue
                (self._inbox_dirs if event.is_directory else self._inbox_paths).add(rel)
                self._inbox_times[rel] = now
            if (
                len(rels) == 2
                and rels[0] is not None
                and rels[1] is not None
                and not event.is_directory
            ):
                self._inbox_moves.append((rels[0], rels[1]))
        if any(rel is not None for rel in rels):
            self._wake()

    def _wake(self) -> None:
        with self._inbox_lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        self._call_on_loop(self._drain)

    def _drain(self) -> None:
        """Move the inbox to the loop's side (runs on the loop)."""
        with self._inbox_lock:
            self._dirty |= self._inbox_paths
            self._dirty_dirs |= self._inbox_dirs
            self._moves.extend(self._inbox_moves)
            self._event_times.update(self._inbox_times)
            self._git_changed |= self._inbox_git
            self._resync_needed |= self._inbox_resync
            self._inbox_paths, self._inbox_dirs, self._inbox_moves = set(), set(), []
            self._inbox_times = {}
            self._inbox_git = self._inbox_resync = False
            self._wake_pending = False
        if len(self._event_times) > 20_000:
            cutoff = time.monotonic() - 60
            self._event_times = {k: t for k, t in self._event_times.items() if t >= cutoff}

    def _rel_of_event(self, path: str) -> str | None:
        root = str(self.root)
        if path == root or not path.startswith(root + os.sep):
            return None
        rel = path[len(root) + 1 :]
        return rel if os.sep == "/" else rel.replace(os.sep, "/")

    def _prune_bytes(self, parent: bytes, path: bytes) -> bool:
        """For the inotify walk: True for a directory not to watch nor descend into."""
        return self._prune_child(os.fsdecode(parent), os.fsdecode(path))

    def _prune_child(self, parent: str, path: str) -> bool:
        """Whether to skip the directory `path` found in `parent`.

        The rules are those of the tree being walked, told by `parent`: inside a git directory
        only `refs/` (or `reftable/`) is kept; in the work tree `.git` itself is skipped (it is
        watched apart).
        """
        for git_root in self._git_roots():
            text = str(git_root)
            if parent == text or parent.startswith(text + os.sep):
                inside = path[len(text) + 1 :].replace(os.sep, "/")
                return inside.split("/", 1)[0] not in _GIT_REF_DIRS
        rel = self._rel_of_event(path)
        if rel is None:
            return False
        return self._skip_dir(rel, parent)

    def _skip_dir(self, rel: str, parent: str) -> bool:
        name = rel.rpartition("/")[2]
        if name in EXCLUDED_DIRS:
            return True
        if os.path.isfile(os.path.join(parent, name, "pyvenv.cfg")):
            self._venvs.add(rel)
            return True
        return self._ignore.ignored(rel, is_dir=True)

    def _excluded(self, rel: str, is_dir: bool) -> bool:
        if _excluded_parts(rel):
            return True
        venvs = tuple(self._venvs)  # a C-level copy: the inotify thread may add one meanwhile
        if venvs and _under_any(rel, venvs):
            return True
        return self._ignore.ignored(rel, is_dir=is_dir)

    def _pruned_scandir(self, path: str | None) -> Iterator[os.DirEntry[str]]:
        """`os.scandir` for the polling observer, without what is not watched."""
        assert path is not None
        git_tree = any(
            path == str(root) or path.startswith(str(root) + os.sep) for root in self._git_roots()
        )
        with os.scandir(path) as entries:
            for entry in entries:
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir:
                    if self._prune_child(path, entry.path):
                        continue
                elif not git_tree:
                    rel = self._rel_of_event(entry.path)
                    if rel is None or self._excluded(rel, is_dir=False):
                        continue
                yield entry

    def _log_once(self, key: str, line: str) -> None:
        if key in self._logged:
            return
        self._logged.add(key)
        self._log_line(line)


class _Handler(FileSystemEventHandler):
    """Hands every watchdog event of one tree to the tracker."""

    def __init__(self, tracker: ChangeTracker, tree: str, git_root: Path | None = None) -> None:
        super().__init__()
        self.tracker = tracker
        self.tree = tree
        self.git_root = git_root

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self.tracker._on_event(self.tree, event, self.git_root)
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
        self.used = 0
        self.exhausted = exhausted
        self.overflowed = overflowed
        self._lock = threading.Lock()
        self._reported = False

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
    """watchdog's inotify observer, except that it does not descend into pruned directories.

    watchdog watches every subdirectory of a recursive watch and skips silently those it cannot
    watch (the watch limit included). This subclass walks with `prune` and raises the limit
    error during the first walk, so the caller can fall back to polling; after start, running
    out is reported to `budget` instead of killing watchdog's reader thread.
    """
    from watchdog.observers.inotify import InotifyEmitter, InotifyWatchGroup
    from watchdog.observers.inotify_c import InotifyFD

    @dataclass
    class PrunedWatchGroup(InotifyWatchGroup):
        prune: Callable[[bytes, bytes], bool] | None = None
        budget: _WatchBudget | None = None

        def _add_all_callbacks(self, path: bytes) -> None:
            starting = not self.is_active
            if (
                path != self.path
                and self.prune is not None
                and self.prune(os.path.dirname(path), path)
            ):
                return
            try:
                self._watch(path, required=path == self.path)
                if not (self.is_recursive and os.path.isdir(path)):
                    return
                for top, dirnames, _ in os.walk(path):
                    kept = []
                    for name in dirnames:
                        full = os.path.join(top, name)
                        if os.path.islink(full) or (
                            self.prune is not None and self.prune(top, full)
                        ):
                            continue
                        if self._watch(full, required=False):
                            kept.append(name)
                    dirnames[:] = kept
            except OSError as error:
                if starting:
                    raise
                if error.errno in _LIMIT_ERRNOS and self.budget is not None:
                    self.budget.report(error)

        def _watch(self, path: bytes, *, required: bool) -> bool:
            if self.budget is not None:
                self.budget.take()
            try:
                wd = self._inotify_fd.add_callback(path, self.event_mask, self._callback, self._id)
            except OSError as error:
                if self.budget is not None:
                    self.budget.give_back()
                if required or error.errno in _LIMIT_ERRNOS:
                    raise
                return False
            self._active_callbacks_by_path[path] = wd
            self._active_callbacks_by_watch[wd] = path
            return True

        def _remove_watch_internally(self, wd: Any) -> None:
            super()._remove_watch_internally(wd)
            if self.budget is not None:
                self.budget.give_back()

        def on_queue_overflow(self) -> None:
            super().on_queue_overflow()
            if self.budget is not None:
                self.budget.overflowed()

    class PrunedEmitter(InotifyEmitter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._prune = kwargs.pop("prune")
            self._budget = kwargs.pop("budget")
            super().__init__(*args, **kwargs)

        def on_thread_start(self) -> None:
            self._inotify = PrunedWatchGroup(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=False,
                prune=self._prune,
                budget=self._budget,
            )

    class PrunedObserver(BaseObserver):
        def __init__(self) -> None:
            self._inotify_fd = InotifyFD()
            self._inotify_fd.start()
            super().__init__(PrunedEmitter, inotify_fd=self._inotify_fd, prune=prune, budget=budget)

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            self._inotify_fd.stop()
            with contextlib.suppress(RuntimeError):
                self._inotify_fd.join()

    return PrunedObserver()


class _SlimStat:
    """The part of `os.stat_result` watchdog's polling snapshot reads, in a third of the memory:
    a polled tree keeps two snapshots of every file and folder."""

    __slots__ = ("st_dev", "st_ino", "st_mode", "st_mtime", "st_size")

    def __init__(self, info: os.stat_result) -> None:
        self.st_ino = info.st_ino
        self.st_dev = info.st_dev
        self.st_mode = info.st_mode
        self.st_mtime = info.st_mtime
        self.st_size = info.st_size


def _slim_stat(path: str) -> _SlimStat:
    return _SlimStat(os.stat(path))


def _halt(observer: BaseObserver) -> None:
    """Stop an observer, started or not, and wait for its threads."""
    observer.stop()
    with contextlib.suppress(RuntimeError):  # never started
        observer.join(timeout=10)


class _IgnoreRules:
    """`.gitignore` files (each applying below its folder) and `.git/info/exclude`, via pathspec.

    Read lazily, folder by folder, and re-read when watchdog reports a `.gitignore` changed.
    Used to keep the watches and the events off ignored paths; in a git repository `git status`
    has the final word on what is ignored.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._dirs: dict[str, bool] = {}
        self._exclude: pathspec.GitIgnoreSpec | None = None

    def add_exclude_file(self, path: Path) -> None:
        with self._lock:
            self._exclude = _read_spec(path)
            self._dirs.clear()

    def reload(self, rel_dir: str) -> None:
        with self._lock:
            self._specs.pop(rel_dir, None)
            self._dirs.clear()

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        with self._lock:
            parts = rel.split("/")
            for depth in range(1, len(parts)):
                if self._dir_ignored("/".join(parts[:depth])):
                    return True
            return self._dir_ignored(rel) if is_dir else self._match(rel, is_dir=False)

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


_STATUS_ARGS = (
    "status",
    "--porcelain=v2",
    "-z",
    "--untracked-files=all",
    "--no-renames",
    "--ignore-submodules=dirty",
)


def _parse_porcelain(out: bytes) -> Iterator[tuple[str, str, str | None, str]]:
    """(kind, XY, base blob, path) for each entry of `git status --porcelain=v2 -z`; the base
    blob is HEAD's (`hH`), or the index's (`hI`) for a path HEAD does not have."""
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        kind = chr(record[0])
        if kind in "12":
            parts = record.split(b" ", 8 if kind == "1" else 9)
            if kind == "2":
                i += 1  # the original path follows in its own field
            yield (
                kind,
                parts[1].decode(),
                _blob(parts[6]) or _blob(parts[7]),
                os.fsdecode(parts[-1]),
            )
        elif kind == "u":
            parts = record.split(b" ", 10)
            yield kind, parts[1].decode(), None, os.fsdecode(parts[10])
        elif kind == "?":
            yield kind, "??", None, os.fsdecode(record[2:])


def _blob(field: bytes) -> str | None:
    """An object name from git, or None for the all-zero "no object"."""
    name = field.decode()
    return None if set(name) == {"0"} else name


def _entries(context: _Context) -> tuple[list[FileChangeEntry], dict[str, str]]:
    """The file entries for one baseline, and the index blobs read for their diffs (runs in a
    worker thread: reads files, runs git)."""
    found: dict[str, tuple[str, str | None, str | None]] = {}
    """rel → (status, digest now, digest before) for paths whose content or existence changed."""
    for rel, old in context.old.items():
        new = context.states.get(rel)
        judged = _judge(context, rel, old, new)
        if judged is not None:
            found[rel] = judged
    renames = _pair_renames(found, context.moves)
    unsaved = {rel: _unsaved(context, rel) for rel in sorted(context.buffers)}
    kept: list[tuple[str, str, str, str | None, str | None]] = []
    """(rel, status, source, old path, current text) of the files to report."""
    for rel in sorted(found):
        status, digest_now, _ = found[rel]
        if rel in renames.values():
            continue
        if unsaved.get(rel) is not None:
            continue  # reported below as an unsaved buffer: the buffer is what the agent reads
        old_path = renames.get(rel)
        if old_path is not None:
            status = RENAMED
        current = _read_text(context.root / rel) if status in (MODIFIED, ADDED, RENAMED) else None
        source = _source(context, rel, digest_now, current, context.event_times.get(rel))
        if source == AGENT:
            if not context.include_agent:
                continue
        elif digest_now is not None and digest_now in context.seen.get(rel, ()):
            continue  # the agent read this very content since
        kept.append((rel, status, source, old_path, current))
    bases: dict[str, str | None] = {}
    for rel, status, _, _, current in kept:
        if current is None or status == RENAMED or len(bases) >= MAX_DIFFS:
            continue
        bases[rel] = context.texts.get(rel, "" if status == ADDED else None)
    blobs, fetched = _index_texts(context, [rel for rel, base in bases.items() if base is None])
    entries: list[FileChangeEntry] = []
    for rel, status, source, old_path, current in kept:
        base = bases.get(rel)
        before = base if base is not None else blobs.get(rel)
        diff = None
        if current is not None and before is not None:
            diff = _small_diff(rel, before, current)
        entries.append(FileChangeEntry(rel, status, source, old_path, diff))
    for entry in unsaved.values():
        if entry is not None and (entry.source != AGENT or context.include_agent):
            entries.append(entry)
    return entries, fetched


def _judge(
    context: _Context, rel: str, old: _State | None, new: _State | None
) -> tuple[str, str | None, str | None] | None:
    """(status, digest now, digest before) when `rel`'s content or existence changed."""
    if context.mode == "hashes":
        before = old.digest if old else None
        now = new.digest if new else None
        if before == now:
            return None
        status = ADDED if before is None else DELETED if now is None else MODIFIED
        return status, now, before
    if new is None:
        # Clean (same as HEAD) or absent now.
        now = _file_digest(context.root / rel)
        if old is None or old.digest == now:
            return None
        if now is None:
            return (DELETED, None, old.digest) if old.digest is not None else None
        return (ADDED if old.digest is None else MODIFIED), now, old.digest
    if old is None:
        # Clean or absent at the snapshot: git's status now says which.
        if new.digest is None:
            return None if new.code.startswith("A") else (DELETED, None, new.base_blob)
        if new.code == "??" or new.code.startswith("A"):
            return ADDED, new.digest, None
        return MODIFIED, new.digest, new.base_blob
    if old.digest == new.digest:
        return None
    if new.digest is None:
        return DELETED, None, old.digest
    return (ADDED if old.digest is None else MODIFIED), new.digest, old.digest


def _pair_renames(
    found: dict[str, tuple[str, str | None, str | None]], moves: Sequence[tuple[str, str]]
) -> dict[str, str]:
    """New path → old path for deletions and additions that are one file moved."""
    deleted = {rel for rel, (status, _, _) in found.items() if status == DELETED}
    added = {rel for rel, (status, _, _) in found.items() if status == ADDED}
    renames: dict[str, str] = {}
    # Same content first: watchdog's polling observer pairs moves by inode, and a file system
    # reuses the inode of a deleted file at once, so its "moves" can join unrelated files.
    by_digest: dict[str, str] = {}
    for rel in sorted(deleted):
        before = found[rel][2]
        if before is not None:
            by_digest.setdefault(before, rel)
    for rel in sorted(added):
        now = found[rel][1]
        source_rel = by_digest.pop(now, None) if now is not None else None
        if source_rel is not None:
            renames[rel] = source_rel
            deleted.discard(source_rel)
            added.discard(rel)
    # Then moves whose content changed on the way (renamed, then edited).
    for source, target in moves:
        if source in deleted and target in added:
            renames[target] = source
            deleted.discard(source)
            added.discard(target)
    return renames


def _unsaved(context: _Context, rel: str) -> FileChangeEntry | None:
    """The entry for an open buffer that differs from the disk and changed since the snapshot."""
    buffer, before = context.buffers[rel]
    disk = _read_text(context.root / rel)
    if disk is not None and disk == buffer.text:
        return None
    digests = _text_digests(buffer.text)
    if before is not None and before in digests:
        return None
    source = _source(context, rel, digests[0], buffer.text, buffer.changed_at)
    if source != AGENT and any(d in context.seen.get(rel, ()) for d in digests):
        return None
    base = context.texts.get(rel, disk)
    diff = _small_diff(rel, base, buffer.text) if base is not None else None
    return FileChangeEntry(rel, UNSAVED, source, None, diff)


def _source(
    context: _Context, rel: str, digest: str | None, text: str | None, changed_at: float | None
) -> str:
    """`agent` for the agent's own text, `formatter` for whitespace-only changes right after an
    agent edit or its save, else `user`."""
    if digest is not None and digest in context.agent.get(rel, ()):
        return AGENT
    applied = context.agent_texts.get(rel)
    if applied is None or text is None:
        return USER
    agent_text, applied_at = applied
    moments = [applied_at]
    if rel in context.saves:
        moments.append(context.saves[rel])
    when = changed_at if changed_at is not None else time.monotonic()
    close = min(abs(when - moment) for moment in moments) <= FORMATTER_WINDOW_S
    if close and _WHITESPACE.sub("", text) == _WHITESPACE.sub("", agent_text):
        return FORMATTER
    return USER


def _small_diff(rel: str, before: str, after: str) -> str | None:
    """The diff hunks (no file header) when at most `DIFF_MAX_LINES` lines changed."""
    diff = unified_diff(rel, before, after)
    if not diff:
        return None
    lines = diff.splitlines()[2:]
    changed = sum(1 for line in lines if line[:1] in "+-")
    if changed > DIFF_MAX_LINES:
        return None
    return "\n".join(lines)


def _index_texts(context: _Context, rels: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The text each path had when it was clean at the snapshot (its HEAD blob), for small
    text files; and the blobs that had to be read for it."""
    wanted: dict[str, str] = {}
    for rel in rels:
        state = context.states.get(rel)
        if context.mode != "git" or context.old.get(rel) is not None:
            continue
        if state is None or not state.base_blob:
            continue
        wanted[rel] = state.base_blob
    missing = sorted({blob for blob in wanted.values() if blob not in context.blob_texts})
    fetched: dict[str, str] = {}
    if missing and context.blobs is not None:
        for blob, data in context.blobs.read(missing).items():
            text = _decode(data)
            if text is not None:
                fetched[blob] = text
    known = {**context.blob_texts, **fetched}
    texts = {rel: known[blob] for rel, blob in wanted.items() if blob in known}
    return texts, fetched


class _BlobReader:
    """One long-lived `git cat-file --batch`: blob contents for diffs without starting a
    process per model call (that start would be a tenth of the call's cost)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def read(self, blobs: Sequence[str]) -> dict[str, bytes]:
        """Blob id → content, for the blobs that exist and are at most `MAX_TEXT_BYTES`."""
        with self._lock:
            try:
                return self._read(blobs)
            except (OSError, ValueError):
                self._close()  # a dead or confused process: the next call starts a new one
                return {}

    def _read(self, blobs: Sequence[str]) -> dict[str, bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=self.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            )
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(f"{blob}\n" for blob in blobs).encode())
        process.stdin.flush()
        contents: dict[str, bytes] = {}
        for _ in blobs:
            header = process.stdout.readline().split()
            if len(header) != 3:
                if not header:
                    raise ValueError("git cat-file ended")
                continue  # "<id> missing"
            size = int(header[2])
            data = process.stdout.read(size + 1)[:size]
            if size <= MAX_TEXT_BYTES:
                contents[header[0].decode()] = data
        return contents

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _read_text(path: Path) -> str | None:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_TEXT_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return _decode(data)


def _decode(data: bytes) -> str | None:
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")


def _file_digest(path: Path) -> str | None:
    """git's blob hash of the file's bytes; a size/time stamp for huge files; None if absent."""
    try:
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode):
            return "dir"
        if stat.S_ISLNK(info.st_mode):
            return _blob_digest(os.fsencode(os.readlink(path)))
        if info.st_size > MAX_HASH_BYTES:
            return f"stat:{info.st_size}:{info.st_mtime_ns}"
        return _blob_digest(path.read_bytes())
    except OSError:
        return None


def _stat_digest(path: Path) -> str | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    return f"stat:{info.st_size}:{info.st_mtime_ns}"


def _blob_digest(data: bytes) -> str:
    sha = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    sha.update(data)
    return sha.hexdigest()


def _text_digests(text: str) -> list[str]:
    """Digests `text` has on disk: as UTF-8, and with a byte-order mark."""
    data = text.encode("utf-8", "surrogatepass")
    return [_blob_digest(data), _blob_digest(b"\xef\xbb\xbf" + data)]


def _excluded_parts(rel: str) -> bool:
    return any(part in EXCLUDED_DIRS for part in rel.split("/"))


def _pathspecs(paths: set[str], dirs: set[str]) -> tuple[set[str], set[str]]:
    """The pathspecs that cover `paths` and `dirs`, and the folders that stand for several
    changed files of theirs (`FOLD_SIBLINGS` or more)."""
    by_parent: dict[str, list[str]] = {}
    for rel in paths:
        if not _under_any(rel, dirs):
            by_parent.setdefault(rel.rpartition("/")[0], []).append(rel)
    specs, folded = set(dirs), set()
    for parent, members in by_parent.items():
        if parent and len(members) >= FOLD_SIBLINGS:
            specs.add(parent)
            folded.add(parent)
        else:
            specs.update(members)
    return specs, folded


def _under_any(rel: str, dirs: Iterable[str]) -> bool:
    return any(rel == d or rel.startswith(d + "/") for d in dirs)


def _is_git_state(path: str, git_root: Path) -> bool:
    text = str(git_root)
    if not path.startswith(text + os.sep):
        return False
    inside = path[len(text) + 1 :].replace(os.sep, "/")
    return inside in _GIT_WATCHED or inside.split("/", 1)[0] in _GIT_REF_DIRS


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


class SessionChanges:
    """One session's `<file_changes>`: the tracker seen through the session's own snapshot.

    The first call takes the snapshot instead of reporting: what changed before the session's
    first request is in what the model reads anyway.
    """

    def __init__(self, tracker: ChangeTracker, key: str) -> None:
        self.tracker = tracker
        self.key = key
        """The session id: the snapshot and the files seen are kept per session."""
        self._taken = False

    async def snapshot(self) -> None:
        await self.tracker.snapshot(self.key)
        self._taken = True

    async def changes(self) -> str:
        if not self._taken:
            await self.snapshot()
            return ""
        return render_file_changes(await self.tracker.changes_since_snapshot(self.key))


def render_file_changes(entries: Sequence[FileChangeEntry], limit_chars: int = 6000) -> str:
    """The `<file_changes>` block for the reminder; empty when nothing to report.

    Entries from the agent itself are left out. Each file gets one line (status and source),
    followed by its diff when it has one and the block still fits in `limit_chars`; past the
    bound, the rest is counted in "… and N more files".
    """
    shown = [e for e in entries if e.source != AGENT]
    if not shown:
        return ""
    head = (
        "<file_changes>\n"
        "Changed since your last turn by someone else (the user, a tool, git). Read a file "
        "again before editing it: edits planned against an older text are refused, except "
        "when the user is typing in an open buffer away from the lines you change."
    )
    tail = "</file_changes>"
    lines = [head]
    used = len(head) + len(tail) + 2
    files = [e for e in shown if e.status != BRANCH]
    for entry in shown:
        if entry.status == BRANCH:
            line = f"- {entry.detail}"
            lines.append(line)
            used += len(line) + 1
    reserve = 40  # room for the "… and N more files" line
    for index, entry in enumerate(files):
        line = _entry_line(entry)
        block = line
        if entry.diff:
            block = line + "\n" + "\n".join("    " + d for d in entry.diff.splitlines())
        if used + len(block) + 1 + reserve <= limit_chars:
            lines.append(block)
            used += len(block) + 1
        elif used + len(line) + 1 + reserve <= limit_chars:
            lines.append(line + " (diff left out: read the file)")
            used += len(line) + 32
        else:
            more = len(files) - index
            lines.append(f"… and {more} more file{'' if more == 1 else 's'}")
            break
    lines.append(tail)
    return "\n".join(lines)


def _entry_line(entry: FileChangeEntry) -> str:
    who = {
        USER: "by the user",
        FORMATTER: "by a formatter, whitespace only, right after your edit",
        AGENT: "by you",
    }.get(entry.source, f"by {entry.source}")
    if entry.status == RENAMED and entry.old_path:
        return f"- {entry.old_path} → {entry.path}: renamed {who}"
    return f"- {entry.path}: {entry.status} {who}"
