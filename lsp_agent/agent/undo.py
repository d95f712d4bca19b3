"""Undoing a whole turn: what each file must become, merged onto what the user did since.

A turn's accepted edits are in its transcript (`applied` events: each file before and after).
`plan_undo` gives, per file the turn changed, the text that restores it — its text before the
turn's first edit, with every change made since the turn's last edit (the user's typing, another
turn) merged on top, 3-way — or why it cannot be restored: the user changed the very lines the
undo would restore. A file the turn created is deleted, one it deleted comes back. Pure: the
caller reads the current texts and proposes the result like any edit.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lsp_agent.tools.rebase import rebase


@dataclass(frozen=True)
class FileUndo:
    """One file of an undo: the text to propose (None: delete it), from the text it has now."""

    path: str
    """Relative to the workspace."""
    current: str | None
    """What the file holds now (None: absent)."""
    restored: str | None
    """What it becomes (None: deleted)."""


@dataclass(frozen=True)
class Refusal:
    """A file the undo leaves alone, and why, in a sentence."""

    path: str
    why: str


@dataclass(frozen=True)
class UndoPlan:
    turn: int
    files: tuple[FileUndo, ...]
    refused: tuple[Refusal, ...]


def undoable_turns(records: Iterable[Mapping[str, Any]]) -> list[int]:
    """The turns with accepted edits, oldest first, leaving out turns already undone (one by
    one, or with others by a rewind)."""
    turns: list[int] = []
    undone: set[int] = set()
    for record in records:
        if record.get("type") != "event":
            continue
        if record.get("kind") == "applied" and record.get("turn") not in turns:
            turns.append(int(record.get("turn", 0)))
        elif record.get("kind") == "undo":
            if isinstance(record.get("undid"), int):
                undone.add(record["undid"])
            undone.update(t for t in record.get("turns") or () if isinstance(t, int))
    return [turn for turn in turns if turn not in undone]


def plan_undo(
    records: Iterable[Mapping[str, Any]],
    turn: int | Collection[int],
    current: Callable[[str], str | None],
) -> UndoPlan:
    """What undoing `turn` proposes, file by file; `current(path)` reads a file as it is now.
    Several turns (a rewind to before the first of them) restore each file to its text before
    the first of those turns that changed it, with what changed after the last merged on top."""
    turns = {turn} if isinstance(turn, int) else set(turn)
    first_before: dict[str, str | None] = {}
    last_after: dict[str, str | None] = {}
    unknown: set[str] = set()
    for record in records:
        if record.get("type") != "event" or record.get("kind") != "applied":
            continue
        if record.get("turn") not in turns:
            continue
        path = str(record.get("path"))
        if record.get("kept") is False:
            unknown.add(path)
            continue
        first_before.setdefault(path, record.get("before"))
        last_after[path] = record.get("after")
    files: list[FileUndo] = []
    refused = [
        Refusal(path, "the file was too large to keep its text in the session") for path in unknown
    ]
    for path, before in first_before.items():
        if path in unknown:
            continue
        after, now = last_after[path], current(path)
        result = _restore(path, before, after, now)
        if isinstance(result, Refusal):
            refused.append(result)
        elif result.restored != now:
            files.append(result)
    return UndoPlan(min(turns, default=0), tuple(files), tuple(refused))


def _restore(
    path: str, before: str | None, after: str | None, now: str | None
) -> FileUndo | Refusal:
    if now == after:
        return FileUndo(path, now, before)
    if before is None:  # the turn created it
        if now is None:
            return FileUndo(path, now, None)
        return Refusal(path, "the turn created it and it was changed since: delete it yourself")
    if after is None:  # the turn deleted it
        if now is None:
            return FileUndo(path, now, before)
        return Refusal(path, "the turn deleted it and a new file is there now")
    if now is None:
        return Refusal(path, "it was deleted since the turn")
    merged = rebase(after, before, now)
    if merged.merged is None:
        lines = ", ".join(
            f"line {c.start}" if c.end <= c.start else f"lines {c.start}-{c.end}"
            for c in merged.conflicts[:6]
        )
        return Refusal(
            path, f"the lines the undo would restore were changed since ({lines or 'nearby'})"
        )
    return FileUndo(path, now, merged.merged)
