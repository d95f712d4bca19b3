"""A full comparison made while watching, checked against what the watcher reported.

The tracker compares everything now and then while a watcher runs (after the kernel dropped
events, when HEAD moved without a known commit, past too many paths). A file whose content that
comparison finds changed, that the watcher never reported, and that changed after the watcher
was last known to deliver everything (its start, or the last loss it reported) is a suspect.
A suspect the watcher reports later was an event on its way (a big checkout queues thousands);
one still unreported once the watcher has gone quiet shows a watcher that misses events: the
tracker then stops trusting it. Only content counts: a state can change without any file event
when the index or HEAD moves (`git add`, a commit), or when an ignore file changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from lsp_agent.changes.compare import State
from lsp_agent.changes.content import Files
from lsp_agent.changes.ignore import under_any
from lsp_agent.changes.watch import Events


def unreported(
    old: dict[str, State],
    new: dict[str, State],
    affected: Iterable[str],
    seen: Events,
    *,
    watched: Callable[[str], bool],
) -> list[str]:
    """Paths whose content changed from `old` to `new` (the states of the `affected` paths) that
    the watcher did not report in `seen` and is meant to see (`watched`), sorted."""
    found = []
    for rel in affected:
        before, after = old.get(rel), new.get(rel)
        if before == after or not _content_changed(before, after, seen):
            continue
        if rel in seen.paths or under_any(rel, seen.dirs) or not watched(rel):
            continue
        found.append(rel)
    return sorted(found)


def changed_within(
    root: Path, paths: Iterable[str], since: float, until: float
) -> dict[str, float]:
    """Each of `paths` whose file changed (its status change time, wall clock) after `since`
    and before `until`, with that time; reads the files' status (a worker thread). Deleted
    files cannot be timed and are passed over."""
    files = Files(root)
    found: dict[str, float] = {}
    for rel in paths:
        path = files.inside(rel)
        try:
            changed = os.lstat(path).st_ctime if path is not None else None
        except OSError:
            continue
        if changed is not None and since < changed < until:
            found[rel] = changed
    return found


def judge(
    suspects: dict[str, float], since: float, drained: float, heard: float, in_flight: float
) -> str | None:
    """The first suspect (path → when it changed) the watcher should have reported by the
    drain at `drained`, if any: it had heard nothing for `in_flight` seconds then (no queue of
    events it could still be waiting in), and the change is older than that and came after
    `since` (no loss the watcher reported since covers it)."""
    if drained - heard < in_flight:
        return None
    late = [rel for rel, changed in suspects.items() if since < changed < drained - in_flight]
    return min(late) if late else None


def _content_changed(before: State | None, after: State | None, seen: Events) -> bool:
    """Whether the file's bytes differ between two states of its path (None: clean, or no file).

    A huge file is known by size and time, which a `touch` changes: it never counts.
    """
    if before is not None and after is not None:
        if _stamped(before) or _stamped(after):
            return False
        return before.digest != after.digest
    state = after if after is not None else before
    assert state is not None
    if state.code in ("", "??"):  # a file outside git or untracked appeared or went
        return not seen.ignore_files
    if seen.git or _stamped(state):  # what "clean" means moved with HEAD or the index
        return False
    return state.digest != state.base_blob


def _stamped(state: State) -> bool:
    return state.digest is not None and state.digest.startswith("stat:")
