"""The change tracker through the real server over stdio: what the user does between turns, seen
as the model sees it (real watchdog, real git, a scripted model on loopback). The stories do
not depend on the editor's capabilities: they run with VS Code's only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from tests.conftest import settings_for
from tests.editor import Editor, start_editor
from tests.fake_model import Body, ScriptedModel, StepLike, reply, tool_call

POLLS = 40
"""Model calls a story may spend waiting for the watcher to have an event (each is a read)."""


def note(request: dict[str, Any]) -> str:
    """The `<file_changes>` block of a request's reminder ("" when there is none)."""
    text = str(request["messages"][-1]["content"])
    start = text.find("<file_changes>")
    return text[start:] if start >= 0 else ""


def until_noted(words: str, then: StepLike) -> list[StepLike]:
    """Model steps that list the files until the note mentions `words`, then `then`: the note
    is rebuilt at every call, so this waits on the fact, not on time. The wait never reads a
    file: a read that comes before the watcher's event makes the agent's view current, and the
    note then rightly has nothing to say about that file."""

    def step(request: Body) -> StepLike:
        if words in note(request):
            return then
        return tool_call("list_files", {})

    return [step] * POLLS


@pytest_asyncio.fixture
async def editor(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> AsyncIterator[Editor]:
    started = await start_editor(
        workspace, "visual-studio-code", settings_for(model), state_dir=state_dir, home=home
    )
    yield started
    await started.client.shutdown_session()
    await started.client.stop()


async def test_typing_in_a_buffer_the_agent_never_read_reaches_the_model_as_unsaved(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "notes.md").write_text("# notes\n")
    editor.open("notes.md", language="markdown")
    model.add(reply("hello"), reply("seen"))
    await editor.ask("hi")

    editor.type("notes.md", "# notes\n- ship on Friday\n")
    await editor.command("lspAgent.status", {})  # a round trip: the server has the change
    await editor.ask("and now?")

    block = note(model.requests[-1])
    assert "- notes.md: modified in editor, unsaved by the user" in block
    assert '<untrusted source="diff of notes.md">' in block
    assert "+- ship on Friday" in block
    assert (workspace / "notes.md").read_text() == "# notes\n"


async def test_a_link_planted_to_a_host_file_never_carries_its_text_to_the_model(
    editor: Editor, model: ScriptedModel, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("TOKEN=host-only-secret\n")
    model.add(reply("ready"))
    await editor.ask("start")

    (workspace / "planted.txt").symlink_to(secret)
    (workspace / "hello.py").write_text('def greet():\n    return "changed"\n')
    model.add(*until_noted("hello.py: modified", reply("seen")))
    await editor.ask("anything new?")

    block = note(model.requests[-1])
    assert "- planted.txt: added by the user" in block
    assert '+    return "changed"' in block
    assert all("host-only-secret" not in str(request) for request in model.requests)
    status = await editor.command("lspAgent.status", {})
    assert status.changes.ready and status.changes.watching == "inotify"
