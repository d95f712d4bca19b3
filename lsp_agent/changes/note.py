"""The `<file_changes>` note: its entries, and how it is written for the model.

File content in the note (the diffs) is outside text: it is wrapped as untrusted, like every
other text the model reads from the workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lsp_agent.safety.untrusted import mark_untrusted

MODIFIED = "modified"
ADDED = "added"
DELETED = "deleted"
RENAMED = "renamed"
UNSAVED = "modified in editor, unsaved"
BRANCH = "branch changed"
UNSEEN = "not seen"
"""Entry statuses. `BRANCH` is the one line about the checked-out branch or commit; `UNSEEN` says
what the tracker could not see (it was still starting)."""

USER = "user"
AGENT = "agent"
FORMATTER = "formatter"
"""Entry sources."""


_LINES = (BRANCH, UNSEEN)
"""Statuses whose entry is a sentence about the whole tree, not a file."""


@dataclass(frozen=True)
class FileChangeEntry:
    """One line of `<file_changes>`: a file someone changed since the agent's last turn."""

    path: str
    """Workspace-relative POSIX path (the new path of a rename); empty for `BRANCH`, `UNSEEN`."""
    status: str
    """`modified`, `added`, `deleted`, `renamed`, `modified in editor, unsaved`,
    `branch changed` or `not seen`."""
    source: str = USER
    """Who changed it: `user`, `agent` (only with `include_agent`) or `formatter`."""
    old_path: str | None = None
    """For a rename: the path it had."""
    diff: str | None = None
    """Unified diff hunks (no file header) from what the agent last saw, for small text changes."""
    detail: str | None = None
    """For `BRANCH` and `UNSEEN`: the sentence."""


def render_file_changes(entries: Sequence[FileChangeEntry], limit_chars: int = 6000) -> str:
    """The `<file_changes>` block for the reminder; empty when nothing to report.

    Entries from the agent itself are left out. Each file gets one line (status and source),
    followed by its diff, wrapped as untrusted text, when it has one and the block still fits
    in `limit_chars`; past the bound, the rest is counted in "… and N more files".
    """
    shown = [e for e in entries if e.source != AGENT]
    if not shown:
        return ""
    head = (
        "<file_changes>\n"
        "Changed since your last turn by someone else (the user, a tool, git). Read a file "
        "again before editing it: edits planned against an older text are refused, except "
        "when the user is typing in an open buffer away from the lines you change."
    )
    tail = "</file_changes>"
    lines = [head]
    used = len(head) + len(tail) + 2
    files = [e for e in shown if e.status not in _LINES]
    for entry in shown:
        if entry.status in _LINES:
            line = f"- {entry.detail}"
            lines.append(line)
            used += len(line) + 1
    reserve = 40  # room for the "… and N more files" line
    for index, entry in enumerate(files):
        line = _entry_line(entry)
        block = line
        if entry.diff:
            indented = "\n".join("    " + d for d in entry.diff.splitlines())
            block = line + "\n" + mark_untrusted(indented, f"diff of {entry.path}")
        if used + len(block) + 1 + reserve <= limit_chars:
            lines.append(block)
            used += len(block) + 1
        elif used + len(line) + 1 + reserve <= limit_chars:
            lines.append(line + " (diff left out: read the file)")
            used += len(line) + 32
        else:
            more = len(files) - index
            lines.append(f"… and {more} more file{'' if more == 1 else 's'}")
            break
    lines.append(tail)
    return "\n".join(lines)


def _entry_line(entry: FileChangeEntry) -> str:
    who = {
        USER: "by the user",
        FORMATTER: "by a formatter, whitespace only, right after your edit",
        AGENT: "by you",
    }.get(entry.source, f"by {entry.source}")
    if entry.status == RENAMED and entry.old_path:
        return f"- {entry.old_path} → {entry.path}: renamed {who}"
    return f"- {entry.path}: {entry.status} {who}"
