"""Watching a workspace folder through watchdog's public API, trusted only once it is seen working.

- **What is watched** (Linux, inotify): the areas of `plan.py`: a recursive watch on each part of
  the tree with no skipped folder in it, a watch of its own on each folder that has one. The
  git directory is watched apart, for `HEAD`, the index, `packed-refs` (the directory alone)
  and `refs/` or `reftable/` (recursive): branch switches, commits, staging. Elsewhere
  watchdog's native observer watches the root recursively.
- **Later folders**: a kept folder made in a folder watched on its own gets a watch of its own,
  planned the same way, and is reported in `Events.dirs` (so everything below it is compared,
  whatever was written before its watch). A skipped folder inside a recursive area that gains a
  folder (an `npm install` in a sub-project) has that area planned again: the new watches are
  placed first, then the old one goes, so no event falls between. Both run on a worker thread
  of the watcher, never on watchdog's dispatch thread.
- **The budget**: the inotify watches (folders) are counted from the walk and the folder events
  since. Past `max_watches`, past `max_emitters` watches scheduled (watchdog's threads), or
  when `schedule()` meets the kernel's limit (ENOSPC, EMFILE), at start or later, the watcher
  gives up and the tracker compares once per turn: a polled tree of 200 000 files would cost
  tens of seconds of CPU a minute.
- **Trust**: at start a test change (the root's times set to what they are) must come back as
  an event within `PROBE_TIMEOUT_S`, and again after each turn (`probe`); `health()` says
  when the observer's threads died or a probe went unanswered. The tracker also checks each
  full comparison against what was reported (`audit.py`).
- **Events** are filtered and coalesced under a lock in watchdog's thread; the tracker takes
  them all at once (`drain`) on its own loop when it refreshes.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    EventsLostEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
    FileSystemMovedEvent,
)
from watchdog.observers.api import EventEmitter, ObservedWatch

from lsp_agent.changes.ignore import IgnoreRules
from lsp_agent.changes.plan import Area, kept_folders, plan

log = logging.getLogger(__name__)

ObserverKind = Literal["auto", "inotify", "polling", "none"]
"""What the tracker is asked to use; `polling` and `none` watch nothing (one comparison a turn)."""

MAX_EMITTERS = 512
"""Watches scheduled at most: watchdog runs a thread for each (about 23 kB of memory)."""
PROBE_TIMEOUT_S = 2.0
"""How long a test change may take to come back as an event while no other event comes."""
PROBE_PATIENCE_S = 30.0
"""How long it may take while other events keep coming (a busy tree: it waits in line)."""
GIT_WATCHED = ("HEAD", "index", "packed-refs")
"""Files of the git directory whose change can change every path's status."""
GIT_REF_DIRS = ("refs", "reftable")
"""Folders of the git directory that hold the branches (files, or the reftable format)."""
LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
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
    DirAttribEvent,
    EventsLostEvent,
]
"""Events that can change a file's content or existence, a folder's attributes (the probe: no
cost, inotify asks for attribute changes anyway to report modifications) and the kernel's
losses. Opens and reads are left out: the tracker's own reads would wake it."""


class Observing(Protocol):
    """What the watcher needs of an observer: watchdog's `BaseObserver` is one."""

    def schedule(
        self,
        event_handler: FileSystemEventHandler,
        path: str,
        *,
        recursive: bool = False,
        event_filter: list[type[FileSystemEvent]] | None = None,
    ) -> ObservedWatch:
        """Watch `path`; `OSError` when it cannot be watched."""

    def unschedule(self, watch: ObservedWatch) -> None:
        """Stop one watch."""

    def start(self) -> None:
        """Start dispatching events."""

    def stop(self) -> None:
        """Stop every watch and the dispatching."""

    def join(self, timeout: float | None = None) -> None:
        """Wait for the dispatching thread."""

    def is_alive(self) -> bool:
        """Whether the dispatching thread runs."""

    @property
    def emitters(self) -> Collection[EventEmitter]:
        """The threads that read the watches' events."""


ObserverFactory = Callable[[], Observing]
"""Makes the observer (a test passes a double; the default is watchdog's)."""
Placement = tuple[Path, Path | None, Area]
"""An area to watch: the folder its paths are relative to, the git directory it belongs to
(None for the work tree's), the area."""


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
    dropped: set[str] = field(default_factory=set)
    """Folders (also in `dirs`) whose watch was dropped when they went: what it had not
    delivered yet is lost, so everything git tracks below them is looked at too."""


@dataclass(frozen=True)
class GaveUp:
    """Why the watcher stopped watching (the tracker then compares once per turn)."""

    reason: str
    """What happened, for `lspAgent.status`: "the tracker's cap of 20 inotify watches is
    reached"."""
    remedy: str = ""
    """What the user can do about it, if anything."""


@dataclass(eq=False)
class _Watched:
    """One scheduled watch and the folders it covers."""

    path: str
    """The folder watched, absolute."""
    rel: str | None
    """Workspace-relative; None for a watch of the git directory."""
    recursive: bool
    """Whether it covers everything below `path`."""
    dirs: set[str]
    """The folders it covers (one inotify watch each): workspace-relative, absolute for git."""
    children: tuple[str, ...] = ()
    """For a folder watched on its own, its kept folders when planned."""
    git_root: Path | None = None
    """The git directory it belongs to, for a watch of one."""
    watch: ObservedWatch | None = None
    """watchdog's handle, once scheduled."""
    inode: int | None = None
    """The folder's inode when scheduled."""
    gone: bool = False
    """An event said the folder went (deleted, or moved away): its thread may end, and its
    watch is checked (`_verify`)."""
    live: bool = False
    """Counted in the budget: scheduled or being scheduled, not yet unscheduled."""
    replanning: bool = False
    """A plan of its area is asked for already."""


class Watcher:
    """The observer of one workspace folder and its git directory, and the events it saw."""

    def __init__(
        self,
        root: Path,
        rules: IgnoreRules,
        *,
        git_roots: Iterable[Path] = (),
        max_watches: int | None = None,
        max_emitters: int = MAX_EMITTERS,
        gave_up: Callable[[GaveUp], None] = lambda why: None,
        observer_factory: ObserverFactory | None = None,
    ) -> None:
        """`gave_up` is told (from a watcher or watchdog thread) when watching stops working
        after start; `max_watches` caps the inotify watches (as if it were the kernel's
        limit) and `max_emitters` the watches scheduled."""
        self.root = root
        """The workspace folder."""
        self.rules = rules
        """What is left out."""
        self.git_roots = list(dict.fromkeys(git_roots))
        """The git directory and the common one (watched for HEAD, index and refs)."""
        self.max_watches = max_watches
        """At most this many inotify watches (None: the kernel's limit only)."""
        self.max_emitters = max_emitters
        """At most this many watches scheduled."""
        self.kind = "none"
        """`inotify`, `native` or `none`: how the tree is watched now."""
        self.failure: GaveUp | None = None
        """Why the watcher did not start watching, if it was asked to and did not."""
        self.notes: list[str] = []
        """Log lines of the start (worth saying, not a reason to give up)."""
        self._gave_up = gave_up
        """Told once when watching stops working after start."""
        self._factory = observer_factory
        """Makes the observer; None: watchdog's own for the platform."""
        self._observer: Observing | None = None
        """The observer, once made (until stopped)."""
        self._lock = threading.Lock()
        """Guards the inbox, the watches and the counts (watchdog's threads, the worker, the
        tracker's loop)."""
        self._inbox = Events()
        """Events not drained yet."""
        self._last_event = 0.0
        """`time.monotonic()` of the last event kept."""
        self._watched: list[_Watched] = []
        """The watches scheduled (or being scheduled), parents first."""
        self._used = 0
        """inotify watches held: the folders the live watches cover."""
        self._planned = False
        """The tree is cut into areas (inotify), so folder events are followed."""
        self._started = False
        """Start finished: failures are reported to `gave_up` from now on."""
        self._reported = False
        """`gave_up` was told."""
        self._stopped = False
        """`stop()` was called: a start or a plan under way must place nothing more."""
        self._busy = 0
        """Calls into the observer under way in a thread that is not `stop()`'s."""
        self._halted = False
        """The observer was stopped (by `stop()` or by the last busy thread after it)."""
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        """Work for the worker thread: plans and watches of later folders."""
        self._worker: threading.Thread | None = None
        """Runs `_jobs`, once watching."""
        self._limits: _LateLimits | None = None
        """Listens for watchdog's warning about a folder it could not watch later."""
        self._probe_answered = threading.Event()
        """Set when a probe's event came back (or on stop, to end the wait)."""
        self._probe_sent = 0.0
        """`time.monotonic()` of the probe waiting for its event (0: none)."""
        self._can_probe = True
        """The root's times can be set (False after EPERM or EROFS)."""
        self._trusted_since = 0.0
        """Wall-clock time from which every change must be reported: the start, or the last
        loss of events the observer reported."""
        self._drained_at = 0.0
        """Wall-clock time of the last `drain`."""
        self._heard = 0.0
        """`time.monotonic()` of the last event of any kind (kept or not)."""
        self._heard_at = 0.0
        """The same in wall-clock time."""
        self._dead: dict[int, float] = {}
        """Watch threads found ended with no event to explain it yet, and since when: a
        failure once that lasts `PROBE_TIMEOUT_S`."""

    @property
    def watches(self) -> int:
        """inotify watches held now (0 when not watching with inotify)."""
        return self._used if self.kind == "inotify" else 0

    @property
    def last_event(self) -> float:
        """`time.monotonic()` of the last event kept (0 before any)."""
        return self._last_event

    def start(self, kind: ObserverKind) -> None:
        """Start the best observer `kind` allows and probe it (runs in a worker thread). When
        it cannot watch, `failure` says why and nothing is watched."""
        if kind in ("none", "polling"):
            return
        linux = sys.platform.startswith("linux")
        if not linux and kind != "auto":
            return
        try:
            observer = self._factory() if self._factory is not None else _observer(linux)
        except (OSError, ImportError) as error:
            self.failure = GaveUp(f"no file watcher could be made ({error})")
            return
        if observer is None:
            self.failure = GaveUp("watchdog has no native file watcher on this platform")
            return
        with self._lock:
            if self._stopped:
                return
            self._observer = observer
            self._busy += 1
        try:
            self._start(observer, linux)
        finally:
            halt = self._leave()
        if self.failure is not None and not halt:
            with self._lock:
                halt = not self._halted
                self._halted = True
            self._jobs.put(None)
        if halt:
            self._halt(observer)
        if halt or self.failure is not None:
            self.kind = "none"

    def stop(self) -> None:
        """Stop watching; safe to call twice, and while `start` or a plan runs in another
        thread (that thread then stops the observer as soon as its current call returns)."""
        with self._lock:
            self._stopped = True
            observer = self._observer
            halt = observer is not None and self._busy == 0 and not self._halted
            self._halted |= halt
        self._probe_answered.set()
        self._jobs.put(None)
        if halt and observer is not None:
            self._halt(observer)
        self.kind = "none"

    def drain(self) -> Events:
        """The events seen since the last call."""
        with self._lock:
            events, self._inbox = self._inbox, Events()
            self._drained_at = time.time()
        return events

    def health(self) -> GaveUp | None:
        """Why the watcher cannot be trusted any more, if it cannot (cheap: every drain)."""
        observer = self._observer
        if self.kind == "none" or observer is None:
            return None
        if not observer.is_alive():
            return GaveUp("the file watcher's thread stopped")
        with self._lock:
            known = {id(w.watch): w for w in self._watched if w.watch is not None}
        now = time.monotonic()
        dead: dict[int, float] = {}
        for emitter in list(observer.emitters):
            watched = known.get(id(emitter.watch))
            if emitter.is_alive() or watched is None:
                continue
            # A watch whose folder was deleted ends its own thread: no failure, once the event
            # that says so has come (a moment after, from the watch of the folder it was in).
            if watched.gone or _inode(watched.path) != watched.inode:
                self._jobs.put(functools.partial(self._verify, [watched]))
                continue
            dead[id(emitter)] = noticed = self._dead.get(id(emitter), now)
            if now - noticed > PROBE_TIMEOUT_S:
                return GaveUp(f"the file watcher's thread for {emitter.watch.path} stopped")
        self._dead = dead
        sent = self._probe_sent
        if sent and not self._probe_answered.is_set() and self._probe_overdue(sent):
            return GaveUp(
                "the file watcher stopped delivering events (a test change made at the "
                f"end of a turn did not come back within {PROBE_TIMEOUT_S:g} s)"
            )
        return None

    def probe(self) -> None:
        """Make a test change now, unless one is still waiting; `health()` says when it does
        not come back in time."""
        if self.kind == "none" or not self._can_probe:
            return
        if self._probe_sent and not self._probe_answered.is_set():
            return
        self._touch_root()

    def trusted_since(self) -> tuple[float, float, float]:
        """Wall-clock times: since when every change should come as an event (the watcher ran
        and reported no loss since), the last drain, and the last event heard before it."""
        return self._trusted_since, self._drained_at, min(self._heard_at, self._drained_at)

    def on_event(self, event: FileSystemEvent, watched: _Watched) -> None:
        """A watchdog event (watchdog's thread): filter it and keep it."""
        self._heard, self._heard_at = time.monotonic(), time.time()
        paths = [os.fsdecode(event.src_path)]
        if isinstance(event, FileSystemMovedEvent) and event.dest_path:
            paths.append(os.fsdecode(event.dest_path))
        if isinstance(event, DirAttribEvent):
            if paths[0] == str(self.root):
                self._probe_answered.set()
            return
        if watched.git_root is not None:
            self._on_git_event(event, watched, paths)
            return
        rels: list[str | None] = []
        ignore_files = False
        for end, path in enumerate(paths):
            rel = self._rel(path)
            if self._planned and event.is_directory:
                self._follow_folder(event, watched, rel, source=end == 0)
            if rel is None or self.rules.excluded(rel, event.is_directory):
                rels.append(None)
                continue
            rels.append(rel)
            if rel == ".gitignore" or rel.endswith("/.gitignore"):
                folder = rel.rpartition("/")[0]
                self.rules.reload(folder)
                ignore_files = True
                if self._planned:
                    self._jobs.put(functools.partial(self._let_in, folder))
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

    def on_lost(self) -> None:
        """The observer reported lost events (watchdog's thread): compare everything."""
        self._heard, self._heard_at = time.monotonic(), time.time()
        with self._lock:
            self._inbox.lost = True
            self._trusted_since = time.time()

    def _start(self, observer: Observing, linux: bool) -> None:
        """Start the observer, place the watches, probe (`start`'s work)."""
        observer.start()
        self._planned = linux
        areas: list[Placement]
        if linux:
            areas = [(self.root, None, area) for area in self._plan("")]
            for git_root in self.git_roots:
                areas.append((git_root, git_root, Area("", False, ("",))))
                for name in GIT_REF_DIRS:
                    areas += [(git_root, git_root, a) for a in plan(git_root, name, _never)]
        else:
            areas = [(self.root, None, Area("", True, ()))]
            areas += [(git_root, git_root, Area("", True, ())) for git_root in self.git_roots]
        self._trusted_since = time.time()
        if not self._place(areas) or self._stopped:
            return
        self.kind = "inotify" if linux else "native"
        self._started = True
        self._worker = threading.Thread(target=self._work, name="lsp-agent-watch-plans")
        self._worker.daemon = True
        self._worker.start()
        if linux:
            self._limits = _LateLimits(self)
            logging.getLogger("watchdog.observers").addHandler(self._limits)
        self._check_at_start()

    def _check_at_start(self) -> None:
        """The probe of `start`: a watcher that delivers nothing is not trusted."""
        self._touch_root()
        sent = self._probe_sent
        while self._can_probe and not self._probe_answered.wait(PROBE_TIMEOUT_S / 4):
            if self._stopped:
                return
            if self._probe_overdue(sent):
                self.failure = GaveUp(
                    "the file watcher delivered no event for a test change within "
                    f"{PROBE_TIMEOUT_S:g} s of starting"
                )
                return

    def _probe_overdue(self, sent: float) -> bool:
        """Whether the probe sent at `sent` should have come back: its time is up, and no
        other event came lately either (events still coming may be a queue it waits in)."""
        now = time.monotonic()
        if now - sent > PROBE_PATIENCE_S:
            return True
        return now - sent > PROBE_TIMEOUT_S and now - self._heard > PROBE_TIMEOUT_S

    def _touch_root(self) -> None:
        """Set the root's times to what they are: nothing changes but its status change time,
        and inotify reports an attribute change on it."""
        self._probe_answered.clear()
        self._probe_sent = time.monotonic()
        try:
            status = os.stat(self.root)
            os.utime(self.root, ns=(status.st_atime_ns, status.st_mtime_ns))
        except OSError as error:
            self._can_probe = False
            self._probe_sent = 0.0
            self.notes.append(
                f"lsp-agent: cannot check the file watcher of {self.root} with a test change "
                f"({error.strerror}); trusting it, and checking it against each full comparison"
            )

    def _plan(self, rel: str) -> list[Area]:
        return plan(self.root, rel, self.rules.skip_dir, lambda: self._stopped)

    def _place(
        self, areas: list[Placement], replacing: _Watched | None = None, *, recount: bool = False
    ) -> bool:
        """Schedule the areas (`base`, git directory or None, area); then unschedule
        `replacing`, which they cut up. False when the watcher gave up or was stopped.
        `recount`: the folders are still being made (a later folder): count again what each
        recursive watch took."""
        why = self._afford([area for _, _, area in areas], replacing)
        if why is not None:
            self.give_up(why)
            return False
        for base, git_root, area in areas:
            path = str(base / area.rel) if area.rel else str(base)
            dirs = {str(base / rel) if rel else str(base) for rel in area.dirs}
            watched = _Watched(
                path,
                None if git_root is not None else area.rel,
                area.recursive,
                dirs if git_root is not None else set(area.dirs),
                area.children,
                git_root,
            )
            try:
                if not self._schedule(watched):
                    return False
            except OSError as error:
                if error.errno in (errno.ENOENT, errno.ENOTDIR) and area.rel:
                    continue  # gone since the walk: its parent's watch tells
                self.give_up(_kernel_limit(error) if error.errno in LIMIT_ERRNOS else None, error)
                return False
            if git_root is None and not area.recursive:
                self._catch_up(watched)
            elif git_root is None and recount:
                self._recount(watched)
        if replacing is not None:
            self._unschedule(replacing)
        return True

    def _afford(self, areas: list[Area], replacing: _Watched | None) -> GaveUp | None:
        """Why `areas` cannot be watched within the caps, if they cannot."""
        need = sum(len(area.dirs) for area in areas) if self._planned else 0
        with self._lock:
            freed = len(replacing.dirs) if replacing is not None else 0
            used = self._used - freed + need
            emitters = len(self._watched) - (replacing is not None) + len(areas)
        if self.max_watches is not None and used > self.max_watches:
            return _cap(self.max_watches)
        if emitters > self.max_emitters:
            return GaveUp(
                f"the tracker's cap of {self.max_emitters} watches is reached (a watcher thread "
                "for each folder that has a skipped folder below it, and for each folder in it)"
            )
        return None

    def _schedule(self, watched: _Watched) -> bool:
        """Schedule one watch, counted from now; False once stopped."""
        observer = self._observer
        with self._lock:
            if self._stopped or observer is None:
                return False
            self._busy += 1
            watched.live = True
            self._watched.append(watched)
            self._used += len(watched.dirs)
        watched.inode = _inode(watched.path)
        try:
            watched.watch = observer.schedule(
                _Handler(self, watched),
                watched.path,
                recursive=watched.recursive,
                event_filter=_EVENTS,
            )
        except BaseException:
            self._forget(watched)
            raise
        finally:
            halt = self._leave()
        if halt:
            self._halt(observer)
            return False
        return not self._stopped

    def _unschedule(self, watched: _Watched) -> bool:
        """Unschedule one watch; whether it was scheduled."""
        observer = self._observer
        if not self._forget(watched) or observer is None or watched.watch is None:
            return False
        with self._lock:
            if self._stopped:
                return False
            self._busy += 1
        try:
            with contextlib.suppress(KeyError):  # already gone with the observer's stop
                observer.unschedule(watched.watch)
        finally:
            halt = self._leave()
        if halt:
            self._halt(observer)
        return True

    def _forget(self, watched: _Watched) -> bool:
        """Take a watch out of the budget; whether it was in."""
        with self._lock:
            if not watched.live:
                return False
            watched.live = False
            self._watched.remove(watched)
            self._used -= len(watched.dirs)
            return True

    def _leave(self) -> bool:
        """A call into the observer returned: whether the caller must now stop it (`stop()`
        came meanwhile and this was the last call under way)."""
        with self._lock:
            self._busy -= 1
            halt = self._stopped and self._busy == 0 and not self._halted
            self._halted |= halt
        return halt

    def _halt(self, observer: Observing) -> None:
        """Stop an observer and wait for its threads; let go of watchdog's log."""
        limits, self._limits = self._limits, None
        if limits is not None:
            logging.getLogger("watchdog.observers").removeHandler(limits)
        observer.stop()
        with contextlib.suppress(RuntimeError):  # never started
            observer.join(timeout=10)

    def _catch_up(self, watched: _Watched) -> None:
        """A folder watched on its own may have gained folders between the walk and its watch:
        they get theirs."""
        for rel in kept_folders(self.root, watched.rel or "", self.rules.skip_dir):
            if rel not in watched.children:
                self._jobs.put(functools.partial(self._watch_new, rel))

    def give_up(self, why: GaveUp | None, error: OSError | None = None) -> None:
        """Stop trusting the watches: at start, `failure`; later, `gave_up` (once)."""
        if why is None:
            why = GaveUp(f"the file watcher could not watch a folder ({error})")
        if not self._started:
            self.failure = why
            return
        with self._lock:
            if self._reported or self._stopped:
                return
            self._reported = True
        self._gave_up(why)

    def _on_git_event(self, event: FileSystemEvent, watched: _Watched, paths: list[str]) -> None:
        git_root = watched.git_root
        assert git_root is not None
        if watched.recursive and event.is_directory:
            found = [(path, os.path.isdir(path)) for path in paths]
            with self._lock:
                for path, present in found:
                    self._count(watched, path, present=present)
        if any(_is_git_state(path, git_root) for path in paths):
            with self._lock:
                self._inbox.git = True

    def _follow_folder(
        self, event: FileSystemEvent, watched: _Watched, rel: str | None, *, source: bool
    ) -> None:
        """Keep the watches in step with a folder event (watchdog's thread): count what a
        recursive watch took or lost, and ask the worker for the watches to place or drop.
        `source`: `rel` is the event's first path (the one a move leaves)."""
        if rel is None:
            return
        appeared = isinstance(event, DirCreatedEvent) or (
            isinstance(event, DirMovedEvent) and not source
        )
        if rel == watched.rel:
            # The end of a watch's own folder: the folder it is in is watched and tells. Its
            # word is not taken here: watchdog hands an event queued for a watch it no longer
            # has to a new watch of the same folder (a folder deleted and made again at once).
            return
        present = os.path.isdir(os.path.join(self.root, rel))
        if not appeared:
            with self._lock:
                if watched.recursive:
                    self._count(watched, rel, present=present)
                    return
                below = [
                    w
                    for w in self._watched
                    if w.rel is not None and _at_or_below(w.rel, rel) and w.live
                ]
                for went in below:
                    went.gone = True
            if below:
                self._jobs.put(functools.partial(self._verify, below))
            return
        parent = rel.rpartition("/")[0]
        if not watched.recursive:
            if parent == watched.rel and not self.rules.skip_dir(rel):
                self._jobs.put(lambda: self._watch_new(rel))
            return
        inside_skipped = parent != watched.rel and self.rules.excluded(parent, is_dir=True)
        with self._lock:
            self._count(watched, rel, present=present)
            over = self.max_watches is not None and self._used > self.max_watches
            replan = inside_skipped and watched.live and not watched.replanning
            watched.replanning |= replan
        if over and self.max_watches is not None:
            self.give_up(_cap(self.max_watches))
        elif replan:
            self._jobs.put(lambda: self._replan(watched))

    def _count(self, watched: _Watched, folder: str, *, present: bool) -> None:
        """A folder of a recursive watch appeared or went: it counts while it is there (the
        lock is held). What is on disk decides, not the event: an event can come late."""
        before = len(watched.dirs)
        if present:
            watched.dirs.add(folder)
        else:
            watched.dirs.discard(folder)
        if watched.live:
            self._used += len(watched.dirs) - before

    def _work(self) -> None:
        """The worker thread: plans and watches asked for by folder events, one at a time."""
        while (job := self._jobs.get()) is not None:
            if self._stopped:
                return
            try:
                job()
            except Exception:  # a failed plan leaves the watches as they were: say so, go on
                log.exception("lsp-agent: planning the watches of %s failed", self.root)

    def _replan(self, watched: _Watched) -> None:
        """A skipped folder in a recursive area gained a folder: cut the area up again."""
        if not watched.live or watched.rel is None:
            return
        areas = self._plan(watched.rel)
        if areas and areas[0].recursive:  # the folders inside went again: nothing to cut
            watched.replanning = False
            return
        if areas and not self._stopped:
            self._place([(self.root, None, area) for area in areas], watched, recount=True)

    def _recount(self, watched: _Watched) -> None:
        """A recursive watch placed while its folders were being made: watchdog watches what
        it finds, including folders made since the plan's walk, which come as no event. Walk
        again: count them, and cut the area if a skipped folder with folders in it came."""
        if watched.rel is None:
            return
        areas = self._plan(watched.rel)
        if not areas:
            return
        if not areas[0].recursive:
            with self._lock:
                replan = watched.live and not watched.replanning
                watched.replanning |= replan
            if replan:
                self._replan(watched)
            return
        with self._lock:
            if watched.live:
                before = len(watched.dirs)
                watched.dirs |= set(areas[0].dirs)
                self._used += len(watched.dirs) - before

    def _let_in(self, folder: str) -> None:
        """A `.gitignore` in `folder` changed: each folder below it that was skipped and is
        not any more, beside a folder watched on its own, gets its watch. (A folder newly
        ignored keeps its watch; its events are no longer taken.)"""
        with self._lock:
            alone = [
                w.rel
                for w in self._watched
                if w.rel is not None and not w.recursive and w.live and _at_or_below(w.rel, folder)
            ]
        for parent in alone:
            try:
                children = [
                    entry.name
                    for entry in os.scandir(self.root / parent)
                    if entry.is_dir(follow_symlinks=False)
                ]
            except OSError:
                continue
            for name in sorted(children):
                rel = f"{parent}/{name}" if parent else name
                if not self._stopped and not self.rules.skip_dir(rel):
                    self._watch_new(rel)

    def _watch_new(self, rel: str) -> None:
        """A kept folder appeared in a folder watched on its own: watch it, and have
        everything below it compared."""
        path = self.root / rel
        parent = rel.rpartition("/")[0]
        with self._lock:
            same = [w for w in self._watched if w.rel == rel]
        self._verify(same)  # a watch of the folder that was there before goes first
        with self._lock:
            watches = [(w.rel, w.recursive) for w in self._watched if w.rel is not None]
        parent_alone = any(top == parent and not recursive for top, recursive in watches)
        covered = any(
            top == rel or (recursive and _at_or_below(rel, top)) for top, recursive in watches
        )
        if covered or not parent_alone or path.is_symlink() or not path.is_dir():
            return
        if self._place([(self.root, None, area) for area in self._plan(rel)], recount=True):
            with self._lock:
                self._inbox.dirs.add(rel)
                self._last_event = time.monotonic()

    def _verify(self, suspects: list[_Watched]) -> None:
        """An event said these watches' folders went: unschedule each whose folder did go
        (its thread ended: deleted) or is not the one at its path any more (moved away, or
        replaced); a folder made again at the path gets a watch of its own.

        The event alone does not decide: watchdog hands an event queued for a watch it no
        longer has to a new watch of the same folder and settings (a folder deleted and made
        again at once), and that new watch must stay.
        """
        observer = self._observer
        if observer is None:
            return
        alive = {id(e.watch) for e in list(observer.emitters) if e.is_alive()}
        went = [
            w
            for w in suspects
            if w.live and (id(w.watch) not in alive or _inode(w.path) != w.inode)
        ]
        dropped = {w.rel for w in went if self._unschedule(w) and w.rel}
        if not dropped:
            return
        with self._lock:
            self._inbox.dirs |= dropped
            self._inbox.dropped |= dropped
            self._last_event = time.monotonic()
        for rel in sorted(dropped):
            if (self.root / rel).is_dir():
                self._watch_new(rel)

    def _rel(self, path: str) -> str | None:
        root = str(self.root)
        if path == root or not path.startswith(root + os.sep):
            return None
        rel = path[len(root) + 1 :]
        return rel if os.sep == "/" else rel.replace(os.sep, "/")

    def needs(self, path: str) -> bool:
        """Whether the folder at `path` is one the watcher must watch: in the workspace and not
        left out (a folder of `node_modules` is not, even before its area is cut), or the git
        directory's."""
        if any(path == str(top) or path.startswith(str(top) + os.sep) for top in self.git_roots):
            return True
        rel = self._rel(path)
        return path == str(self.root) or (rel is not None and not self.rules.excluded(rel, True))


def watch_limit(max_watches: int | None) -> int | None:
    """The cap on inotify watches in effect: `max_watches`, else the kernel's (Linux)."""
    if max_watches is not None:
        return max_watches
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_watches").read_text().strip())
    except (OSError, ValueError):
        return None


class _Handler(FileSystemEventHandler):
    """Hands every watchdog event of one watch to the watcher."""

    def __init__(self, watcher: Watcher, watched: _Watched) -> None:
        super().__init__()
        self.watcher = watcher
        """Who keeps the events."""
        self.watched = watched
        """The watch whose events these are."""

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, EventsLostEvent):
            return  # on_events_lost has it
        try:
            self.watcher.on_event(event, self.watched)
        except Exception:  # never kill watchdog's thread: a lost event is better than none later
            log.exception("lsp-agent: handling a file event failed")

    def on_events_lost(self, event: EventsLostEvent) -> None:
        self.watcher.on_lost()


class _LateLimits(logging.Handler):
    """watchdog's warning that a folder made later could not be watched (the inotify limit,
    documented in its 7.1.1 changelog): the watcher gives up instead of missing that folder."""

    def __init__(self, watcher: Watcher) -> None:
        super().__init__(logging.WARNING)
        self.watcher = watcher
        """Told when the warning is about its tree."""

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        found = [*args, record.exc_info[1] if record.exc_info else None]
        errors = [e for e in found if isinstance(e, OSError) and e.errno in LIMIT_ERRNOS]
        paths = [os.fsdecode(a) for a in args if isinstance(a, str | bytes)]
        if errors and any(self.watcher.needs(path) for path in paths):
            self.watcher.give_up(_kernel_limit(errors[0]))


def _observer(linux: bool) -> Observing | None:
    """watchdog's observer for the platform: inotify's on Linux, else the native one (None when
    watchdog would poll, which costs too much on a large tree)."""
    if linux:
        from watchdog.observers.inotify import InotifyObserver

        return InotifyObserver()
    from watchdog.observers import Observer
    from watchdog.observers.polling import PollingObserver

    native = Observer()
    return None if isinstance(native, PollingObserver) else native


def _cap(cap: int) -> GaveUp:
    return GaveUp(f"the tracker's cap of {cap} inotify watches is reached")


def _kernel_limit(error: OSError) -> GaveUp:
    """Which kernel limit an inotify error means, in the user's words."""
    if error.errno == errno.ENOSPC:
        limit = watch_limit(None)
        return GaveUp(
            f"the inotify watch limit (fs.inotify.max_user_watches = {limit}) is reached",
            "raise the limit to watch it",
        )
    return GaveUp(
        "the inotify instance limit (fs.inotify.max_user_instances) is reached",
        "raise the limit to watch it",
    )


def _never(rel: str) -> bool:
    return False


def _inode(path: str) -> int | None:
    """The inode of the folder at `path`; None when there is none."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _at_or_below(rel: str, top: str) -> bool:
    return not top or rel == top or rel.startswith(top + "/")


def _is_git_state(path: str, git_root: Path) -> bool:
    text = str(git_root)
    if not path.startswith(text + os.sep):
        return False
    inside = path[len(text) + 1 :].replace(os.sep, "/")
    return inside in GIT_WATCHED or inside.split("/", 1)[0] in GIT_REF_DIRS
