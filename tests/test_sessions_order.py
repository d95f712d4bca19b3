"""`lspAgent.sessions` lists the newest session first, also when two began in the same second:
the chat in the editors opens the first one as the conversation that goes on."""

from __future__ import annotations

import json
from pathlib import Path

from lsp_agent.session.store import SessionStore
from tests.editor import Editor


def stored_session(state_dir: Path, workspace: Path, session: str, started: str) -> None:
    """A session's transcript as the store writes it: the header, then one prompt."""
    directory = SessionStore(workspace, state_dir).directory
    directory.mkdir(parents=True, exist_ok=True)
    records = [
        {
            "type": "session",
            "ts": started,
            "session": session,
            "workspace": str(workspace.resolve()),
            "started": started,
            "version": "0.1.0",
        },
        {"type": "event", "kind": "prompt", "turn": 1, "prompt": f"asked in {session}"},
    ]
    text = "".join(json.dumps(record) + "\n" for record in records)
    (directory / f"{session}.jsonl").write_text(text, encoding="utf-8")


async def test_the_newest_session_comes_first_within_one_second(
    editor: Editor, workspace: Path, state_dir: Path
) -> None:
    # The later session has the smaller random tail: ordered by id, it would come second.
    stored_session(state_dir, workspace, "20260101-120000-ffffff", "2026-01-01T12:00:00.100+00:00")
    stored_session(state_dir, workspace, "20260101-120000-000000", "2026-01-01T12:00:00.900+00:00")
    stored_session(state_dir, workspace, "20251231-235959-aaaaaa", "2025-12-31T23:59:59.000+00:00")

    listed = await editor.command("lspAgent.sessions", {})

    assert [item.session for item in listed] == [
        "20260101-120000-000000",
        "20260101-120000-ffffff",
        "20251231-235959-aaaaaa",
    ]
