"""What a tool call gives back: text for the model, and facts for the editor's event stream."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_agent.context.cap import Excerpt


@dataclass(frozen=True)
class Landed:
    """One file an accepted edit changed: what it held before and holds now (None: absent).

    Kept in the transcript so that the whole turn can be undone later (`lspAgent.undoTurn`)."""

    path: Path
    before: str | None
    after: str | None


@dataclass(frozen=True)
class HunkFact:
    """What became of one hunk of an applied edit, for the editor (the model reads it in the
    result's text): a chat shows it without parsing that text."""

    path: str
    """The file, relative to the workspace."""
    hunk: str
    """`hunk 2`, `hunks 2-3`; empty for a change of the user's own beside the edit."""
    status: str
    """`accepted`, `rejected`, `modified` (changed by the user before applying), or `user`
    (lines the user changed that no hunk proposed)."""
    what: str
    """What it does, in the lines of the file as it is now: `replaced line 4`, `inserting 2
    lines before line 7`, `line 6` for the user's own change."""
    label: str = ""
    """The model's name for the hunk, when it sent hunks (`apply_patch`)."""

    def to_json(self) -> dict[str, str]:
        out = {"path": self.path, "hunk": self.hunk, "status": self.status, "what": self.what}
        if self.label:
            out["label"] = self.label
        return out


@dataclass
class ToolResult:
    """What a tool call produced, for the model and for the editor's event stream."""

    text: str
    ok: bool
    summary: str
    reason: str | None = None
    """For failures: the `ToolError` reason (`not_found`, `stale`, `rejected`, ...)."""
    edits: tuple[tuple[Path, bool], ...] = ()
    """For edit tools that reached the editor: each file and whether it was applied."""
    source: str | None = None
    """Set when `text` is outside text (a file, search hits): where it came from. The toolbox
    caps it and marks it `<untrusted source=…>`."""
    output: Excerpt | None = None
    """Command output, already capped as it streamed; shown after `text`, marked untrusted."""
    permission: dict[str, Any] | None = None
    """The `permission` event of this call (`name`, `decision`, ...), when it was asked or
    denied."""
    paths: tuple[str, ...] = ()
    """For edit tools: the workspace-relative files the call touched or tried to."""
    landed: tuple[Landed, ...] = ()
    """For edit tools: each file the accepted edit changed, before and after."""
    hunks: tuple[HunkFact, ...] = ()
    """For an applied edit: what became of each hunk, file by file."""
    outcomes: tuple[tuple[Path, str], ...] = ()
    """For an applied edit: the files not applied as proposed, with the outcome in a few words
    (`1 of 2 hunks applied`)."""


@dataclass
class EditCounts:
    """Edits of one `ask`, as reported in its result."""

    proposed: int = 0
    applied: int = 0
    rejected: int = 0
