"""Where the watches go: one walk of a tree, cut around the folders that are never watched.

watchdog gives every scheduled watch a thread of its own, and a recursive watch takes an inotify
watch on every folder below it, skipped ones included. One watch per folder would cost a thread
per folder (10 000 folders: 10 000 threads, 230 MB, 8 s to start); one recursive watch on the
root would watch `node_modules` and virtualenvs too. So a tree is cut into areas:

- a folder with no skipped folder anywhere below it is one recursive watch, however large;
- a folder with one below it is watched on its own (not recursively), and each folder in it that
  is kept is planned the same way;
- a skipped folder with no folder inside (a `__pycache__`) is left inside a recursive area: its
  events are filtered out, it costs one inotify watch, and cutting around it would cost a thread
  for every Python package.

Symbolic links are neither followed nor counted, as watchdog does not watch them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Area:
    """One watch to schedule."""

    rel: str
    """The folder watched, relative to the walk's base ("" for the base itself)."""
    recursive: bool
    """Whether the watch covers everything below `rel`."""
    dirs: tuple[str, ...]
    """The folders the watch covers, `rel` first: one inotify watch each."""
    children: tuple[str, ...] = ()
    """For a folder watched on its own: its kept folders when it was walked (each planned
    apart), so a folder made between the walk and the watch is found."""


@dataclass(slots=True)
class _Folder:
    """A kept folder met by the walk."""

    rel: str
    """Relative to the base."""
    parent: int
    """Index of the folder it is in (-1 for the top)."""
    blocked: bool = False
    """A skipped folder that has folders in it lies somewhere below."""
    children: list[int] = field(default_factory=list)
    """Indexes of its kept folders."""
    tolerated: list[str] = field(default_factory=list)
    """Its skipped folders that have no folder in them."""


def plan(
    base: Path,
    top: str,
    skip: Callable[[str], bool],
    stopped: Callable[[], bool] = lambda: False,
) -> list[Area]:
    """The areas that watch `base / top` and everything kept below it, parents first.

    `skip(rel)` says whether a folder is neither watched nor walked; `top` itself is kept. An
    empty list when `top` is not a folder or `stopped()` turned true during the walk.
    """
    if not (base / top).is_dir():
        return []
    text = str(base)
    folders = [_Folder(top, -1)]
    index = 0
    while index < len(folders):  # breadth first: a folder comes after the one it is in
        if stopped():
            return []
        folder = folders[index]
        for name in sorted(_folders_in(os.path.join(text, folder.rel))):
            rel = f"{folder.rel}/{name}" if folder.rel else name
            if not skip(rel):
                folder.children.append(len(folders))
                folders.append(_Folder(rel, index))
            elif _has_folder(os.path.join(text, rel)):
                folder.blocked = True
            else:
                folder.tolerated.append(rel)
        index += 1
    for folder in reversed(folders):
        if folder.blocked and folder.parent >= 0:
            folders[folder.parent].blocked = True
    areas: list[Area] = []
    waiting = [0]
    while waiting:
        folder = folders[waiting.pop()]
        if not folder.blocked:
            areas.append(Area(folder.rel, True, tuple(_below(folders, folder))))
            continue
        kept = tuple(folders[child].rel for child in folder.children)
        areas.append(Area(folder.rel, False, (folder.rel,), kept))
        waiting.extend(reversed(folder.children))
    return areas


def kept_folders(base: Path, rel: str, skip: Callable[[str], bool]) -> list[str]:
    """The folders directly in `base / rel` that `skip` keeps."""
    found = (f"{rel}/{name}" if rel else name for name in _folders_in(os.path.join(base, rel)))
    return [child for child in found if not skip(child)]


def _below(folders: list[_Folder], top: _Folder) -> Iterator[str]:
    """`top`, every kept folder below it and the skipped ones they tolerate."""
    waiting = [top]
    while waiting:
        folder = waiting.pop()
        yield folder.rel
        yield from folder.tolerated
        waiting.extend(folders[child] for child in folder.children)


def _folders_in(path: str) -> list[str]:
    """Names of the folders in `path` (links not followed); none when it cannot be read."""
    try:
        with os.scandir(path) as entries:
            return [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _has_folder(path: str) -> bool:
    """Whether `path` holds a folder (a link is none); reads no further than the first."""
    try:
        with os.scandir(path) as entries:
            return any(entry.is_dir(follow_symlinks=False) for entry in entries)
    except OSError:
        return False
