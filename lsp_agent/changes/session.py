"""One session's view of the workspace's tracker: its own snapshot, its `<file_changes>`."""

from __future__ import annotations

from lsp_agent.changes.note import render_file_changes
from lsp_agent.changes.tracker import ChangeTracker


class SessionChanges:
    """One session's `<file_changes>`: the tracker seen through the session's own snapshot.

    The first call takes the snapshot instead of reporting: what changed before the session's
    first request is in what the model reads anyway. Nothing here waits for a tracker that is
    still starting: the note then says what it could not see.
    """

    def __init__(self, tracker: ChangeTracker, key: str) -> None:
        self.tracker = tracker
        """The workspace's tracker."""
        self.key = key
        """The session id: the snapshot and the files seen are kept per session."""
        self._taken = False
        """Whether the session's first snapshot was taken."""

    async def snapshot(self) -> None:
        """The agent's turn ended: later changes are someone else's."""
        await self.tracker.wait_ready(READY_WAIT_S)
        await self.tracker.snapshot(self.key, wait=False)
        self._taken = True

    async def changes(self) -> str:
        """The rendered note ("" when nothing to report)."""
        if not self._taken:
            await self.tracker.snapshot(self.key, wait=False, first=True)
            self._taken = True
            return ""
        entries = await self.tracker.changes_since_snapshot(self.key, wait=False)
        return render_file_changes(entries)


READY_WAIT_S = 2.0
"""At the end of a turn, how long a snapshot waits for a tracker still starting (the answer is
sent; only the turn's end waits). Past it, the next turn's note says what was not seen."""
