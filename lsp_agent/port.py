"""The one interface between the agent core and the outside world.

`lsp/port.py` implements it over LSP, `terminal/port.py` in a terminal, and `testing.py` in
memory for tests and benchmarks. The core never speaks LSP: if the loop needs something from the
editor, a method belongs here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Document:
    """A file's text as the editor sees it."""

    text: str
    """The text, without a byte-order mark (a BOM is an encoding detail, not text)."""
    version: int | None
    """The open buffer's version, or None when the text was read from disk."""
    bom: bool = False
    """Whether the bytes on disk start with a UTF-8 byte-order mark."""


@dataclass(frozen=True)
class FileChange:
    """One file's part of an edit: the whole text before and after."""

    path: Path
    before: str | None
    """The text the change was computed against; None for a new file."""
    after: str | None
    """The text to write; None to delete the file."""
    version: int | None
    """The buffer version `before` was read at (None: read from disk or a new file)."""
    bom: bool = False


@dataclass(frozen=True)
class EditProposal:
    """A change the agent wants; the editor previews it and the user accepts or rejects."""

    label: str
    description: str
    changes: tuple[FileChange, ...]
    needs_confirmation: bool
    """True in `review` mode: the editor must ask before applying."""


@dataclass(frozen=True)
class EditOutcome:
    """What the editor answered to a proposal."""

    applied: bool
    reason: str | None = None
    """The client's `failureReason` (or the user's words) when not applied."""
    stale: bool = False
    """Not applied because the buffer changed after the edit was computed (the user typed)."""
    unexplained: bool = False
    """`stale` only by guess: refused without a reason while the buffer moved on (a client's
    version check, or the user's "no"; a second such refusal is the user's)."""
    unsupported: bool = False
    """Not sent at all: the editor cannot carry out part of it (e.g. it cannot delete files)."""
    failed: bool = False
    """Not applied through no choice of the user's: the editor cannot take edits at all, or
    the request failed."""


class EditorPort(Protocol):
    """What the agent core may ask of the editor (or terminal) it runs in."""

    async def read_document(self, path: Path) -> Document | None:
        """The open buffer for `path` (unsaved text included), or None when it is not open."""
        ...

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        """Show the edit to the user and apply it if they accept.

        Each change is pinned to `FileChange.version`: an editor whose buffer moved on refuses
        it (`stale`), and the proposal flow merges it onto the user's text and sends it again.
        """
        ...

    async def buffer_after(self, path: Path, version: int, timeout: float) -> Document | None:
        """The open buffer of `path` once the editor reports a version newer than `version`,
        waiting at most `timeout` seconds; None if none came."""
        ...

    async def ask_user(self, question: str, actions: Sequence[str]) -> str | None:
        """Ask a question with fixed answers; None when dismissed or unsupported."""
        ...

    def emit(self, event: dict[str, Any]) -> None:
        """Report one step of a turn (`lspAgent/event` payload)."""
        ...

    def log(self, message: str) -> None:
        """A line for the log, never for the model."""
        ...

    def warn(self, message: str) -> None:
        """One line the user sees (a pop-up in an editor, stderr in a terminal): something of
        the workspace the server refused to use, never for the model."""
        ...


async def wait_until(
    done: Callable[[], bool], changed: Callable[[], asyncio.Event], timeout: float
) -> bool:
    """Wait until `done()` holds, checking it each time the `changed()` event is set; False
    when `timeout` seconds passed first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        try:
            await asyncio.wait_for(changed().wait(), remaining)
        except TimeoutError:
            return done()
    return True
