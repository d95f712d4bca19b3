"""Rebase an edit planned against an older text onto the text the user has now.

The model plans `edit_file` against the text it read (the *base*); by the time the edit is sent,
the user may have typed in the buffer or saved over the file (the *current* text). `rebase` runs a
line-based 3-way merge (`merge3`: base = text at plan time, ours = the planned text, theirs = the
current text). A clean merge gives the text to propose against the current version; a change of
the user's that touches or borders the lines the edit changes is a conflict, reported line by line
so the model can re-read and redo its edit. Pure: no I/O.

Guarantees:

- a hunk of the edit lands only where its context (the `CONTEXT_LINES` lines either side, as a
  unified diff shows them) is still what it was planned against: a change of the user's on the
  same lines or within that context is a conflict, stricter than git's merge (which only refuses
  overlapping or adjacent changes), as `patch` without fuzz would be;
- a hunk whose context now appears more often in the current text than it did in the base (the
  user pasted a copy of that place) is refused rather than guessed;
- line endings are those of the lines taken: unchanged lines keep the current text's, lines the
  model wrote keep the planned text's (which `plan_edit` wrote in the file's own line endings).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import merge3

from lsp_agent.text import split_lines, unique_anchors

CONTEXT_LINES = 3
"""Lines either side of a hunk that must not have become ambiguous in the current text."""
SHOWN_LINES = 12
"""How many lines of each side a conflict shows the model at most."""


@dataclass(frozen=True)
class Conflict:
    """A place where the user's change and the planned edit overlap, or where the edit's
    surroundings became ambiguous."""

    start: int
    """First line (1-based) of the user's version in the current text."""
    end: int
    """Last line (1-based, inclusive); `end == start - 1` when the user deleted the lines."""
    base: tuple[str, ...]
    """The lines as they were when the edit was planned."""
    planned: tuple[str, ...]
    """What the edit wanted there."""
    current: tuple[str, ...]
    """What the user has there now."""
    why: str = "overlap"
    """`overlap` (both changed the same lines), `context` (the user changed lines within
    `CONTEXT_LINES` of the edit) or `ambiguous` (the user duplicated the lines around the
    edit, so where it belongs can no longer be told)."""


@dataclass(frozen=True)
class RebaseResult:
    """The outcome of `rebase`: the merged text, or the conflicts."""

    merged: str | None
    """The text to propose against the current version; None when there is a conflict."""
    conflicts: tuple[Conflict, ...] = ()
    user_lines: tuple[tuple[int, int], ...] = ()
    """Where the user's own changes are in the current text: 1-based (first, last) lines,
    `last == first - 1` for a deletion before `first`."""

    @property
    def clean(self) -> bool:
        return self.merged is not None

    def describe(self, path: str) -> str:
        """The message for the model when the merge failed: what the user changed, where."""
        if self.merged is not None:
            where = ", ".join(
                f"line {a}" if a == b else f"lines {a}-{b}" if b > a else f"before line {a}"
                for a, b in self.user_lines[:10]
            )
            return (
                f"{path} changed since you read it (the user edited "
                f"{where or 'it'}); your edit was applied on top of their text, at the place "
                "you planned it"
            )
        parts = [
            f"not proposed — {path} changed after you read it (the user edited it), on the "
            "lines your edit changes or next to them. Nothing was changed. The user's lines:"
        ]
        for conflict in self.conflicts:
            parts.append(_describe_conflict(conflict))
        parts.append(
            "Read the file again and redo the edit against its current text; keep the user's "
            "changes."
        )
        return "\n".join(parts)


def rebase(base: str, planned: str, current: str) -> RebaseResult:
    """Replay the change base → planned onto `current` with a 3-way merge.

    Clean: `merged` is the current text with the planned change in it. Conflict: `merged` is
    None and `conflicts` says, in the current text's line numbers, what the user changed.
    """
    if current == base or planned == current:
        return RebaseResult(planned if current == base else current)
    if planned == base:
        return RebaseResult(current)
    base_lines, planned_lines, current_lines = (
        split_lines(base),
        split_lines(planned),
        split_lines(current),
    )
    merger = merge3.Merge3(
        base_lines, planned_lines, current_lines, sequence_matcher=PatienceMatcher
    )
    out: list[str] = []
    conflicts: list[Conflict] = []
    user: list[tuple[int, int]] = []
    iz = ia = ib = 0
    for zmatch, zend, amatch, aend, bmatch, bend in merger.find_sync_regions():
        z_part, a_part, b_part = (
            base_lines[iz:zmatch],
            planned_lines[ia:amatch],
            current_lines[ib:bmatch],
        )
        if a_part or b_part:
            if a_part in (b_part, z_part):
                if b_part != z_part and a_part == z_part:
                    user.append((ib + 1, bmatch))
                out.extend(b_part)
            elif b_part == z_part:
                if not _context_holds(base_lines, current_lines, iz, zmatch, ib, bmatch):
                    conflicts.append(
                        _context_conflict(base_lines, current_lines, a_part, iz, zmatch, ib, bmatch)
                    )
                elif _ambiguous(base_lines, current_lines, iz, zmatch):
                    conflicts.append(
                        Conflict(
                            ib + 1,
                            bmatch,
                            tuple(z_part),
                            tuple(a_part),
                            tuple(b_part),
                            why="ambiguous",
                        )
                    )
                out.extend(a_part)
            else:
                conflicts.append(
                    Conflict(ib + 1, bmatch, tuple(z_part), tuple(a_part), tuple(b_part))
                )
        out.extend(current_lines[bmatch:bend])
        iz, ia, ib = zend, aend, bend
    if conflicts:
        return RebaseResult(None, tuple(conflicts), tuple(user))
    return RebaseResult("".join(out), (), tuple(user))


def _context_holds(
    base: Sequence[str], current: Sequence[str], iz: int, zend: int, ib: int, bend: int
) -> bool:
    """Whether the `CONTEXT_LINES` lines around base[iz:zend] are still around current[ib:bend].

    These are the lines a unified diff of the edit would show as its context: once the user
    changed one of them, the hunk is not applied (as `patch` without fuzz would not).
    """
    before = min(CONTEXT_LINES, iz)
    after = min(CONTEXT_LINES, len(base) - zend)
    if ib < before or len(current) - bend < after:
        return False
    return list(current[ib - before : ib]) == list(base[iz - before : iz]) and list(
        current[bend : bend + after]
    ) == list(base[zend : zend + after])


def _context_conflict(
    base: Sequence[str],
    current: Sequence[str],
    planned: Sequence[str],
    iz: int,
    zend: int,
    ib: int,
    bend: int,
) -> Conflict:
    """The conflict for a hunk whose context the user changed: the neighbourhood, both ways."""
    b_start = max(0, ib - CONTEXT_LINES)
    b_end = min(len(current), bend + CONTEXT_LINES)
    z_start = max(0, iz - CONTEXT_LINES)
    z_end = min(len(base), zend + CONTEXT_LINES)
    return Conflict(
        b_start + 1,
        b_end,
        tuple(base[z_start:z_end]),
        (*base[z_start:iz], *planned, *base[zend:z_end]),
        tuple(current[b_start:b_end]),
        why="context",
    )


def _ambiguous(base: Sequence[str], current: Sequence[str], start: int, end: int) -> bool:
    """Whether base[start:end] with its context appears more often in `current` than in `base`.

    That happens when the user pasted a copy of the place the edit was planned at: the merge
    would pick one copy by position, and it may be the wrong one.
    """
    anchor = base[max(0, start - CONTEXT_LINES) : end + CONTEXT_LINES]
    if not anchor:
        return False
    return _count(current, anchor) > _count(base, anchor)


def _count(lines: Sequence[str], needle: Sequence[str]) -> int:
    """Occurrences of the run `needle` in `lines`, comparing lines without their endings."""
    want = [line.rstrip("\r\n") for line in needle]
    have = [line.rstrip("\r\n") for line in lines]
    size = len(want)
    first = want[0]
    return sum(
        1 for i in range(len(have) - size + 1) if have[i] == first and have[i : i + size] == want
    )


def _describe_conflict(conflict: Conflict) -> str:
    if conflict.end < conflict.start:
        where = f"- the user deleted the lines before line {conflict.start}"
    elif conflict.end == conflict.start:
        where = f"- line {conflict.start} now reads:"
    else:
        where = f"- lines {conflict.start}-{conflict.end} now read:"
    if conflict.why == "ambiguous":
        where = (
            f"- near line {conflict.start}: the user copied the lines around your edit, so it "
            "is no longer clear which copy to change"
        )
        return where
    if conflict.why == "context":
        where = where.replace("- ", "- the user changed lines next to your edit; ", 1)
    lines = [where]
    lines.extend(_quote(conflict.current, conflict.start))
    lines.append("  where you planned to change:")
    lines.extend(_quote(conflict.base, None))
    lines.append("  into:")
    lines.extend(_quote(conflict.planned, None))
    return "\n".join(lines)


def _quote(lines: Sequence[str], first: int | None) -> list[str]:
    if not lines:
        return ["    (nothing)"]
    shown = [
        (f"    {first + i}| " if first is not None else "    | ") + line.rstrip("\r\n")
        for i, line in enumerate(lines[:SHOWN_LINES])
    ]
    if len(lines) > SHOWN_LINES:
        shown.append(f"    … {len(lines) - SHOWN_LINES} more lines")
    return shown


class PatienceMatcher:
    """Matching blocks of two line lists, for `merge3` (same interface as difflib's).

    Lines found exactly once on each side are matched first (patience diff) and difflib runs
    only between them, without its "popular line" heuristic: code is full of repeated lines
    (blank lines, closing braces) that autojunk would throw away and that a plain quadratic
    match would align badly.
    """

    def __init__(
        self,
        isjunk: Callable[[str], bool] | None = None,
        a: Sequence[str] = (),
        b: Sequence[str] = (),
        autojunk: bool = False,
    ) -> None:
        self.a = a
        self.b = b

    def get_matching_blocks(self) -> list[tuple[int, int, int]]:
        a, b = self.a, self.b
        blocks: list[tuple[int, int, int]] = []
        prev_i = prev_j = 0
        for i, j in [*unique_anchors(a, b), (len(a), len(b))]:
            if prev_i < i and a[prev_i:i] == b[prev_j:j]:
                blocks.append((prev_i, prev_j, i - prev_i))  # equal between anchors: the usual
            elif prev_i < i and prev_j < j:
                matcher = difflib.SequenceMatcher(None, a[prev_i:i], b[prev_j:j], autojunk=False)
                for x, y, size in matcher.get_matching_blocks():
                    if size:
                        blocks.append((prev_i + x, prev_j + y, size))
            if i < len(a):
                blocks.append((i, j, 1))
            prev_i, prev_j = i + 1, j + 1
        merged: list[tuple[int, int, int]] = []
        for x, y, size in blocks:
            if merged and merged[-1][0] + merged[-1][2] == x and merged[-1][1] + merged[-1][2] == y:
                last = merged.pop()
                merged.append((last[0], last[1], last[2] + size))
            else:
                merged.append((x, y, size))
        merged.append((len(a), len(b), 0))
        return merged
