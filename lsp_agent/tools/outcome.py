"""What became of each hunk of an edit once the editor said it applied it.

An editor may apply something other than what was proposed: VS Code's Refactor Preview lets the
user untick hunks, a user may type over the new text before the check, and some clients answer
`applied: true` for edits they skipped. `hunk_outcomes(before, proposed, landed, hunks)` says,
per hunk: accepted, rejected, or modified by the user (with the user's version as a small
diff); `LandingReport.message(path)` is what the model is told.

The hunks are the model's own when it sent them (`apply_patch`: `ProposedHunk`, placed where
the patch put them), else the hunks of the diff the editor showed (`edit_file`). The landed
text is first read as the text before with each hunk either applied or left out, the
unchanged lines between hunks compared as they are: a file full of repeated lines cannot shift
a hunk onto its neighbour's lines. Only when the user also typed, so that no such reading
exists, does a 3-way alignment (base = before, ours = proposed, theirs = landed) decide. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import merge3

from lsp_agent.text import changed_lines, equal_ends, split_lines, unified_diff
from lsp_agent.tools.rebase import PatienceMatcher
from lsp_agent.tools.results import HunkFact

ACCEPTED = "accepted"
REJECTED = "rejected"
MODIFIED = "modified"
USER = "user"
"""Lines the user changed that no hunk proposed (`HunkFact.status`)."""

DIFF_LINES = 20
"""A modified hunk's diff is shown only up to this many lines."""


@dataclass(frozen=True)
class ProposedHunk:
    """One hunk as the model sent it, where it was placed."""

    number: int
    """1-based, as the model numbered it within the file's section."""
    label: str
    """How the model can tell which one it is (`@@ def greet():`, `starting 'x = 1'`)."""
    start: int
    """The first line (0-based) it replaces in the text before."""
    old: tuple[str, ...]
    """The lines it replaces, with their endings."""
    new: tuple[str, ...]
    """The lines it puts there, with their endings."""


@dataclass(frozen=True)
class HunkOutcome:
    """One hunk of the proposal and what landed in its place."""

    number: int
    """1-based, in the order of the proposal's hunks (several when the user's change joined
    neighbouring hunks: `last_number` is then larger)."""
    status: str
    """`accepted`, `rejected` or `modified`."""
    start: int
    """First line (1-based) of the hunk in the landed text."""
    end: int
    """Last line (1-based, inclusive); `start - 1` when the hunk landed as nothing."""
    before: str
    """The lines the hunk replaced."""
    proposed: str
    """The lines the hunk proposed."""
    landed: str
    """The lines there now."""
    last_number: int = 0
    label: str = ""
    """The model's name for the hunk, when the model sent hunks (`apply_patch`)."""

    @property
    def numbers(self) -> str:
        if self.last_number > self.number:
            return f"hunks {self.number}-{self.last_number}"
        return f"hunk {self.number}"

    def user_diff(self) -> str:
        """For a modified hunk: the user's version against the proposed one, hunks only."""
        diff = unified_diff("hunk", self.proposed, self.landed)
        lines = diff.splitlines()[2:]
        if len(lines) > DIFF_LINES:
            lines = [*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more diff lines"]
        return "\n".join(lines)


@dataclass(frozen=True)
class OtherChange:
    """A change in the landed text outside every hunk of the proposal (the user typed)."""

    start: int
    """First line (1-based) in the landed text."""
    end: int
    """Last line (inclusive); `start - 1` for a deletion."""


@dataclass(frozen=True)
class LandingReport:
    """Per-hunk outcome of one applied edit to one file."""

    hunks: tuple[HunkOutcome, ...]
    others: tuple[OtherChange, ...] = ()
    total: int = 0
    """How many hunks the proposal had."""

    @property
    def exact(self) -> bool:
        """Everything proposed landed and nothing else changed."""
        return not self.others and all(h.status == ACCEPTED for h in self.hunks)

    @property
    def accepted(self) -> int:
        return sum(1 for h in self.hunks if h.status == ACCEPTED)

    def message(self, path: str) -> str:
        """What the model is told about the edit to `path` (the user's history shows the same):
        each hunk by what it does (inserted, removed, replaced which lines of the file as it is
        now) and what became of it (applied, not applied by the user, changed by the user
        before applying)."""
        total = self.total or max((h.last_number or h.number for h in self.hunks), default=0)
        if self.exact:
            return f"applied: {path} (all {total} hunks as proposed)"
        lines = [f"{self._head(path, total)}:"]
        for hunk in self.hunks:
            name = hunk.numbers + (f" ({hunk.label})" if hunk.label else "")
            lines.append(f"- {name}: {_what_became(hunk)}")
            if hunk.status == MODIFIED:
                lines.extend("  " + line for line in hunk.user_diff().splitlines())
        for other in self.others:
            lines.append(f"- {_span(other.start, other.end)}: also changed by the user")
        lines.append(
            f"The file as it is now is what counts: read {path} again before editing it further, "
            "and do not redo hunks the user did not apply unless they ask."
        )
        return "\n".join(lines)

    def facts(self, path: str) -> tuple[HunkFact, ...]:
        """Each hunk, and each change of the user's beside them, as the editor shows them."""
        facts = [
            HunkFact(path, h.numbers, h.status, _what_became(h).split(": ", 1)[0], h.label)
            for h in self.hunks
        ]
        facts += [HunkFact(path, "", USER, _span(o.start, o.end)) for o in self.others]
        return tuple(facts)

    def short(self) -> str:
        """The outcome in a few words (the edit's line in the editor's history)."""
        total = self.total or max((h.last_number or h.number for h in self.hunks), default=0)
        modified = sum(1 for h in self.hunks if h.status == MODIFIED)
        if self.exact:
            return "applied"
        if not self.hunks or all(h.status == REJECTED for h in self.hunks):
            return "not applied by the user"
        if self.accepted == len(self.hunks):
            return "applied; the user also changed other lines"
        said = f"{self.accepted} of {total} hunks applied"
        return said + (f", {modified} changed by the user" if modified else "")

    def _head(self, path: str, total: int) -> str:
        if not self.hunks or all(h.status == REJECTED for h in self.hunks):
            if total <= 1:
                return f"the user did not apply your edit to {path}"
            return f"the user applied none of the {total} hunks of your edit to {path}"
        if self.accepted == len(self.hunks):
            return (
                f"your edit to {path} was applied as proposed, and the user changed other lines too"
            )
        modified = sum(1 for h in self.hunks if h.status == MODIFIED)
        parts = [f"{self.accepted} of {total} hunks applied as proposed"]
        if modified:
            parts.append(f"{modified} changed by the user before applying")
        return f"the user applied part of your edit to {path} ({', '.join(parts)})"


def hunk_outcomes(
    before: str, proposed: str, landed: str, hunks: Sequence[ProposedHunk] = ()
) -> LandingReport:
    """Compare what landed with what was proposed, per hunk: the model's `hunks` when they
    still describe `before` → `proposed`, else the hunks of the diff between the two."""
    base, ours, theirs = split_lines(before), split_lines(proposed), split_lines(landed)
    placed = _placed(base, ours, hunks) or _diff_hunks(base, ours)
    report = _read_as_subset(base, theirs, placed)
    if report is None:
        report = _aligned(base, ours, theirs, placed)
    return report


def _placed(
    base: list[str], ours: list[str], hunks: Sequence[ProposedHunk]
) -> list[ProposedHunk] | None:
    """The model's hunks where they are in `base` (moved down or up when the user's typing
    was merged in above them), checked against `ours`; None when they do not describe it."""
    if not hunks:
        return None
    out: list[ProposedHunk] = []
    low = delta = 0
    for hunk in sorted(hunks, key=lambda h: h.start):
        old, new = list(hunk.old), list(hunk.new)
        size = len(old)
        start: int | None = None
        if (
            hunk.start >= low
            and _fits(base, ours, hunk.start, delta, old, new)
            and base[low : hunk.start] == ours[low + delta : hunk.start + delta]
        ):
            start = hunk.start
        else:
            # The lines between hunks are equal on both sides: walk them until the hunk fits.
            at = low
            while at + size <= len(base):
                if _fits(base, ours, at, delta, old, new):
                    start = at
                    break
                if at + delta >= len(ours) or base[at] != ours[at + delta]:
                    break
                at += 1
        if start is None:
            return None
        out.append(ProposedHunk(hunk.number, hunk.label, start, hunk.old, hunk.new))
        low = start + size
        delta += len(new) - size
    if base[low:] != ours[low + delta :]:
        return None
    return out


def _fits(
    base: list[str], ours: list[str], start: int, delta: int, old: list[str], new: list[str]
) -> bool:
    """Whether `old` is at `start` in `base` and `new` at `start + delta` in `ours`."""
    return (
        base[start : start + len(old)] == old
        and ours[start + delta : start + delta + len(new)] == new
    )


def _diff_hunks(base: list[str], ours: list[str]) -> list[ProposedHunk]:
    """The hunks of the line diff `before` → `proposed`, found as the editor's text edits are
    (equal head and tail lines first, then the middle), so that the hunks a user can untick
    are these."""
    head, tail = equal_ends(base, ours)
    middle_a, middle_b = base[head : len(base) - tail], ours[head : len(ours) - tail]
    return [
        ProposedHunk(
            number,
            "",
            head + i1,
            tuple(base[head + i1 : head + i2]),
            tuple(ours[head + j1 : head + j2]),
        )
        for number, (i1, i2, j1, j2) in enumerate(changed_lines(middle_a, middle_b), 1)
    ]


def _read_as_subset(
    base: list[str], theirs: list[str], hunks: Sequence[ProposedHunk]
) -> LandingReport | None:
    """The landed text read as `base` with each hunk applied or left out; None when it is not
    one (the user typed something else too). Where both readings fit, a hunk counts as
    accepted: the editor said it applied the edit."""
    gaps: list[tuple[int, int]] = []
    low = 0
    for hunk in hunks:
        gaps.append((low, hunk.start))
        low = hunk.start + len(hunk.old)
    gaps.append((low, len(base)))
    # reach[i]: landed positions where the gap before hunk i can start → how we got there.
    reach: list[dict[int, tuple[int, str]]] = [{0: (-1, "")}]
    for i, hunk in enumerate(hunks):
        a, b = gaps[i]
        gap = base[a:b]
        step: dict[int, tuple[int, str]] = {}
        for position in reach[i]:
            if theirs[position : position + len(gap)] != gap:
                continue
            at = position + len(gap)
            for status, lines in ((ACCEPTED, hunk.new), (REJECTED, hunk.old)):
                if theirs[at : at + len(lines)] == list(lines):
                    step.setdefault(at + len(lines), (position, status))
        if not step:
            return None
        reach.append(step)
    a, b = gaps[-1]
    ends = [p for p in reach[-1] if theirs[p:] == base[a:b]]
    if not ends:
        return None
    statuses: list[tuple[str, int]] = []  # (status, where the hunk starts in theirs)
    position = ends[0]
    for i in range(len(hunks), 0, -1):
        previous, status = reach[i][position]
        size = len(hunks[i - 1].new if status == ACCEPTED else hunks[i - 1].old)
        statuses.append((status, position - size))
        position = previous
    statuses.reverse()
    outcomes = []
    for hunk, (status, at) in zip(hunks, statuses, strict=True):
        size = len(hunk.new if status == ACCEPTED else hunk.old)
        outcomes.append(
            HunkOutcome(
                hunk.number,
                status,
                at + 1,
                at + size,
                "".join(hunk.old),
                "".join(hunk.new),
                "".join(theirs[at : at + size]),
                label=hunk.label,
            )
        )
    return LandingReport(tuple(outcomes), (), len(hunks))


def _aligned(
    base: list[str], ours: list[str], theirs: list[str], hunks: Sequence[ProposedHunk]
) -> LandingReport:
    """The outcome by a 3-way alignment, when the user changed more than which hunks landed;
    each changed region is reported as the hunks whose lines it covers."""
    merger = merge3.Merge3(base, ours, theirs, sequence_matcher=PatienceMatcher)
    outcomes: list[HunkOutcome] = []
    others: list[OtherChange] = []
    counter = 0
    iz = ia = ib = 0
    for zmatch, zend, amatch, aend, bmatch, bend in merger.find_sync_regions():
        z_part, a_part, b_part = base[iz:zmatch], ours[ia:amatch], theirs[ib:bmatch]
        if a_part != z_part:
            covered = [h for h in hunks if _covers(h, iz, zmatch)]
            if covered:
                first, last = covered[0].number, covered[-1].number
            else:
                first = last = counter + 1
            counter = max(counter, last)
            beside = _beside(z_part, a_part, b_part)
            if b_part == a_part:
                status = ACCEPTED
            elif b_part == z_part:
                status = REJECTED
            elif beside is not None:
                # The proposal's change landed whole, and the user wrote lines next to it.
                at, size, lead = beside
                outcomes.append(
                    HunkOutcome(
                        first,
                        ACCEPTED,
                        # Where the hunk's lines would start: its changed lines are at `at`.
                        ib + at + 1 - lead,
                        ib + at + size,
                        "".join(z_part),
                        "".join(a_part),
                        "".join(b_part[at : at + size]),
                        last_number=last if last > first else 0,
                        label=covered[0].label if len(covered) == 1 else "",
                    )
                )
                if at > 0:
                    others.append(OtherChange(ib + 1, ib + at))
                if at + size < len(b_part):
                    others.append(OtherChange(ib + at + size + 1, bmatch))
                iz, ia, ib = zend, aend, bend
                continue
            else:
                status = MODIFIED
            outcomes.append(
                HunkOutcome(
                    first,
                    status,
                    ib + 1,
                    bmatch,
                    "".join(z_part),
                    "".join(a_part),
                    "".join(b_part),
                    last_number=last if last > first else 0,
                    label=covered[0].label if len(covered) == 1 else "",
                )
            )
        elif b_part != z_part:
            others.append(OtherChange(ib + 1, bmatch))
        iz, ia, ib = zend, aend, bend
    return LandingReport(tuple(outcomes), tuple(others), max(len(hunks), counter))


def _beside(
    base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]
) -> tuple[int, int, int] | None:
    """Where the proposal's change sits whole in the landed lines of a region the user also
    changed next to it: the offset and length of its changed lines there, and how many lines
    of the region it left as they were before them (those need not be there); None when the
    user changed the change itself. A removal landed when none of its lines is there any more."""
    lead, old, new = _core("".join(base), "".join(ours))
    changed = list(ours[lead : lead + new])
    removed = list(base[lead : lead + old])
    if not changed:
        if not removed or any(line in theirs for line in removed):
            return None
        return 0, 0, lead
    size = len(changed)
    for at in range(len(theirs) - size + 1):
        if list(theirs[at : at + size]) == changed:
            return at, size, lead
    return None


def _covers(hunk: ProposedHunk, start: int, end: int) -> bool:
    """Whether the region [start, end) of the text before holds a line of `hunk` (or, for a
    region or hunk of no lines, touches it)."""
    first, last = hunk.start, hunk.start + len(hunk.old)
    if first == last:
        return start <= first <= end
    if start == end:
        return first <= start <= last
    return first < end and start < last


def _what_became(hunk: HunkOutcome) -> str:
    """What `hunk` does and what became of it, with the lines it concerns in the file as it is
    now (the hunk's context lines, which it leaves as they are, are not counted)."""
    lead, old, new = _core(hunk.before, hunk.proposed)
    first = hunk.start + lead
    if hunk.status == ACCEPTED:
        if new == 0:
            return f"removed {_count(old)} before line {first}: applied"
        span = _span(first, first + new - 1)
        if old == 0:
            return f"inserted {span}: applied"
        return (
            f"replaced {span}: applied"
            if old == new
            else f"replaced {_count(old)} with {span}: applied"
        )
    if hunk.status == REJECTED:
        if old == 0:
            return f"inserting {_count(new)} before line {first}: not applied by the user"
        span = _span(first, first + old - 1)
        if new == 0:
            return f"removing {span}: not applied by the user (the lines are still there)"
        return f"replacing {span}: not applied by the user (the old text is still there)"
    verb = "inserting" if old == 0 else "removing" if new == 0 else "replacing"
    if hunk.end < hunk.start:
        now = f"the user removed the lines there, before line {hunk.start}"
    else:
        holds = "holds" if hunk.end == hunk.start else "hold"
        now = f"{_span(hunk.start, hunk.end)} {holds} the user's version"
    return (
        f"{verb} {_count(old or new)}: changed by the user before applying ({now}) — your "
        "proposal (-) and what is there instead (+):"
    )


def _core(before: str, proposed: str) -> tuple[int, int, int]:
    """How many lines lead the change unchanged, and how many old and new lines it changes."""
    old, new = split_lines(before), split_lines(proposed)
    lead = 0
    while lead < min(len(old), len(new)) and old[lead] == new[lead]:
        lead += 1
    trail = 0
    while trail < min(len(old), len(new)) - lead and old[-1 - trail] == new[-1 - trail]:
        trail += 1
    return lead, len(old) - lead - trail, len(new) - lead - trail


def _count(lines: int) -> str:
    return f"{lines} line" if lines == 1 else f"{lines} lines"


def _span(start: int, end: int) -> str:
    if end < start:
        return f"before line {start}"
    if end == start:
        return f"line {start}"
    return f"lines {start}-{end}"
