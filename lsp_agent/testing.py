"""An editor in memory: the `EditorPort` tests and benchmarks drive the core through.

Shipped with the package so that every test and benchmark uses this one fake instead of writing
its own: it keeps buffers with versions, answers proposals and questions the way a scripted user
would, writes accepted edits to disk like an editor saving them, and records every event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsp_agent.port import Document, EditOutcome, EditProposal, wait_until


class MemoryPort:
    """An editor in memory: buffers, a scripted user, and a record of every event."""

    def __init__(self, *, answer: str | None = None, accept: bool = True) -> None:
        self.buffers: dict[Path, Document] = {}
        """Open buffers (unsaved text and version), by absolute path."""
        self.accept = accept
        """Whether the user accepts each proposed edit."""
        self.land: str | None = None
        """When set, what the editor writes instead of the proposal (the user kept some hunks)."""
        self.outcome: EditOutcome | None = None
        """When set, the answer to every proposal, whatever the user would say."""
        self.answer = answer
        """The user's answer to every question (an action title), or None to dismiss it."""
        self.answering: Callable[[str, Sequence[str]], str | None] | None = None
        """When set, decides each question instead of `answer`."""
        self.crash_reads = False
        """Reading a buffer raises: an editor bridge that fell over."""
        self.proposals: list[EditProposal] = []
        self.questions: list[tuple[str, Sequence[str]]] = []
        self.events: list[dict[str, Any]] = []
        self.logged: list[str] = []
        self.warned: list[str] = []
        """The lines the user was shown (`warn`)."""
        self._changed = asyncio.Event()

    def open(self, path: Path, text: str, version: int = 1) -> None:
        """The user opens `path` with `text` (unsaved, when it differs from the disk)."""
        self.buffers[path] = Document(text, version)

    def type(self, path: Path, text: str) -> None:
        """The user types: the buffer holds `text` at the next version."""
        old = self.buffers[path]
        self.buffers[path] = Document(text, (old.version or 0) + 1, old.bom)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def read_document(self, path: Path) -> Document | None:
        if self.crash_reads:
            raise RuntimeError("the buffer store fell over")
        return self.buffers.get(path)

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        self.proposals.append(proposal)
        if self.outcome is not None:
            return self.outcome
        for change in proposal.changes:
            buffer = self.buffers.get(change.path)
            if (
                buffer is not None
                and change.version is not None
                and buffer.version != change.version
            ):
                return EditOutcome(False, "the buffer changed", stale=True)
        if not self.accept:
            return EditOutcome(False, "no thanks")
        for change in proposal.changes:
            if change.after is None:
                change.path.unlink(missing_ok=True)
                self.buffers.pop(change.path, None)
                continue
            text = self.land if self.land is not None else change.after
            buffer = self.buffers.get(change.path)
            if buffer is not None:
                self.buffers[change.path] = Document(text, (buffer.version or 0) + 1, buffer.bom)
            change.path.parent.mkdir(parents=True, exist_ok=True)
            change.path.write_bytes(("\ufeff" if change.bom else "").encode() + text.encode())
        self._notify()
        return EditOutcome(True)

    async def buffer_after(self, path: Path, version: int, timeout: float) -> Document | None:
        def newer() -> bool:
            buffer = self.buffers.get(path)
            return buffer is not None and (buffer.version is None or buffer.version > version)

        if not await wait_until(newer, lambda: self._changed, timeout):
            return None
        return self.buffers.get(path)

    async def ask_user(self, question: str, actions: Sequence[str]) -> str | None:
        self.questions.append((question, actions))
        if self.answering is not None:
            return self.answering(question, actions)
        return self.answer

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def log(self, message: str) -> None:
        self.logged.append(message)

    def warn(self, message: str) -> None:
        self.warned.append(message)

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        """The events of one kind, in order."""
        return [event for event in self.events if event["kind"] == kind]
