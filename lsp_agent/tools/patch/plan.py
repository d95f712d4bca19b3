"""Planning a read patch: every hunk placed exactly once, or one error that lists every miss.

Hunks are placed by the matcher `edit_file` uses too (`matching.locate`: the same forgiving
levels, the same refusals), then narrowed with what only a patch says: a hunk never overlaps
an earlier one; at the exact level, the line its `@@ -l,n` header names wins; `@@` context lines
narrow several candidates to those below them; `*** End of File` (or `\\ No newline`) pins the
hunk to the file's end. Two more rules for several places: k hunks making the same change at
exactly k places are those places in order, and a hunk not found as written may stand for
unchanged lines with `...` lines (its parts are then placed one by one, in order). The new
lines are written by `matching.rewrite` (the file's own context lines, per-line endings,
re-indent at the loose levels). Pure: the caller reads the files (`read_current`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lsp_agent.errors import ToolError
from lsp_agent.tools import matching
from lsp_agent.tools.matching import LEVELS, Ambiguous, FileLines, Level, NotFound, Op
from lsp_agent.tools.outcome import ProposedHunk
from lsp_agent.tools.patch.model import (
    FilePatch,
    Hunk,
    HunkFailure,
    PatchError,
    PlannedChange,
    ReadCurrent,
)

_MAX_LISTED = 10
"""How many candidate line numbers an `ambiguous` message lists."""


def plan_patch(patches: Sequence[FilePatch], read_current: ReadCurrent) -> list[PlannedChange]:
    """The changes the patches make, every hunk placed exactly once, or a `PatchError`.

    `read_current(path)` returns the resolved file and its current text, None when it does not
    exist; a `ToolError` it raises (a refused path, a stale read) counts as that file's failure.
    Several sections for one file apply one after the other. Added files must not exist, updated
    and deleted ones must; a deletion with `-` lines must remove the file's whole text. Files the
    patch leaves unchanged are left out; a patch that changes nothing is refused (`no_change`).
    """
    planner = _Planner(read_current)
    for patch in patches:
        planner.apply(patch)
    return planner.result()


@dataclass
class _File:
    """A file as the planner sees it while the patch's sections apply one after another."""

    path: Path
    rel: str
    original: str | None
    current: str | None
    failed: bool = False
    sections: int = 0
    """How many sections of the patch updated it."""
    hunks: tuple[ProposedHunk, ...] = ()
    """Where the hunks of its one section landed (see `PlannedChange.hunks`)."""


class _Planner:
    def __init__(self, read_current: ReadCurrent) -> None:
        self.read_current = read_current
        self.by_name: dict[str, _File | None] = {}
        self.files: dict[Path, _File] = {}
        self.failures: list[HunkFailure] = []

    def file(self, name: str) -> _File | None:
        """The file named `name`, read once; None (and a failure) when it cannot be read."""
        if name in self.by_name:
            return self.by_name[name]
        try:
            path, text = self.read_current(name)
        except ToolError as error:
            self.fail(name, None, error.reason, error.message)
            self.by_name[name] = None
            return None
        state = self.files.get(path)
        if state is None:
            state = self.files[path] = _File(path, name, text, text)
        self.by_name[name] = state
        return state

    def fail(self, rel: str, hunk: int | None, reason: str, message: str) -> None:
        self.failures.append(HunkFailure(rel, hunk, reason, message))

    def apply(self, patch: FilePatch) -> None:
        state = self.file(patch.path)
        if state is None or state.failed:
            return
        rel = patch.path
        if patch.kind == "add":
            if state.current is not None:
                self.fail(
                    rel,
                    None,
                    "exists",
                    f"{rel} already exists: read it, then change it with *** Update File: "
                    f"{rel} (or a diff from a/{rel})",
                )
                state.failed = True
                return
            content = _added_content(patch, self)
            if content is not None:
                state.current = content
            else:
                state.failed = True
            return
        if state.current is None:
            verb = "delete" if patch.kind == "delete" else "update"
            self.fail(
                rel,
                None,
                "not_found",
                f"cannot {verb} {rel}: the file does not exist; use list_files to find the "
                "right path (a new file is created with *** Add File: or --- /dev/null)",
            )
            state.failed = True
            return
        after: str = state.current
        hunks: tuple[ProposedHunk, ...] = ()
        if patch.hunks:
            try:
                after, hunks = _apply_hunks(state.current, patch.hunks, rel)
            except _HunkFailures as failures:
                self.failures.extend(failures.failures)
                state.failed = True
                return
        if patch.kind == "delete":
            if patch.hunks and after.strip():
                self.fail(
                    rel,
                    None,
                    "not_found",
                    f"{rel}: the lines the patch removes are not the whole file, so it was not "
                    "deleted; read it again, or use *** Delete File: " + rel,
                )
                state.failed = True
                return
            state.current = None
            return
        if patch.move_to is not None:
            target = self.file(patch.move_to)
            if target is None:
                state.failed = True
                return
            if target is not state:
                if target.current is not None:
                    self.fail(
                        patch.move_to,
                        None,
                        "exists",
                        f"cannot move {rel} to {patch.move_to}: that file already exists",
                    )
                    state.failed = True
                    return
                target.current = after
                state.current = None
                return
        state.current = after
        state.sections += 1
        state.hunks = hunks

    def result(self) -> list[PlannedChange]:
        if self.failures:
            raise _patch_error(self.failures)
        changes = [
            PlannedChange(
                state.path,
                state.rel,
                state.original,
                state.current,
                state.hunks if state.sections == 1 and state.current is not None else (),
            )
            for state in self.files.values()
            if state.original != state.current
        ]
        if not changes:
            raise PatchError(
                "apply_patch: the patch changes nothing (every file would stay as it is); "
                "check that the + lines differ from the - lines",
                reason="no_change",
            )
        return changes


def _added_content(patch: FilePatch, planner: _Planner) -> str | None:
    """The text of an added file, or None after recording why it cannot be made."""
    lines: list[str] = []
    no_eol = False
    for number, hunk in enumerate(patch.hunks, 1):
        if any(op != "+" for op, _ in hunk.lines):
            planner.fail(
                patch.path,
                number,
                "bad_patch",
                f"{patch.path} is a new file, so its hunks may only add lines (+)",
            )
            return None
        endings = hunk.endings or ("\n",) * len(hunk.lines)
        lines.extend(
            text + (ending or "\n") for text, ending in zip(hunk.new, endings, strict=True)
        )
        no_eol = hunk.new_no_eol
    if no_eol and lines:
        lines[-1] = lines[-1].rstrip("\r\n")
    return "".join(lines)


class _HunkFailures(Exception):
    def __init__(self, failures: list[HunkFailure]) -> None:
        super().__init__(failures)
        self.failures = failures


class _Miss(Exception):
    """A hunk that cannot be placed: why, in the model's words."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class _Placed:
    """A hunk (or a part of one between `...` lines) at its place in the file."""

    start: int
    end: int
    number: int
    """The model's hunk number (1-based)."""
    hunk: Hunk
    body: tuple[Op, ...]
    """The hunk's lines that apply here (less a stray blank line, or a part between `...`)."""
    endings: tuple[str | None, ...]
    level: Level


@dataclass
class _Placing:
    """One file section's hunks being placed."""

    file: FileLines
    hunks: Sequence[Hunk]
    rel: str
    placed: list[_Placed] = field(default_factory=list)
    done: set[int] = field(default_factory=set)
    """Numbers of hunks already placed (with an identical earlier one)."""

    def where(self, number: int) -> str:
        hunk = self.hunks[number - 1]
        return f"{self.rel}, hunk {number} of {len(self.hunks)} ({hunk.label()})"

    def free(self, start: int, end: int) -> bool:
        return all(not (p.start < end and start < p.end) for p in self.placed)


def _apply_hunks(
    text: str, hunks: Sequence[Hunk], rel: str
) -> tuple[str, tuple[ProposedHunk, ...]]:
    """`text` with every hunk applied, each placed once, and where each landed; raises
    `_HunkFailures`."""
    placing = _Placing(FileLines(text), hunks, rel)
    failures: list[HunkFailure] = []
    for number, hunk in enumerate(hunks, 1):
        if number in placing.done:
            continue
        try:
            _place(placing, number, hunk)
        except _Miss as miss:
            failures.append(HunkFailure(rel, number, miss.reason, miss.message))
    if failures:
        raise _HunkFailures(failures)
    return _rebuild(placing)


def _place(placing: _Placing, number: int, hunk: Hunk) -> None:
    """Place one hunk (and the identical ones after it, when they share its places)."""
    file = placing.file
    where = placing.where(number)
    body = tuple(hunk.lines)
    endings = _endings(hunk)
    if not hunk.old:
        start = _insertion_point(placing, hunk, where)
        placing.placed.append(_Placed(start, start, number, hunk, body, endings, LEVELS[0]))
        return
    old = hunk.old
    at_end = hunk.at_end or hunk.old_no_eol
    try:
        match = matching.locate(file, old, at_end=at_end, narrow=_narrowing(placing, hunk, where))
    except Ambiguous as many:
        twins = [number] + [
            n
            for n in range(number + 1, len(placing.hunks) + 1)
            if n not in placing.done and placing.hunks[n - 1].same_change(hunk)
        ]
        if len(twins) != len(many.places):
            raise _ambiguous(many, where) from None
        # k hunks making the same change at exactly k places: those places, in order.
        for twin, start in zip(twins, many.places, strict=True):
            placing.placed.append(
                _Placed(start, start + len(old), twin, hunk, body, endings, many.level)
            )
            placing.done.add(twin)
        return
    except NotFound:
        _place_parts(placing, number, hunk, where)
        return
    if match.skipped:
        body, endings = _without_first_old_line(body, endings)
    end = match.start + len(old) - match.skipped
    placing.placed.append(_Placed(match.start, end, number, hunk, body, endings, match.level))


def _narrowing(placing: _Placing, hunk: Hunk, where: str) -> matching.Narrow:
    """What a patch knows beyond the lines: earlier hunks' places, the header's line number,
    the `@@` context lines."""

    def narrow(places: list[int], level: Level, size: int) -> list[int]:
        usable = [i for i in places if placing.free(i, i + size)]
        if not usable:
            raise _Miss(
                "overlap",
                f"{where} changes lines that an earlier hunk of this file already changes "
                f"(line {places[0] + 1}): merge the two into one hunk",
            )
        if level.number == 0 and hunk.old_start is not None:
            expected = max(hunk.old_start - 1, 0)
            if expected in usable:
                return [expected]
        if len(usable) > 1 and hunk.anchors:
            floor = _below_anchors(placing.file, hunk.anchors)
            if floor is not None:
                usable = [i for i in usable if i >= floor] or usable
        return usable

    return narrow


def _place_parts(placing: _Placing, number: int, hunk: Hunk, where: str) -> None:
    """A hunk not found as written: its parts between `...` context lines, each placed once
    and in order; else the miss, with the file's most similar lines."""
    old = hunk.old
    parts = matching.split_elisions([text if op == " " else "" for op, text in hunk.lines])
    if parts is None:
        at_end = hunk.at_end or hunk.old_no_eol
        raise _Miss("not_found", _not_found_message(placing.file, old, where, at_end))
    previous_end = 0
    added: list[_Placed] = []
    for first, last in parts:
        body = tuple(hunk.lines[first:last])
        endings = _endings(hunk)[first:last]
        part_old = [text for op, text in body if op != "+"]
        if not part_old:
            if any(op == "+" for op, _ in body):
                raise _Miss(
                    "not_found",
                    f"{where}: a `...` line at the start or end of the hunk leaves no line to "
                    "say where its new lines go: add the unchanged lines next to them",
                )
            continue
        try:
            match = matching.locate(placing.file, part_old, narrow=_narrowing(placing, hunk, where))
        except Ambiguous as many:
            raise _ambiguous(many, where + ", a part between its `...` lines") from None
        except NotFound:
            raise _Miss(
                "not_found",
                _not_found_message(placing.file, part_old, where + ", a part between `...`", False),
            ) from None
        if match.skipped:
            body, endings = _without_first_old_line(body, endings)
        if match.start < previous_end:
            raise _Miss(
                "not_found",
                f"{where}: the parts between its `...` lines are not in this order in the "
                "file; read it again and send them in the file's order",
            )
        end = match.start + len(part_old) - match.skipped
        added.append(_Placed(match.start, end, number, hunk, body, endings, match.level))
        previous_end = end
    placing.placed.extend(added)


def _endings(hunk: Hunk) -> tuple[str | None, ...]:
    return tuple(ending or None for ending in hunk.endings)


def _without_first_old_line(
    body: tuple[Op, ...], endings: tuple[str | None, ...]
) -> tuple[tuple[Op, ...], tuple[str | None, ...]]:
    """The body without its first context or removed line (a stray blank one)."""
    at = next(i for i, (op, _) in enumerate(body) if op != "+")
    return body[:at] + body[at + 1 :], endings[:at] + endings[at + 1 :]


def _insertion_point(placing: _Placing, hunk: Hunk, where: str) -> int:
    """Where a hunk without old lines inserts its lines."""
    file = placing.file
    if not len(file):
        return 0
    if hunk.at_end:
        return len(file)
    if hunk.anchors:
        floor = _below_anchors(file, hunk.anchors, unique=True)
        if floor is not None and placing.free(floor, floor):
            return floor
    start = hunk.old_start
    if (
        start is not None
        and hunk.old_count == 0
        and 0 <= start <= len(file)
        and placing.free(start, start)
    ):
        return start
    raise _Miss(
        "not_found",
        f"{where} only adds lines and says nowhere where they go. To add them at the end of "
        "the file, put a line *** End of File right after them; elsewhere, include a few "
        "unchanged lines (starting with a space) from just before or after the new ones",
    )


def _below_anchors(file: FileLines, anchors: Sequence[str], *, unique: bool = False) -> int | None:
    """The line after the first chain of `anchors` in order; None when they are not all there.

    With `unique`, None also when the last anchor occurs more than once after the others.
    """
    at = 0
    collapsed = file.keys(LEVELS[3])
    for depth, anchor in enumerate(anchors):
        want = matching.collapse(anchor)
        hits = [i for i in range(at, len(collapsed)) if collapsed[i] == want]
        if not hits:
            return None
        if unique and depth == len(anchors) - 1 and len(hits) > 1:
            return None
        at = hits[0] + 1
    return at


def _rebuild(placing: _Placing) -> tuple[str, tuple[ProposedHunk, ...]]:
    """The file's text with every placed hunk applied, and where each model hunk landed."""
    file = placing.file
    out: list[matching.Line] = []
    spans: dict[int, list[int]] = {}  # hunk number → [first, end) in the file, [first, end) out
    cursor = 0
    final: tuple[bool, bool] | None = None
    unsealed: list[int] = []  # where a line may lack its ending: in and just above new lines
    for item in sorted(placing.placed, key=lambda p: (p.start, p.number)):
        out.extend(file.lines(cursor, item.start))
        model = [text for _, text in item.hunk.lines]
        written = matching.rewrite(
            file, item.start, item.body, item.level, model=model, endings=item.endings
        )
        span = spans.setdefault(item.number, [item.start, item.end, len(out), 0])
        span[1] = item.end
        unsealed += range(max(len(out) - 1, 0), len(out) + len(written))
        out.extend(written)
        span[3] = len(out)
        cursor = item.end
        if item.end == len(file):
            final = (item.hunk.old_no_eol, item.hunk.new_no_eol)
    out.extend(file.lines(cursor))
    matching.seal(out, file.ending_near(0), sorted(set(unsealed)))
    if final is not None and out:
        old_no_eol, new_no_eol = final
        had_final = not len(file) or file.endings[-1] != ""
        want_final = False if new_no_eol else True if old_no_eol else had_final
        content, last_ending = out[-1]
        if not want_final:
            out[-1] = (content, "")
        elif not last_ending:
            out[-1] = (content, file.ending_near(len(file)))
    hunks = tuple(
        ProposedHunk(
            number,
            placing.hunks[number - 1].label(),
            first,
            tuple(c + e for c, e in file.lines(first, end)),
            tuple(c + e for c, e in out[out_first:out_end]),
        )
        for number, (first, end, out_first, out_end) in sorted(spans.items())
    )
    return "".join(itertools.chain.from_iterable(out)), hunks


def _ambiguous(many: Ambiguous, where: str) -> _Miss:
    places = many.places
    shown = ", ".join(str(i + 1) for i in places[:_MAX_LISTED])
    if len(places) > _MAX_LISTED:
        shown += f" and {len(places) - _MAX_LISTED} more"
    note = f" ({many.level.how})" if many.level.how else ""
    return _Miss(
        "ambiguous",
        f"{where} matches {len(places)} places{note}, starting at lines {shown}: add "
        "context lines that exist only at the place you mean, or an @@ line with the "
        "function or class above it",
    )


def _not_found_message(file: FileLines, old: list[str], where: str, at_end: bool) -> str:
    message = (
        f"{where}: its context and removed lines (those starting with a space or -) are not "
        "in the file"
        + (" at its end" if at_end else "")
        + "; read the file again and copy them exactly. "
    )
    return message + matching.near_lines(file, old, what="the hunk")


def _patch_error(failures: Sequence[HunkFailure]) -> PatchError:
    if len(failures) == 1:
        head = "apply_patch: nothing was changed, because one part of the patch failed:"
    else:
        head = (
            f"apply_patch: nothing was changed, because {len(failures)} parts of the patch failed:"
        )
    body = "\n".join(f"- {failure.message}" for failure in failures)
    tail = "Fix these and send the whole patch again (every file, not only the failed hunks)."
    return PatchError(f"{head}\n{body}\n{tail}", reason=failures[0].reason, failures=failures)
