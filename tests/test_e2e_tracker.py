"""The change tracker through the real server over stdio: what the user does between turns, seen
as the model sees it (real watchdog, real git, a scripted model on loopback). The stories do
not depend on the editor's capabilities: they share the module's server, with VS Code's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.editor import Editor
from tests.fake_model import ScriptedModel, note, reply, until_noted

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def editor_name() -> str:
    return "visual-studio-code"


@pytest.fixture
def editor(shared_editor: Editor) -> Editor:
    return shared_editor


@pytest.fixture
def workspace(shared_editor: Editor) -> Path:
    return shared_editor.root


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
    assert status.changes.ready
    assert status.changes.watching == "inotify"
