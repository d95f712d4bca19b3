"""What the model has seen of each file: the gate of every edit.

An edit is planned against the text the model read. `Reads` keeps, per file, the content hash of
that text (or of the model's own edit once it landed) and the buffer version it came from, and
tells the change tracker, which keeps the text itself (the base a rebase needs). When the model's
picture of a file is out of date, it is forgotten with the reason, so that the next edit is told
why the file must be read again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from lsp_agent.errors import ToolError
from lsp_agent.port import Document
from lsp_agent.tools.files import content_hash


class ChangeWitness(Protocol):
    """What the change tracker hears from the tools (`changes.ChangeTracker`)."""

    def agent_read(self, path: Path, text: str, key: str = ...) -> None:
        """The model read `path` and saw `text`."""
        ...

    def agent_applied(self, path: Path, text: str, key: str = ...) -> None:
        """An edit of the agent's landed; `path` now holds `text`."""
        ...

    def known_text(self, path: Path) -> str | None:
        """The text the model last read or wrote for `path`, if still remembered."""
        ...


class Reads:
    """The files one session's model has seen, and as what."""

    def __init__(self, tracker: ChangeWitness | None = None, key: str = "default") -> None:
        self.tracker = tracker
        """The workspace's change tracker, told of every read and landed edit."""
        self.key = key
        """This session's key in the tracker."""
        self._hashes: dict[Path, str] = {}
        """Content hash of each file as the model last saw it."""
        self._versions: dict[Path, int] = {}
        """Buffer version of each file the model last read from an open buffer."""
        self._forgotten: dict[Path, str] = {}
        """Why the model's picture of a file was dropped (it must read the file again)."""

    def saw(self, path: Path, document: Document, *, applied: bool = False) -> None:
        """The model now knows `path` as `document` holds it: it read it, or its edit landed."""
        self._hashes[path] = content_hash(document.text)
        self._forgotten.pop(path, None)
        if document.version is not None:
            self._versions[path] = document.version
        else:
            self._versions.pop(path, None)
        if self.tracker is not None:
            if applied:
                self.tracker.agent_applied(path, document.text, self.key)
            else:
                self.tracker.agent_read(path, document.text, self.key)

    def landed_as(self, path: Path, text: str) -> None:
        """The user kept the agent's edit in their own version: the tracker counts it as the
        agent's (the model hears of it from the edit's outcome, not again as a change)."""
        if self.tracker is not None:
            self.tracker.agent_applied(path, text, self.key)

    def forget(self, path: Path, why: str) -> None:
        """The model's picture of `path` is out of date (`why`): it must read it again."""
        self._hashes.pop(path, None)
        self._versions.pop(path, None)
        self._forgotten[path] = why

    def is_current(self, path: Path, document: Document) -> bool:
        """Whether `document` holds exactly what the model last saw of `path`."""
        return self._hashes.get(path) == content_hash(document.text)

    def version(self, path: Path) -> int | None:
        """The buffer version the model read `path` at (None: read from disk, or never)."""
        return self._versions.get(path)

    def known_text(self, path: Path) -> str | None:
        """The text the model last saw of `path`, when the tracker still has it and it is that
        text (its hash matches)."""
        if self.tracker is None:
            return None
        text = self.tracker.known_text(path)
        if text is None or self._hashes.get(path) != content_hash(text):
            return None
        return text

    def require(self, path: Path, rel: str, then: str) -> None:
        """Raise `unread` unless the model has seen `path`; `then` is what to do after reading."""
        if path in self._hashes:
            return
        why = self._forgotten.get(path)
        if why is not None:
            raise ToolError(f"read {rel} again ({why}), then {then}", reason="unread")
        raise ToolError(
            f"{rel} has not been read in this session: call read_file first, then {then}",
            reason="unread",
        )
