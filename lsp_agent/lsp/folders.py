"""The editor's workspace folders, each with its own agent, change tracker and sessions.

A multi-root workspace (VS Code), several folders in Emacs or Zed: every folder of
`workspaceFolders`, and those added later by `workspace/didChangeWorkspaceFolders`, gets a
`Folder`. A command runs in the folder its `uri` (or `folder`) is in, or the folder that owns its
`session`, or the only folder; with several and nothing to choose by, the error names them.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lsp_agent.config import Settings
from lsp_agent.errors import UserError
from lsp_agent.port import EditorPort

if TYPE_CHECKING:
    from lsp_agent.agent.sessions import Agent
    from lsp_agent.changes.tracker import ChangeTracker


class Folder:
    """One workspace folder: its change tracker and, once a command needs it, its agent."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The folder, absolute, symlinks resolved."""
        self.tracker: ChangeTracker | None = None
        """Watches the folder for changes someone else than the agent makes."""
        self.tracker_made = asyncio.Event()
        """Set once the tracker exists (or could not be made)."""
        self.agent: Agent | None = None
        """The folder's agent, made on first use."""

    async def watch(self, log_line: Callable[[str], None]) -> None:
        """Make the tracker (its module loads off the loop) and start it."""
        try:
            changes = await asyncio.to_thread(importlib.import_module, "lsp_agent.changes.tracker")
            self.tracker = changes.ChangeTracker(self.root, log_line=log_line)
        finally:
            self.tracker_made.set()
        await self.tracker.start()

    async def ensure_agent(self, settings: Settings, port: EditorPort) -> Agent:
        """The folder's agent, made on first use; it shares the folder's tracker."""
        await self.tracker_made.wait()
        if self.agent is None:
            from lsp_agent.agent.sessions import build_agent

            self.agent = build_agent(settings, self.root, port, tracker=self.tracker)
        return self.agent

    def has_session(self, session_id: str) -> bool:
        """Whether the session is this folder's (loaded, or stored on disk)."""
        if self.agent is not None and session_id in self.agent.sessions:
            return True
        from lsp_agent.session.store import SessionStore

        store = self.agent.store if self.agent is not None else SessionStore(self.root)
        return (store.directory / f"{session_id}.jsonl").is_file()

    async def close(self) -> None:
        """Cancel the folder's turns and stop watching it."""
        if self.agent is not None:
            await self.agent.aclose()
        if self.tracker is not None:
            await self.tracker.stop()


class Folders:
    """The folders the editor has open, by root."""

    def __init__(self) -> None:
        self.by_root: dict[Path, Folder] = {}

    def __iter__(self) -> Iterator[Folder]:
        return iter(list(self.by_root.values()))

    def __len__(self) -> int:
        return len(self.by_root)

    def add(self, root: Path) -> Folder | None:
        """A new folder for `root`; None when it is already open."""
        if root in self.by_root:
            return None
        folder = self.by_root[root] = Folder(root)
        return folder

    def remove(self, root: Path) -> Folder | None:
        return self.by_root.pop(root, None)

    def of_path(self, path: Path) -> Folder | None:
        """The innermost open folder that holds `path`."""
        holding = [
            f for f in self.by_root.values() if path == f.root or path.is_relative_to(f.root)
        ]
        return max(holding, key=lambda f: len(f.root.parts), default=None)

    def of_session(self, session_id: str) -> Folder | None:
        return next((f for f in self.by_root.values() if f.has_session(session_id)), None)

    def choose(
        self, *, path: Path | None = None, folder: Path | None = None, session: str | None = None
    ) -> Folder:
        """The folder a command runs in; `UserError` saying how to choose when it is unclear."""
        if not self.by_root:
            raise UserError(
                "no workspace folder is open: open a folder in the editor, then ask again"
            )
        for where, what in ((folder, "folder"), (path, "uri")):
            if where is None:
                continue
            found = self.of_path(where)
            if found is None:
                raise UserError(f"{what} {where} is outside the open folders: {self.names()}")
            return found
        if session is not None:
            owner = self.of_session(session)
            if owner is not None:
                return owner
        if len(self.by_root) == 1:
            return next(iter(self.by_root.values()))
        raise UserError(
            f"lsp-agent serves {len(self.by_root)} folders ({self.names()}): pass `folder` "
            "(a folder URI) or a `uri` inside one to say which"
        )

    def names(self) -> str:
        return ", ".join(str(root) for root in self.by_root)
