"""The edit tools: `edit_file`, `write_file` and `apply_patch`, planned against the editor's view.

Each checks that the model has seen what it changes (`Reads`), computes the new text without
writing anything (`edits.plan_edit`, `patch.plan_patch`), refuses syntax errors the file did not
have, and hands the result to the one proposal flow (`propose.Proposer`), which sends it to the
editor and tells the model what became of it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsp_agent.errors import ToolError
from lsp_agent.port import Document, FileChange
from lsp_agent.tools import edits, patch, syntax
from lsp_agent.tools.propose import Planned, Proposer, syntax_guard
from lsp_agent.tools.rebase import RebaseResult, rebase
from lsp_agent.tools.results import EditCounts, ToolResult


class EditTools:
    """`edit_file`, `write_file` and `apply_patch` for one session."""

    def __init__(self, proposer: Proposer) -> None:
        self.proposer = proposer
        self.workspace = proposer.workspace
        self.reads = proposer.reads

    async def edit_file(
        self, path: str, old: str, new: str, *, review: bool, counts: EditCounts
    ) -> ToolResult:
        """Replace the one place `old` names with `new`, in a file the model has read."""
        target = self.workspace.resolve(path, for_write=True)
        rel = self.workspace.relative(target)
        self.reads.require(target, rel, "edit")
        document = await self._document(target, rel)
        if self.reads.is_current(target, document):
            after = edits.plan_edit(document.text, old, new, path=rel)
            note = None
        else:
            merged = self._rebase_typing(target, rel, document, old, new)
            after, note = merged.merged or document.text, merged.describe(rel)
        if after == document.text:
            raise ToolError(
                f"old and new are the same text: nothing to change in {rel}", reason="no_change"
            )
        await syntax_guard(rel, document.text, after)
        change = FileChange(target, document.text, after, document.version, document.bom)
        result = await self.proposer.propose(
            [Planned(rel, change)],
            description=f"edit {rel}",
            done=f"applied: {rel}",
            summary=f"applied {rel}",
            review=review,
            counts=counts,
        )
        if note is not None and result.ok:
            result.text = f"{note}.\n{result.text}"
        return result

    async def write_file(
        self, path: str, content: str, *, review: bool, counts: EditCounts
    ) -> ToolResult:
        """Create a new file through the editor."""
        target = self.workspace.resolve(path, for_write=True)
        rel = self.workspace.relative(target)
        if await self.proposer.current(target) is not None:
            raise ToolError(
                f"{rel} already exists: read it and use edit_file to change it", reason="exists"
            )
        await syntax_guard(rel, None, content)
        return await self.proposer.propose(
            [Planned(rel, FileChange(target, None, content, None))],
            description=f"create {rel}",
            done=f"created: {rel}",
            summary=f"created {rel}",
            review=review,
            counts=counts,
        )

    async def apply_patch(self, text: str, *, review: bool, counts: EditCounts) -> ToolResult:
        """Check a whole multi-file patch, then propose all its files as one edit."""
        patches = patch.parse_patch(text)
        found: dict[str, tuple[Path, Document | None] | ToolError] = {}
        for name in patch.paths(patches):
            try:
                found[name] = await self._patch_target(name)
            except ToolError as error:
                found[name] = error

        def read_current(name: str) -> tuple[Path, str | None]:
            entry = found.get(name)
            if entry is None:  # a path `paths()` did not list: resolve it without the editor
                entry = (self.workspace.resolve(name, for_write=True), None)
            if isinstance(entry, ToolError):
                raise entry
            target, document = entry
            return target, document.text if document is not None else None

        planned = patch.plan_patch(patches, read_current)
        refusals = await asyncio.gather(
            *(
                asyncio.to_thread(syntax.check, change.rel, change.before, change.after)
                for change in planned
                if change.after is not None
            )
        )
        messages = [message for message in refusals if message]
        if messages:
            raise ToolError("\n".join(messages), reason="syntax")
        documents = {
            entry[0]: entry[1] for entry in found.values() if not isinstance(entry, ToolError)
        }
        files = []
        for change in planned:
            document = documents.get(change.path)
            version, bom = (document.version, document.bom) if document else (None, False)
            files.append(
                Planned(
                    change.rel,
                    FileChange(change.path, change.before, change.after, version, bom),
                    change.hunks,
                )
            )
        described = patch.describe(planned)
        return await self.proposer.propose(
            files,
            description=described,
            done=f"applied: {described}",
            summary=f"applied: {described}",
            review=review,
            counts=counts,
        )

    async def _document(self, target: Path, rel: str) -> Document:
        document = await self.proposer.current(target)
        if document is None:
            self.reads.forget(target, "it was deleted")
            raise ToolError(f"{rel} does not exist any more: it was deleted", reason="not_found")
        return document

    async def _patch_target(self, name: str) -> tuple[Path, Document | None]:
        """A file a patch names, resolved for writing, with its current text (None: absent).

        An existing file must have been read, and not changed since, as for `edit_file`.
        """
        target = self.workspace.resolve(name, for_write=True)
        rel = self.workspace.relative(target)
        document = await self.proposer.current(target)
        if document is None:
            return target, None
        self.reads.require(target, rel, "send the patch again")
        if not self.reads.is_current(target, document):
            self.reads.forget(target, "it changed since you read it")
            raise ToolError(
                f"{rel} changed since you last read it (edited in the editor or on disk): read "
                "it again, then redo the patch against what is there now",
                reason="stale",
            )
        return target, document

    def _rebase_typing(
        self, target: Path, rel: str, document: Document, old: str, new: str
    ) -> RebaseResult:
        """An edit the model planned on a buffer the user has typed in since: the planned
        change merged onto what the buffer holds now. Refused (`stale`) when the file changed
        some other way (saved over, changed on disk: the model must read it again), when the
        text read is no longer known, or when the user's typing touches the edited lines."""
        read_version = self.reads.version(target)
        base = self.reads.known_text(target)
        typing = (
            read_version is not None
            and document.version is not None
            and document.version > read_version
            and base is not None
        )
        if not typing or base is None:
            self.reads.forget(target, "it changed since you read it")
            raise ToolError(
                f"{rel} changed since you last read it (edited in the editor or on disk): "
                "read it again, then redo the edit against what is there now",
                reason="stale",
            )
        merged = rebase(base, edits.plan_edit(base, old, new, path=rel), document.text)
        if not merged.clean:
            self.reads.forget(target, "the user changed the lines your edit touches")
            raise ToolError(merged.describe(rel), reason="stale")
        return merged
