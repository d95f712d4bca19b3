"""What a patch is once read: files, hunks and their lines; what planning it gives or refuses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lsp_agent.errors import ToolError
from lsp_agent.tools.matching import clip
from lsp_agent.tools.outcome import ProposedHunk

Kind = Literal["add", "update", "delete"]
Line = tuple[str, str]
"""One line of a hunk: (op, text); op is " " (context), "-" (removed) or "+" (added)."""
ReadCurrent = Callable[[str], tuple[Path, str | None]]
"""Given a path as written in the patch: the resolved file and its current text (None: absent)."""

NO_EOL_MARKER = "\\ No newline at end of file"


@dataclass(frozen=True)
class Hunk:
    """One `@@` section of a file's patch."""

    lines: tuple[Line, ...]
    old_start: int | None = None
    """`l` of `@@ -l,n`: the first old line (1-based), or for a pure insertion (n = 0) the line
    after which it goes; None when the hunk has no numbers (the envelope's usual shape)."""
    old_count: int | None = None
    """`n` of `@@ -l,n` (1 when the header omits it); None without numbers."""
    anchors: tuple[str, ...] = ()
    """Envelope `@@ text` lines: lines found somewhere above the hunk, outermost first."""
    heading: str = ""
    """Text after a numbered header's closing `@@` (git's function name); shown, not matched."""
    old_no_eol: bool = False
    """The old side's last line is the end of the file, without a final line break."""
    new_no_eol: bool = False
    """The new side's last line ends the file without a final line break."""
    at_end: bool = False
    """`*** End of File`: the hunk's old lines end where the file ends."""
    endings: tuple[str, ...] = ()
    """Each line's own ending in the patch text (`\\r\\n` or `\\n`), kept only when the patch's
    lines do not all end alike (git's diff of a file that mixes them); empty otherwise."""

    @property
    def old(self) -> list[str]:
        """The lines the file must have where the hunk applies (context and removed)."""
        return [text for op, text in self.lines if op != "+"]

    @property
    def new(self) -> list[str]:
        """The lines there after the hunk is applied (context and added)."""
        return [text for op, text in self.lines if op != "-"]

    def same_change(self, other: Hunk) -> bool:
        """Whether `other` makes the same change with the same directions (line numbers aside)."""
        return (self.lines, self.anchors, self.at_end, self.old_no_eol, self.new_no_eol) == (
            other.lines,
            other.anchors,
            other.at_end,
            other.old_no_eol,
            other.new_no_eol,
        )

    def label(self) -> str:
        """How messages name the hunk: its header, else its first old line."""
        if self.old_start is not None:
            count = self.old_count if self.old_count is not None else len(self.old)
            return f"@@ -{self.old_start},{count} @@"
        if self.anchors:
            return "@@ " + " / ".join(self.anchors)
        first = next((text.strip() for text in self.old if text.strip()), "")
        if first:
            return f"starting {clip(first, 60)!r}"
        added = next((text.strip() for text in self.new if text.strip()), "")
        return f"adding {clip(added, 60)!r}" if added else "without context lines"


@dataclass(frozen=True)
class FilePatch:
    """What a patch does to one file."""

    kind: Kind
    path: str
    """The file as the patch names it (`a/`/`b/` prefixes removed); for a move, the source."""
    hunks: tuple[Hunk, ...] = ()
    """For `add`: the file's lines as `+` lines; for `delete`: optional `-` lines to verify."""
    move_to: str | None = None
    """For `update`: the new path when the file is also renamed."""


@dataclass(frozen=True)
class PlannedChange:
    """One file's part of a planned patch: the whole text before and after."""

    path: Path
    """The resolved file, as `read_current` returned it."""
    rel: str
    """The path as the patch wrote it, for messages and labels."""
    before: str | None
    """The current text the change was computed against; None: the file is created."""
    after: str | None
    """The text to write; None: the file is deleted."""
    hunks: tuple[ProposedHunk, ...] = ()
    """The model's hunks where they landed in `before` and `after`, for the report of what the
    editor applied; empty when the file is created, deleted, moved, or patched by several
    sections (the report then goes by the diff)."""

    @property
    def kind(self) -> Kind:
        """`add`, `update` or `delete`."""
        if self.before is None:
            return "add"
        return "delete" if self.after is None else "update"


@dataclass(frozen=True)
class HunkFailure:
    """Why one file or hunk of a patch could not be planned."""

    path: str
    hunk: int | None
    """1-based hunk number within its file section; None for a failure of the whole file."""
    reason: str
    """`not_found`, `ambiguous`, `overlap`, `exists`, `bad_patch`, or a `read_current` reason."""
    message: str


class PatchError(ToolError):
    """The patch cannot be applied as a whole; nothing may be proposed."""

    def __init__(self, message: str, *, reason: str, failures: Sequence[HunkFailure] = ()) -> None:
        super().__init__(message, reason=reason)
        self.failures: tuple[HunkFailure, ...] = tuple(failures)
        """Every file or hunk that failed (empty for a patch that could not be parsed)."""


def paths(patches: Sequence[FilePatch]) -> list[str]:
    """Every path the patches name (sources and move targets), once each, in order."""
    seen: dict[str, None] = {}
    for patch in patches:
        seen.setdefault(patch.path)
        if patch.move_to is not None:
            seen.setdefault(patch.move_to)
    return list(seen)


def describe(changes: Sequence[PlannedChange]) -> str:
    """The changes in words, for a proposal's description: `edit a.py, create b.py, delete c`."""
    verbs = {"add": "create", "update": "edit", "delete": "delete"}
    return ", ".join(f"{verbs[change.kind]} {change.rel}" for change in changes)
