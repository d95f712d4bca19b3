"""What a chat needs of the server after a restart: `lspAgent.sessions` lists the newest session
first (the chat opens it as the conversation that goes on), also when two began in the same
second; and `lspAgent.status` still knows the tokens the session used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_agent.session.store import SessionStore
from tests.conftest import Launcher, settings_for
from tests.editor import start_editor
from tests.fake_model import ScriptedModel, reply


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
    launch: Launcher, model: ScriptedModel
) -> None:
    """A server of its own: it lists every session of the workspace."""
    state_dir, workspace = launch.state_dir, launch.root
    # The later session has the smaller random tail: ordered by id, it would come second.
    stored_session(state_dir, workspace, "20260101-120000-ffffff", "2026-01-01T12:00:00.100+00:00")
    stored_session(state_dir, workspace, "20260101-120000-000000", "2026-01-01T12:00:00.900+00:00")
    stored_session(state_dir, workspace, "20251231-235959-aaaaaa", "2025-12-31T23:59:59.000+00:00")

    async with launch("visual-studio-code", settings_for(model)) as editor:
        listed = await editor.command("lspAgent.sessions", {})

    assert [item.session for item in listed] == [
        "20260101-120000-000000",
        "20260101-120000-ffffff",
        "20251231-235959-aaaaaa",
    ]


async def test_a_resumed_session_still_knows_the_tokens_it_used(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    prices = {"input": 3.0, "cachedInput": 0.3, "output": 15.0}
    settings = settings_for(model, prices=prices)
    model.add(
        reply("one", prompt_tokens=1000, cached_tokens=600),
        reply("two", prompt_tokens=1500, cached_tokens=1000),
    )
    first = await start_editor(workspace, "neovim", settings, state_dir=state_dir, home=home)
    try:
        result = await first.ask("hi")
        await first.ask("again", session=result.session)
        live = (await first.command("lspAgent.status", {"session": result.session})).sessions[0]
    finally:
        await first.client.shutdown_session()
        await first.client.stop()

    again = await start_editor(workspace, "neovim", settings, state_dir=state_dir, home=home)
    try:
        await again.command("lspAgent.history", {"session": result.session})  # loads it
        status = await again.command("lspAgent.status", {"session": result.session})
    finally:
        await again.client.shutdown_session()
        await again.client.stop()

    (restored,) = status.sessions
    assert (restored.usage.inputTokens, restored.usage.cachedInputTokens) == (2500, 1600)
    assert restored.usage.outputTokens == live.usage.outputTokens > 0
    assert restored.usage.cost == pytest.approx(live.usage.cost)
