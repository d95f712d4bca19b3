"""What changed in the workspace since the agent's last turn, and who changed it.

`ChangeTracker` keeps, between turns, what the agent needs to hear in `<file_changes>`:

- **States** (`states.py`): what differs from HEAD (or every file's digest outside git), brought
  up to date from the paths the watcher (`watch.py`) saw change, or by one full comparison a
  turn when nothing is watched.
- **A watcher is trusted only while it shows it works**: it stops being trusted when its probe
  goes unanswered or its threads die (`Watcher.health`, every refresh), when it reaches a
  limit, or when a full comparison finds a change it never reported (`audit.py`). The tracker
  then says why, once, and compares once per turn.
- **Snapshots**: `snapshot()` at the end of a turn starts a baseline; from then on, the first
  time a path's state changes, its previous state is kept (copy on write).
  `changes_since_snapshot()` compares each such path's state then and now (`compare.py`), and
  the branch (one line for a switch).
- **Not ready yet**: `start()` takes a while on a large repository. With `wait=False`, calls made
  before it finished do not wait, and the note says what could not be seen.
- **Sources**: `agent_applied()` registers the digest of the agent's own accepted edits;
  `agent_read()` marks what the agent has seen; `buffer_*` follow the editor's open buffers
  (each one that differs from the disk is "modified in editor, unsaved").
- **Cheap repeats**: an answer is reused until an event, an agent read or edit or a buffer change
  could change it, so the calls of one turn cost nothing when nobody touched the workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_agent.changes import audit, git
from lsp_agent.changes.compare import Buffer, Context, Mode, State, entries
from lsp_agent.changes.content import blob_digest, text_digests
from lsp_agent.changes.ignore import EXCLUDED_DIRS, IgnoreRules, excluded_parts, under_any
from lsp_agent.changes.note import (
    ADDED,
    AGENT,
    BRANCH,
    DELETED,
    FORMATTER,
    MODIFIED,
    RENAMED,
    UNSAVED,
    UNSEEN,
    USER,
    FileChangeEntry,
    render_file_changes,
)
from lsp_agent.changes.states import FileStates, GitStates
from lsp_agent.changes.watch import (
    MAX_EMITTERS,
    Events,
    GaveUp,
    ObserverFactory,
    ObserverKind,
    Watcher,
    watch_limit,
)

__all__ = [
    "ADDED",
    "AGENT",
    "BRANCH",
    "DELETED",
    "EXCLUDED_DIRS",
    "FORMATTER",
    "MODIFIED",
    "RENAMED",
    "UNSAVED",
    "UNSEEN",
    "USER",
    "ChangeTracker",
    "FileChangeEntry",
    "render_file_changes",
]

log = logging.getLogger(__name__)

MAX_BASELINES = 32
"""Snapshots kept (one per session key); the least recently used is dropped."""
IN_FLIGHT_S = 1.0
"""A change unreported by the watcher counts as missed only once the watcher has heard nothing
for this long (it is not working through a queue) and the change is older than that."""
STARTING = (
    "the workspace watcher is still starting: changes made since your last turn are not listed yet"
)
"""The note's line when a turn asks before the tracker is ready."""
STARTED_LATE = (
    "the workspace watcher was still starting when your last turn ended: changes made before "
    "it was ready are not listed"
)
"""The note's line for a snapshot taken before the tracker was ready."""


@dataclass
class _Baseline:
    """What the agent knew at the end of a turn, kept by copy on write."""

    head: git.Head | None
    """HEAD then; None while the tracker was not ready (set once it is)."""
    old: dict[str, State | None] = field(default_factory=dict)
    """Each path changed since the snapshot → its state at the snapshot (None: clean/absent)."""
    buffers: dict[str, str | None] = field(default_factory=dict)
    """Each buffer changed since → digest of the buffer then (None: it matched the disk)."""
    seen: dict[str, set[str]] = field(default_factory=dict)
    """Digests the agent has read or written since the snapshot, per path."""
    moves: list[tuple[str, str]] = field(default_factory=list)
    """File moves the watcher reported since the snapshot (source, destination)."""
    blind: bool = False
    """Taken before the tracker was ready: what changed until then is unknown."""
    compared: bool = False
    """Without a watcher: the comparison of this turn was made."""
    cache: tuple[int, bool, list[FileChangeEntry]] | None = None
    """(generation, include_agent, entries) of the last answer: reused while nothing changed."""


class ChangeTracker:
    """Watches one workspace folder; tells what changed since a snapshot, and who changed it.

    Call `await start()` on the event loop that will use it (a background task: it can take a
    second on a large repository) and `await stop()` at shutdown. Every other method runs on
    that loop; watchdog's threads only touch the watcher's locked inbox.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        log_line: Callable[[str], None] | None = None,
        observer: ObserverKind = "auto",
        max_watches: int | None = None,
        max_emitters: int = MAX_EMITTERS,
        observer_factory: ObserverFactory | None = None,
        in_flight: float = IN_FLIGHT_S,
        text_cache_files: int = 64,
        text_cache_chars: int = 4_000_000,
    ) -> None:
        """`log_line` gets the log lines (the server's `window/logMessage`); `observer` forces
        a kind of watching (`none`/`polling`: nothing is watched, one comparison a turn);
        `max_watches` caps the inotify watches this tracker may take and `max_emitters` the
        watches it schedules (past either, it compares once a turn, exactly as when the
        kernel's limit is hit); `observer_factory` makes the observer instead of watchdog's
        (tests); a change the watcher did not report counts as missed once the watcher has
        been quiet for `in_flight` seconds and the change is older than that."""
        self.root = Path(root).resolve()
        """The workspace folder, absolute, symlinks resolved."""
        self.fallback_reason: str | None = None
        """Why the tracker compares once a turn instead of watching, when it does."""
        self._log_line = log_line or (lambda line: log.info("%s", line))
        """Where log lines go."""
        self._observer_kind = observer
        """The kind of watching asked for."""
        self._max_watches = max_watches
        """The cap on inotify watches (None: the kernel's limit)."""
        self._max_emitters = max_emitters
        """The cap on watches scheduled (watchdog's threads)."""
        self._observer_factory = observer_factory
        """Makes the observer (None: watchdog's own)."""
        self._in_flight = in_flight
        """How long the watcher must be quiet, and an unreported change old, for the change to
        count as missed."""
        self._suspects: dict[str, float] = {}
        """Changes a full comparison found that the watcher has not reported (yet), and when
        each file changed (wall clock)."""
        self._rules = IgnoreRules(self.root)
        """What is never watched nor reported."""
        self._watcher: Watcher | None = None
        """The observer and its inbox, once started."""
        self._source: GitStates | FileStates = FileStates(self.root, self._rules, self._log_once)
        """Where the states come from: git, or content hashes (until `start()` finds git)."""
        self._ready = asyncio.Event()
        """Set once `start()` has finished (or failed)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop `start()` ran on (None before): watchdog's threads call into it."""
        self._closed = False
        """`stop()` was called."""
        self._tasks: set[asyncio.Task[Any]] = set()
        """Background work (giving up watching), kept so none fails unseen."""
        self._refresh_lock = asyncio.Lock()
        """One refresh at a time."""
        self._pending = Events()
        """Paths to look at again that the editor told of (saves), and a full comparison
        asked for (the watcher stopped)."""
        self._event_times: dict[str, float] = {}
        """When the watcher last saw each path change (for the formatter rule)."""
        self._states: dict[str, State] = {}
        """Each path that differs from HEAD (git), or each file (outside git)."""
        self._baselines: OrderedDict[str, _Baseline] = OrderedDict()
        """Snapshots by session key, least recently used first."""
        self._generation = 0
        """Bumped by anything that can change an answer of `changes_since_snapshot`."""
        self._known: set[str] = set()
        """Paths the agent read or wrote (listed first in the note)."""
        self._texts: OrderedDict[str, str] = OrderedDict()
        """The text the agent last read or wrote per path, least recently used first."""
        self._text_cache_files = text_cache_files
        """At most this many texts are kept."""
        self._text_cache_chars = text_cache_chars
        """At most this many characters of text are kept."""
        self._blob_texts: OrderedDict[str, str] = OrderedDict()
        """Texts of HEAD blobs fetched for diffs (blobs never change: cached by id)."""
        self._agent_digests: dict[str, deque[str]] = {}
        """Digests of the agent's last landed edits, per path."""
        self._agent_texts: dict[str, tuple[str, float]] = {}
        """The agent's last landed text per path, and when."""
        self._saves: dict[str, float] = {}
        """When the editor last saved each path."""
        self._buffers: dict[str, Buffer] = {}
        """Open editor buffers by path."""
        self._differ_counts: dict[tuple[str, str], int] = {}
        """Files that differ between two commits, for the branch line."""
        self._logged: set[str] = set()
        """Keys of the log lines said once."""

    @property
    def mode(self) -> Mode:
        """`git` inside a git work tree, else `hashes`; known after `start()`."""
        return "git" if isinstance(self._source, GitStates) else "hashes"

    @property
    def ready(self) -> bool:
        """`start()` finished: the first comparison was made and the watcher is up."""
        return self._ready.is_set()

    @property
    def watching(self) -> str:
        """`inotify`, `native`, `polling` (compared once a turn instead) or `none`."""
        if self._watcher is not None and self._watcher.kind != "none":
            return self._watcher.kind
        if self.fallback_reason is not None or self._observer_kind == "polling":
            return "polling"
        return "none"

    @property
    def watches(self) -> int:
        """inotify watches held now (0 when not watching with inotify): for `status` and tests."""
        return self._watcher.watches if self._watcher is not None else 0

    @property
    def watch_limit(self) -> int | None:
        """The cap on inotify watches in effect: `max_watches`, else the kernel's
        `fs.inotify.max_user_watches`; None when not watching with inotify."""
        return watch_limit(self._max_watches) if self.watching == "inotify" else None

    async def start(self) -> None:
        """Find the repository, start watching, and take the first full comparison.

        A tracker used without `start()` starts on first use.
        """
        if self._loop is not None:  # already starting
            await self._ready.wait()
            return
        self._loop = asyncio.get_running_loop()
        await self._start()

    async def wait_ready(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for `start()` to finish (started now if it was not);
        whether it did."""
        self._start_in_background()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._ready.wait()), timeout)
        return self.ready

    def _start_in_background(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._spawn(self._start())

    async def _start(self) -> None:
        try:
            repository = await git.find_repository(self.root)
            git_roots: list[Path] = []
            if repository is not None and self.root.is_relative_to(repository.top):
                self._source = GitStates(self.root, repository, self._rules, self._log_once)
                git_roots = [repository.git_dir, repository.common_dir]
            watcher = Watcher(
                self.root,
                self._rules,
                git_roots=git_roots,
                max_watches=self._max_watches,
                max_emitters=self._max_emitters,
                gave_up=self._gave_up_later,
                observer_factory=self._observer_factory,
            )
            self._watcher = watcher
            if not self._closed:
                # Watch first, then compare: what changes meanwhile is in the inbox.
                await asyncio.to_thread(watcher.start, self._observer_kind)
            for line in watcher.notes:
                self._log_once(line, line)
            if watcher.failure is not None:
                self._fall_back(watcher.failure)
            async with self._refresh_lock:
                self._states = await self._source.full({})
                for baseline in self._baselines.values():
                    if baseline.head is None:  # taken before now: compare with now
                        baseline.head = self._source.head
        finally:
            self._ready.set()

    async def stop(self) -> None:
        """Stop watching; safe to call twice and before `start()`."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._watcher is not None:
            await asyncio.to_thread(self._watcher.stop)
        await asyncio.to_thread(self._source.close)

    async def snapshot(
        self, key: str = "default", *, wait: bool = True, first: bool = False
    ) -> None:
        """Record the state at the end of the agent's turn: the next call compares with it.

        With `wait=False` a tracker still starting is not waited for: the snapshot then holds
        from the moment it is ready, and the note says so, unless `first` (the session's first
        snapshot: nothing before it is reported anyway).
        """
        if not self.ready and not wait:
            self._start_in_background()
            self._keep(key, _Baseline(None, blind=not first, compared=first))
            return
        await self._wait_started()
        async with self._refresh_lock:
            unwatched = self.watching in ("polling", "none")
            if unwatched and not first:
                # Without a watcher the state is known as of this turn's comparison. A snapshot
                # of that state (not of a new comparison, which would take in what the user
                # changed during the turn unseen) leaves those changes to the next turn's
                # comparison, which tells them; the agent's own edits are told apart as always.
                self._keep(key, _Baseline(self._source.head))
                return
            await self._refresh(compare=unwatched)
            self._keep(key, _Baseline(self._source.head, compared=first))
            if self._watcher is not None:
                self._watcher.probe()  # answered by the next turn, or `health()` says so

    async def changes_since_snapshot(
        self, key: str = "default", *, include_agent: bool = False, wait: bool = True
    ) -> list[FileChangeEntry]:
        """Files changed since `snapshot(key)` by someone else than the agent, and the branch.

        Empty when no snapshot was taken under `key`. Entries from the agent's own edits are left
        out unless `include_agent`. The branch line (if any) comes first, then files the agent
        knows, then the rest by path. With `wait=False` a tracker still starting is not waited
        for: the answer is then one line saying so.
        """
        if not self.ready and not wait:
            self._start_in_background()
            baseline = self._baselines.get(key)
            if baseline is None or not baseline.blind:
                return []
            return [FileChangeEntry("", UNSEEN, USER, detail=STARTING)]
        await self._wait_started()
        async with self._refresh_lock:
            baseline = self._baselines.get(key)
            compare = self.watching in ("polling", "none") and not (baseline and baseline.compared)
            await self._refresh(compare=compare)
            if baseline is None:
                return []
            baseline.compared = True
            self._baselines.move_to_end(key)
            cached = baseline.cache
            if cached is not None and cached[:2] == (self._generation, include_agent):
                found = cached[2]
            else:
                context = self._context(baseline, include_agent)
                found, blobs = await asyncio.to_thread(entries, context)
                for blob, text in blobs.items():
                    self._blob_texts[blob] = text
                while len(self._blob_texts) > self._text_cache_files:
                    self._blob_texts.popitem(last=False)
                baseline.cache = (self._generation, include_agent, found)
            head_line = await self._branch_entry(baseline)
        lines = [head_line] if head_line else []
        if baseline.blind:
            lines.insert(0, FileChangeEntry("", UNSEEN, USER, detail=STARTED_LATE))
        known = [e for e in found if e.path in self._known]
        rest = [e for e in found if e.path not in self._known]
        return lines + known + rest

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
        self._agent_digests.setdefault(rel, deque(maxlen=4)).extend(text_digests(text))
        self._agent_texts[rel] = (text, time.monotonic())
        self._mark_seen(rel, text, key)
        self._generation += 1

    def known_text(self, path: str | os.PathLike[str]) -> str | None:
        """The text the agent last read or wrote for `path`, if still cached (a rebase base)."""
        rel = self._relative(path)
        return self._texts.get(rel) if rel is not None else None

    def buffer_changed(self, path: str | os.PathLike[str], text: str, version: int | None) -> None:
        """The editor's buffer for `path` changed (didOpen/didChange)."""
        rel = self._relative(path)
        if rel is None or excluded_parts(rel):
            return
        previous = self._buffers.get(rel)
        # A baseline keeps the buffer as it was at its first change since then: the digest is
        # made only then, not at every keystroke (a megabyte file's text costs milliseconds).
        waiting = [b for b in self._baselines.values() if rel not in b.buffers]
        if waiting:
            before = (
                blob_digest(previous.text.encode("utf-8", "surrogatepass"))
                if previous is not None
                else None
            )
            for baseline in waiting:
                baseline.buffers[rel] = before
        self._buffers[rel] = Buffer(text, version, time.monotonic())
        self._generation += 1

    def buffer_saved(self, path: str | os.PathLike[str]) -> None:
        """The editor saved `path` (didSave): a formatter may rewrite it in the next moment."""
        rel = self._relative(path)
        if rel is not None:
            self._saves[rel] = time.monotonic()
            self._pending.paths.add(rel)
            self._generation += 1

    def buffer_closed(self, path: str | os.PathLike[str]) -> None:
        """The editor closed `path` (didClose): the disk is what counts again."""
        rel = self._relative(path)
        if rel is not None:
            self._buffers.pop(rel, None)
            self._generation += 1

    def status_map(self) -> dict[str, str]:
        """Path → git status code of every path the tracker sees differing from HEAD (git mode).

        For checks and benchmarks: it should equal what a full `git status` reports.
        """
        return {rel: state.code for rel, state in self._states.items()}

    async def settle(
        self, quiet: float = 0.2, timeout: float = 5.0, *, since: float | None = None
    ) -> None:
        """Wait until no event arrived for `quiet` seconds (tests and benchmarks).

        With `since` (a `time.monotonic()` value), first wait for an event newer than it.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = self._watcher.last_event if self._watcher is not None else 0.0
            waiting = since is not None and last <= since
            if not waiting and time.monotonic() - last >= quiet:
                return
            await asyncio.sleep(quiet / 4)

    async def _wait_started(self) -> None:
        await self.start()

    def _keep(self, key: str, baseline: _Baseline) -> None:
        self._baselines.pop(key, None)
        self._baselines[key] = baseline
        while len(self._baselines) > MAX_BASELINES:
            self._baselines.popitem(last=False)

    def _take_events(self) -> tuple[Events, Events | None]:
        """What the watcher saw, with what the editor and the tracker itself asked for; and
        what the watcher alone reported (None when not watching)."""
        events, self._pending = self._pending, Events()
        seen = None
        if self._watcher is not None and self._watcher.kind != "none":
            seen = self._watcher.drain()
            events.paths |= seen.paths
            events.dirs |= seen.dirs
            events.moves += seen.moves
            events.times.update(seen.times)
            events.git |= seen.git
            events.ignore_files |= seen.ignore_files
            events.lost |= seen.lost
            events.dropped |= seen.dropped
        self._event_times.update(events.times)
        if len(self._event_times) > 20_000:
            cutoff = time.monotonic() - 60
            self._event_times = {k: t for k, t in self._event_times.items() if t >= cutoff}
        return events, seen

    async def _refresh(self, *, compare: bool = False) -> None:
        """Bring the states up to date; record what changed in every baseline.

        `compare`: one full comparison (no watcher tells what changed)."""
        watcher = self._watcher
        why = watcher.health() if watcher is not None else None
        if why is not None:
            await self._stop_watching(why)
        events, seen = self._take_events()
        full = compare or events.lost
        new_states, affected, everything = await self._source.refresh(events, full, self._states)
        if seen is not None and watcher is not None:
            await self._audit(watcher, seen, new_states, affected if everything else None)
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
        if events.git or full:
            self._generation += 1
        if events.moves:
            self._generation += 1
            for baseline in self._baselines.values():
                baseline.moves.extend(events.moves)
                del baseline.moves[:-1000]

    async def _branch_entry(self, baseline: _Baseline) -> FileChangeEntry | None:
        then, now = baseline.head, self._source.head
        if not isinstance(self._source, GitStates) or then is None or then == now:
            return None
        differ = "; same commit, no file differs"
        if then.commit and now.commit and then.commit != now.commit:
            pair = (then.commit, now.commit)
            if pair not in self._differ_counts:
                if len(self._differ_counts) > 64:
                    self._differ_counts.clear()
                self._differ_counts[pair] = await self._source.changed_between(*pair)
            count = self._differ_counts[pair]
            differ = f"; {count} file{'' if count == 1 else 's'} differ"
        elif then.commit != now.commit:
            differ = ""
        if then.describe() != now.describe():
            sentence = f"branch changed from {then.describe()} to {now.describe()}{differ}"
        else:
            old, new = (then.commit or "none")[:7], (now.commit or "none")[:7]
            sentence = (
                f"branch {now.describe()} moved from {old} to {new} (a commit, pull or reset)"
                f"{differ}"
            )
        return FileChangeEntry("", BRANCH, USER, detail=sentence)

    def _context(self, baseline: _Baseline, include_agent: bool) -> Context:
        buffers: dict[str, tuple[Buffer, str | None]] = {
            rel: (self._buffers[rel], before)
            for rel, before in baseline.buffers.items()
            if rel in self._buffers
        }
        wanted = set(baseline.old) | set(buffers)
        return Context(
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
            blobs=self._source.blobs,
        )

    def _remember_text(self, rel: str, text: str) -> None:
        self._texts.pop(rel, None)
        if len(text) > self._text_cache_chars:
            return
        self._texts[rel] = text
        total = sum(len(t) for t in self._texts.values())
        while self._texts and (
            len(self._texts) > self._text_cache_files or total > self._text_cache_chars
        ):
            _, dropped = self._texts.popitem(last=False)
            total -= len(dropped)

    def _mark_seen(self, rel: str, text: str, key: str) -> None:
        baseline = self._baselines.get(key)
        if baseline is not None:
            baseline.seen.setdefault(rel, set()).update(text_digests(text))

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

    async def _audit(
        self,
        watcher: Watcher,
        seen: Events,
        new: dict[str, State],
        compared: set[str] | None,
    ) -> None:
        """Check the watcher against a full comparison (`compared`: the paths it looked at, or
        None when there was none): what it found changed and the watcher never reported is
        suspect until reported; a suspect the watcher should have reported by now stops the
        tracker from trusting it."""
        for rel in [r for r in self._suspects if r in seen.paths or under_any(r, seen.dirs)]:
            del self._suspects[rel]
        since, drained, heard = watcher.trusted_since()
        if compared is not None:
            candidates = audit.unreported(
                self._states,
                new,
                compared,
                seen,
                watched=lambda rel: not self._rules.excluded(rel, is_dir=False),
            )
            if candidates:
                timed = await asyncio.to_thread(
                    audit.changed_within, self.root, candidates, since, drained
                )
                self._suspects |= timed
        if not self._suspects:
            return
        missed = audit.judge(self._suspects, since, drained, heard, self._in_flight)
        if missed is not None:
            self._suspects.clear()
            await self._stop_watching(GaveUp(f"the file watcher missed a change to {missed}"))
            self._pending.lost = compared is None  # else this comparison was the full one

    def _gave_up_later(self, why: GaveUp) -> None:
        """Watching stopped working after start (a watcher or watchdog thread): stop it."""
        loop = self._loop
        if loop is None or self._closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under us: nothing to tell
            loop.call_soon_threadsafe(self._spawn, self._stop_watching(why))

    async def _stop_watching(self, why: GaveUp) -> None:
        """Stop trusting the watcher: compare once per turn from now on, the next time fully."""
        if self._watcher is None or self._watcher.kind == "none" or self._closed:
            return
        await asyncio.to_thread(self._watcher.stop)
        self._fall_back(why)
        self._pending.lost = True

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                self._log_line(f"lsp-agent: change tracking failed: {finished.exception()!r}")

        task.add_done_callback(done)

    def _fall_back(self, why: GaveUp) -> None:
        self.fallback_reason = why.reason
        remedy = f" ({why.remedy})" if why.remedy else ""
        self._log_once(
            "fallback",
            f"lsp-agent: watching {self.root}: {why.reason}; comparing it once per turn "
            f"instead{remedy}",
        )

    def _log_once(self, key: str, line: str) -> None:
        if key in self._logged:
            return
        self._logged.add(key)
        self._log_line(line)
