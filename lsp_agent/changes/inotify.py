"""watchdog's inotify observer, except that it does not descend into pruned directories.

watchdog watches every subdirectory of a recursive watch and skips silently those it cannot
watch (the watch limit included). This observer walks with `prune` and raises the limit error
during the first walk, so the caller can fall back; after start, running out is reported to the
budget instead of killing watchdog's reader thread.

Linux only, and imported only when the watcher starts there: it subclasses watchdog's inotify
internals, which exist nowhere else and may move in a major release (then the import fails and
the watcher falls back to watchdog's own observer).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyEmitter, InotifyWatchGroup
from watchdog.observers.inotify_c import InotifyFD

LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
"""inotify's "watch limit" and "instance limit" errors."""


class Budget(Protocol):
    """What counts the watches (the watcher's budget)."""

    overflowed: Callable[[], None]
    """Told when the kernel dropped events."""

    def take(self) -> None:
        """Count one more watch; `OSError` (ENOSPC) past the cap."""

    def give_back(self) -> None:
        """Count one watch less."""

    def report(self, error: OSError) -> None:
        """The watches ran out after start."""


@dataclass
class PrunedWatchGroup(InotifyWatchGroup):
    """watchdog's watches of one tree, taken directory by directory, skipping pruned ones."""

    prune: Callable[[bytes, bytes], bool] | None = None
    budget: Budget | None = None

    def _add_all_callbacks(self, path: bytes) -> None:
        starting = not self.is_active
        if path != self.path and self.prune is not None and self.prune(os.path.dirname(path), path):
            return
        try:
            self._watch(path, required=path == self.path)
            if not (self.is_recursive and os.path.isdir(path)):
                return
            for top, dirnames, _ in os.walk(path):
                kept = []
                for name in dirnames:
                    full = os.path.join(top, name)
                    if os.path.islink(full) or (self.prune is not None and self.prune(top, full)):
                        continue
                    if self._watch(full, required=False):
                        kept.append(name)
                dirnames[:] = kept
        except OSError as error:
            if starting:
                raise
            if error.errno in LIMIT_ERRNOS and self.budget is not None:
                self.budget.report(error)

    def _watch(self, path: bytes, *, required: bool) -> bool:
        if self.budget is not None:
            self.budget.take()
        try:
            wd = self._inotify_fd.add_callback(path, self.event_mask, self._callback, self._id)
        except OSError as error:
            if self.budget is not None:
                self.budget.give_back()
            if required or error.errno in LIMIT_ERRNOS:
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
    """watchdog's inotify emitter, with a `PrunedWatchGroup`."""

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
    """watchdog's inotify observer, with a `PrunedEmitter`: `prune(parent, path)` is True for
    a directory not to watch nor descend into; `budget` counts the watches."""

    def __init__(self, prune: Callable[[bytes, bytes], bool], budget: Budget) -> None:
        self._inotify_fd = InotifyFD()
        self._inotify_fd.start()
        super().__init__(PrunedEmitter, inotify_fd=self._inotify_fd, prune=prune, budget=budget)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self._inotify_fd.stop()
        with contextlib.suppress(RuntimeError):
            self._inotify_fd.join()
