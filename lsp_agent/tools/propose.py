"""One proposal flow for every edit: pin it to what the editor shows, send it, tell the model
what became of it.

A proposal is one or more file changes (an `edit_file`, a `write_file`, every file of an
`apply_patch`), sent as ONE `EditProposal`. Before it goes out, each change is checked against
the text the editor shows now: when the user typed since the edit was planned, the edit is merged
onto their text (3-way) and pinned to their buffer version, or refused with their lines named.
An editor that refuses the edit because the buffer moved on meanwhile gets it merged and sent
again (`REBASE_ATTEMPTS` times at most).

Once the editor says it applied the edit, what landed is judged against the buffer's next
version (waited for, up to `LANDING_WAIT_S`; never a fixed pause) or, for a file that was not
open, against the disk: the model hears, per hunk, what was accepted, rejected or changed by the
user. An editor that said "applied" but whose buffer never reported a new version within the
wait is believed, and the model is told the change is not confirmed yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lsp_agent.errors import ToolError
from lsp_agent.port import Document, EditorPort, EditOutcome, EditProposal, FileChange
from lsp_agent.text import unified_diff
from lsp_agent.tools import syntax
from lsp_agent.tools.outcome import LandingReport, ProposedHunk, hunk_outcomes
from lsp_agent.tools.reads import Reads
from lsp_agent.tools.rebase import rebase
from lsp_agent.tools.results import EditCounts, HunkFact, Landed, ToolResult
from lsp_agent.tools.workspace import Workspace

REBASE_ATTEMPTS = 3
"""How many times an edit is merged onto the user's typing and sent again before giving up."""
LANDING_WAIT_S = 10.0
"""How long an applied edit of an open buffer may take to show up as the buffer's next version
(Emacs' eglot reports it about 2.4 s after answering). Only a cap: the wait ends at the version."""


@dataclass(frozen=True)
class Planned:
    """One file of a proposal: where, and the change the model's call computed."""

    rel: str
    """The path relative to the workspace, as the model wrote it."""
    change: FileChange
    hunks: tuple[ProposedHunk, ...] = ()
    """The model's own hunks (`apply_patch`), which the report of what landed is about."""


@dataclass(frozen=True)
class _Pinned:
    """A proposal pinned to what the editor shows, and what was merged to get there."""

    planned: tuple[Planned, ...]
    merged: tuple[str, ...]
    """Per-file notes: "the user edited lines 3-4; your edit was applied on top"."""


class Proposer:
    """Sends a session's edits to the editor and tells the model what became of them."""

    def __init__(self, workspace: Workspace, port: EditorPort, reads: Reads) -> None:
        self.workspace = workspace
        self.port = port
        self.reads = reads

    async def current(self, path: Path) -> Document | None:
        """The file as the editor shows it (the open buffer, else the disk); None if absent."""
        document = await self.port.read_document(path)
        if document is not None:
            return document
        if not await asyncio.to_thread(path.exists):
            return None
        return await asyncio.to_thread(self.workspace.read_disk, path)

    async def propose(
        self,
        planned: Sequence[Planned],
        *,
        description: str,
        done: str,
        summary: str,
        review: bool,
        counts: EditCounts,
    ) -> ToolResult:
        """Propose the files of one edit together; the model's result says what landed.

        `description` is what the editor shows ("edit a.py"); `done` the line the model reads
        when all of it landed as proposed ("applied: a.py"), `summary` the editor's line for it
        ("applied a.py").
        """
        files = tuple(planned)
        names = ", ".join(item.rel for item in files)
        pinned = await self._pin(files)
        proposal = EditProposal(
            label=f"lsp-agent: {names}",
            description=description,
            changes=tuple(item.change for item in pinned.planned),
            needs_confirmation=review,
        )
        counts.proposed += 1
        outcome = await self.port.propose_edit(proposal)
        attempts = 0
        while outcome.stale and attempts < REBASE_ATTEMPTS:
            if outcome.unexplained and attempts > 0:
                # The merged edit was refused without a word too: that is the user's "no".
                outcome = replace(outcome, stale=False, unexplained=False)
                break
            attempts += 1
            try:
                pinned = await self._pin(pinned.planned, pinned.merged)
            except ToolError:
                counts.rejected += 1  # shown once, then refused: the user's typing won
                raise
            proposal = replace(proposal, changes=tuple(p.change for p in pinned.planned))
            outcome = await self.port.propose_edit(proposal)
        if not outcome.applied:
            counts.rejected += 1
            return self._not_applied(outcome, pinned.planned, names)
        counts.applied += 1
        return await self._applied(pinned, done, summary)

    async def _pin(self, planned: tuple[Planned, ...], merged: tuple[str, ...] = ()) -> _Pinned:
        """Each change checked against what the editor shows now: pinned to its buffer version,
        merged onto the user's typing, or refused (`stale`) when they changed the same lines."""
        pinned: list[Planned] = []
        notes = list(merged)
        for item in planned:
            change = item.change
            current = await self.current(change.path)
            if change.before is None:
                if current is not None:
                    raise ToolError(
                        f"{item.rel} appeared while the edit was on its way (the user or a "
                        "command made it): read it, then use edit_file to change it",
                        reason="exists",
                    )
                pinned.append(item)
                continue
            if current is None:
                self.reads.forget(change.path, "it was deleted meanwhile")
                raise ToolError(
                    f"{item.rel} was deleted while the edit was on its way: nothing was changed",
                    reason="stale",
                )
            if current.text != change.before:
                if change.after is None:
                    self.reads.forget(change.path, "it changed before it could be deleted")
                    raise ToolError(
                        f"{item.rel} changed in the editor after you read it, so it was not "
                        "deleted: read it again and decide once more",
                        reason="stale",
                    )
                result = rebase(change.before, change.after, current.text)
                if result.merged is None:
                    self.reads.forget(change.path, "the user changed it")
                    raise ToolError(result.describe(item.rel), reason="stale")
                await syntax_guard(item.rel, current.text, result.merged)
                notes.append(result.describe(item.rel))
                change = replace(change, before=current.text, after=result.merged)
            pinned.append(
                replace(item, change=replace(change, version=current.version, bom=current.bom))
            )
        return _Pinned(tuple(pinned), tuple(dict.fromkeys(notes)))

    def _not_applied(
        self, outcome: EditOutcome, planned: tuple[Planned, ...], names: str
    ) -> ToolResult:
        refused = tuple((item.change.path, False) for item in planned)
        single = len(planned) == 1
        subject = f"this edit to {names}" if single else f"this patch ({names})"
        if outcome.unsupported:
            return ToolResult(
                text=(
                    f"not applied — {outcome.reason}. Nothing was changed. Send the patch again "
                    "without those files (only updates), and tell the user in your answer which "
                    "files to create or delete themselves."
                ),
                ok=False,
                summary=f"not applied: {outcome.reason}",
                reason="unsupported",
                edits=refused,
            )
        if outcome.failed:
            return ToolResult(
                text=(
                    f"not applied — {outcome.reason}. Nothing was changed in {names}. This is not "
                    "the user's decision: tell them in your answer what you wanted to change, as "
                    "a diff they can apply themselves."
                ),
                ok=False,
                summary=f"not applied: {outcome.reason}"[:200],
                reason="editor",
                edits=refused,
            )
        if outcome.stale:
            for item in planned:
                self.reads.forget(item.change.path, "the user kept typing in it")
            where = names if single else f"a file of the patch ({names})"
            return ToolResult(
                text=(
                    f"not applied — {where} changed in the editor after you read it (the user is "
                    "typing there). Nothing was changed: read it again and redo the edit against "
                    "its current text."
                ),
                ok=False,
                summary=f"not applied: {where} changed in the editor"[:200],
                reason="stale",
                edits=refused,
            )
        why = f": {outcome.reason}" if outcome.reason else ""
        return ToolResult(
            text=(
                f"not applied — the user rejected {subject}{why}. The files are as they were; ask "
                "the user if the reason is unclear."
            ),
            ok=False,
            summary=f"rejected {names}{why}"[:200],
            reason="rejected",
            edits=refused,
        )

    async def _applied(self, pinned: _Pinned, done: str, summary: str) -> ToolResult:
        told: list[str] = []
        diffs: list[str] = []
        outcomes: list[str] = []  # each file not applied as proposed, in a few words
        unconfirmed: list[str] = []
        changed: list[Landed] = []
        facts: list[HunkFact] = []
        partly: list[tuple[Path, str]] = []
        for item in pinned.planned:
            change = item.change
            landed, confirmed = await self._landed(change)
            now = change.after if not confirmed else landed.text if landed is not None else None
            if now != change.before:
                changed.append(Landed(change.path, change.before, now))
            if change.after is None:
                self.reads.forget(change.path, "you deleted it")
                if landed is not None:
                    told.append(f"{item.rel} is still there: the editor did not delete it")
                continue
            if not confirmed:
                # The editor said it applied the edit and its buffer has not said otherwise yet.
                self.reads.saw(change.path, Document(change.after, None), applied=True)
                unconfirmed.append(item.rel)
                diffs.append(unified_diff(item.rel, change.before or "", change.after))
            elif landed is None:
                self.reads.forget(change.path, "the editor did not create it")
                told.append(f"{item.rel} is not there: the editor said it applied the edit")
            elif landed.text == change.after:
                self.reads.saw(change.path, landed, applied=True)
                diffs.append(unified_diff(item.rel, change.before or "", change.after))
                if change.before is not None:
                    exact = hunk_outcomes(change.before, change.after, change.after, item.hunks)
                    facts.extend(exact.facts(item.rel))
            else:
                report = self._landed_otherwise(item, landed)
                told.append(report.message(item.rel))
                outcomes.append(f"{item.rel}: {report.short()}")
                facts.extend(report.facts(item.rel))
                partly.append((change.path, report.short()))
        edits = tuple((item.change.path, True) for item in pinned.planned)
        notes = [f"{note}." for note in pinned.merged]
        if unconfirmed:
            notes.append(
                f"The editor reported {', '.join(unconfirmed)} as applied, but its buffer has not "
                "shown the change yet: read the file before editing it again if in doubt."
            )
        if told:
            return ToolResult(
                text="\n".join(
                    [*notes, "the editor applied the edit, but not all of it as proposed:", *told]
                ),
                ok=True,
                summary=f"{summary} ({'; '.join(outcomes) or 'not all as proposed'})"[:200],
                edits=edits,
                landed=tuple(changed),
                hunks=tuple(facts),
                outcomes=tuple(partly),
            )
        diff = "".join(diffs)
        return ToolResult(
            text="\n".join([*notes, done, diff]).rstrip("\n") + "\n",
            ok=True,
            summary=f"{summary} ({_diff_size(diff)})"[:200],
            edits=edits,
            landed=tuple(changed),
            hunks=tuple(facts),
        )

    async def _landed(self, change: FileChange) -> tuple[Document | None, bool]:
        """What the file holds once the editor has applied `change`, and whether the editor
        confirmed it.

        An open buffer: its first version newer than the one the edit was pinned to (not
        confirmed when none came within `LANDING_WAIT_S`). A file that was not open: the buffer
        the editor opened for it, else the disk, once the editor has answered. A deletion: None
        once the file is gone, else what is still there.
        """
        path = change.path
        if change.after is None:
            return await self.current(path), True
        if change.version is not None:
            landed = await self.port.buffer_after(path, change.version, LANDING_WAIT_S)
            return landed, landed is not None
        return await self.current(path), True

    def _landed_otherwise(self, item: Planned, landed: Document) -> LandingReport:
        """The file holds something else than the proposal: which hunks landed, which the user
        left out, and what they wrote instead."""
        change = item.change
        assert change.after is not None
        # The user's version counts as the agent's doing: the model hears it from here, not
        # again from <file_changes>.
        self.reads.landed_as(change.path, landed.text)
        self.reads.forget(change.path, "the user changed your edit before keeping it")
        return hunk_outcomes(change.before or "", change.after, landed.text, item.hunks)


async def syntax_guard(rel: str, before: str | None, after: str) -> None:
    """Refuse `after` when it brings syntax errors `before` did not have (parsed off the loop)."""
    message = await asyncio.to_thread(syntax.check, rel, before, after)
    if message:
        raise ToolError(message, reason="syntax")


def _diff_size(diff: str) -> str:
    lines = diff.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return f"+{added} -{removed}"
