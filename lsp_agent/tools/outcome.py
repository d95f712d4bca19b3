"""What became of each hunk of an edit once the editor said it applied it.

An editor may apply something other than what was proposed: VS Code's Refactor Preview lets the
user untick hunks, a user may type over the new text before the check, and some clients answer
`applied: true` for edits they skipped. `hunk_outcomes(before, proposed, landed)` compares the
three texts with a 3-way alignment (base = before, ours = proposed, theirs = landed) and says, per
hunk of the proposal: accepted, rejected, or modified by the user (with the user's version as a
small diff); `LandingReport.message(path)` is what the model is told. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import merge3

from lsp_agent.text import split_lines, unified_diff
from lsp_agent.tools.rebase import PatienceMatcher

ACCEPTED = "accepted"
REJECTED = "rejected"
MODIFIED = "modified"

DIFF_LINES = 20
"""A modified hunk's diff is shown only up to this many lines."""


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

    @property
    def exact(self) -> bool:
        """Everything proposed landed and nothing else changed."""
        return not self.others and all(h.status == ACCEPTED for h in self.hunks)

    @property
    def accepted(self) -> int:
        return sum(1 for h in self.hunks if h.status == ACCEPTED)

    def message(self, path: str) -> str:
        """What the model is told about the edit to `path`."""
        total = self.hunks[-1].last_number or self.hunks[-1].number if self.hunks else 0
        if self.exact:
            return f"applied: {path} (all {total} hunks as proposed)"
        if not self.hunks or all(h.status == REJECTED for h in self.hunks):
            head = f"the user did not keep any of your edit to {path}"
        elif self.accepted == len(self.hunks):
            head = f"your edit to {path} landed as proposed, and the user changed other lines too"
        else:
            head = (
                f"the editor applied only part of your edit to {path} "
                f"({self.accepted} of {total} hunks as proposed)"
            )
        lines = [head + ":"]
        for hunk in self.hunks:
            where = _lines(hunk.start, hunk.end)
            if hunk.status == ACCEPTED:
                lines.append(f"- {hunk.numbers} ({where}): accepted")
            elif hunk.status == REJECTED:
                lines.append(
                    f"- {hunk.numbers} ({where}): rejected by the user — the old text is "
                    "still there"
                )
            else:
                lines.append(
                    f"- {hunk.numbers} ({where}): modified by the user — your proposal (-) and "
                    "what is there instead (+):"
                )
                lines.extend("  " + line for line in hunk.user_diff().splitlines())
        for other in self.others:
            lines.append(f"- {_lines(other.start, other.end)}: also changed by the user")
        lines.append(
            f"The file as it is now is what counts: read {path} again before editing it further, "
            "and do not redo hunks the user rejected unless they ask."
        )
        return "\n".join(lines)


def hunk_outcomes(before: str, proposed: str, landed: str) -> LandingReport:
    """Compare what landed with what was proposed, hunk by hunk of the proposal."""
    base, ours, theirs = split_lines(before), split_lines(proposed), split_lines(landed)
    merger = merge3.Merge3(base, ours, theirs, sequence_matcher=PatienceMatcher)
    hunks: list[HunkOutcome] = []
    others: list[OtherChange] = []
    number = 0
    iz = ia = ib = 0
    for zmatch, zend, amatch, aend, bmatch, bend in merger.find_sync_regions():
        z_part, a_part, b_part = base[iz:zmatch], ours[ia:amatch], theirs[ib:bmatch]
        if a_part != z_part:
            count = _hunk_count(base[iz:zmatch], ours[ia:amatch])
            first, number = number + 1, number + count
            if b_part == a_part:
                status = ACCEPTED
            elif b_part == z_part:
                status = REJECTED
            else:
                status = MODIFIED
            hunks.append(
                HunkOutcome(
                    first,
                    status,
                    ib + 1,
                    bmatch,
                    "".join(z_part),
                    "".join(a_part),
                    "".join(b_part),
                    last_number=number if count > 1 else 0,
                )
            )
        elif b_part != z_part:
            others.append(OtherChange(ib + 1, bmatch))
        iz, ia, ib = zend, aend, bend
    return LandingReport(tuple(hunks), tuple(others))


def _hunk_count(base: Sequence[str], ours: Sequence[str]) -> int:
    """How many separate hunks base → ours is (more than one when the user's typing joined
    neighbouring hunks of the proposal into one unaligned region)."""
    blocks = PatienceMatcher(None, base, ours).get_matching_blocks()
    count = 0
    i = j = 0
    for x, y, size in blocks:
        if x > i or y > j:
            count += 1
        i, j = x + size, y + size
    return max(count, 1)


def _lines(start: int, end: int) -> str:
    if end < start:
        return f"removed before line {start}"
    if end == start:
        return f"line {start}"
    return f"lines {start}-{end}"
