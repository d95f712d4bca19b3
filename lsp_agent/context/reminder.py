"""The reminder: a user message appended to each request, never stored.

It carries what changes between requests so the system prompt and the stored history stay
byte-identical from one request to the next (the prefix cache hits): `<context>` (time, git
branch, workspace root), `<todos>` when the model keeps a plan, and `<file_changes>` listing files
someone else changed since the agent's last turn, as the change tracker writes it.

Cheap by design, since it runs before every model call: the branch is read from `.git/HEAD` by
the change tracker's git layer (git itself is asked only for what that file does not settle).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from lsp_agent.changes.git import current_branch


class FileChangeSource(Protocol):
    """Where a session's `<file_changes>` come from (the change tracker's `SessionChanges`)."""

    async def snapshot(self) -> None:
        """The agent's turn ended: later changes are someone else's."""
        ...

    async def changes(self) -> str:
        """The `<file_changes>` block for what changed since the snapshot ("" when nothing)."""
        ...


def render(
    root: Path,
    branch: str | None,
    now: datetime | None = None,
    *,
    plan: str = "",
    file_changes: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The reminder text. Minute resolution: finer would only churn the tail of the request.

    `plan` is the model's plan (the `todo` tool's list) already rendered, "" when it has none;
    `file_changes` is the `<file_changes>` block already rendered ("" when nothing to report);
    `notes` are lines for `<context>` (e.g. that AGENTS.md changed).
    """
    moment = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M %Z").strip()
    lines = [
        "<context>",
        f"time: {moment}",
        f"git branch: {branch}" if branch else "git: not a git repository",
        f"workspace root: {root}",
        *notes,
        "</context>",
    ]
    if plan.strip():
        lines += ["<todos>", plan.strip(), "</todos>"]
    if file_changes.strip():
        lines.append(file_changes.strip())
    return "\n".join(lines)


async def reminder_message(
    root: Path,
    *,
    plan: str = "",
    file_changes: str = "",
    notes: Sequence[str] = (),
    now: datetime | None = None,
) -> dict[str, str]:
    """The user message that ends every request (see `render` for the arguments)."""
    branch = await current_branch(root)
    text = render(root, branch, now, plan=plan, file_changes=file_changes, notes=notes)
    return {"role": "user", "content": text}
