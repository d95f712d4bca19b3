"""The tool belt end to end: the syntax guard and `apply_patch` through a real LSP client over
stdio, the server as a subprocess, and a scripted model on loopback. The stories share the
module's server (VS Code's client capabilities: none depends on the client); two start their own,
and say why. How each client's WorkspaceEdit looks is tests/test_workspace_edit.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.conftest import Launcher, settings_for
from tests.editor import Editor
from tests.fake_model import ScriptedModel, reply, tool_call

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


THREE_FILES = """\
*** Begin Patch
*** Update File: hello.py
@@ def greet():
-    return "hello"
+    return "hi"
*** Add File: pkg/new.py
+from hello import greet
+
+print(greet())
*** Delete File: old.txt
*** End Patch
"""


def tool_results(model: ScriptedModel) -> list[str]:
    return [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]


def read(path: str) -> Any:
    return tool_call("read_file", {"path": path})


async def test_an_edit_that_breaks_python_is_refused_and_the_model_is_told_the_line(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        read("hello.py"),
        tool_call("edit_file", {"path": "hello.py", "old": "def greet():", "new": "def greet(:"}),
        reply("I broke nothing."),
    )

    result = await editor.ask("break it")

    assert result.edits.proposed == 0
    assert editor.edits_seen == []
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    refusal = tool_results(model)[-1]
    assert "syntax error in hello.py at line 1" in refusal
    assert "nothing was changed" in refusal


async def test_a_patch_over_three_files_arrives_as_one_workspace_edit_and_lands(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "old.txt").write_text("obsolete\n")
    model.add(
        read("hello.py"),
        read("old.txt"),
        tool_call("apply_patch", {"patch": THREE_FILES}),
        reply("Done."),
    )

    result = await editor.ask("rework the greeting")

    assert (result.edits.proposed, result.edits.applied, result.edits.rejected) == (1, 1, 0)
    (sent,) = editor.edits_seen
    operations = sent.edit.document_changes
    assert operations is not None
    assert isinstance(operations[0], types.CreateFile)  # created before its text goes in
    assert isinstance(operations[-1], types.DeleteFile)  # deleted last
    assert operations[-1].uri == (workspace / "old.txt").as_uri()
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hi"\n'
    assert (workspace / "pkg/new.py").read_text() == "from hello import greet\n\nprint(greet())\n"
    assert not (workspace / "old.txt").exists()
    answer = tool_results(model)[-1]
    assert "applied: edit hello.py, create pkg/new.py, delete old.txt" in answer


async def test_a_patch_with_one_bad_hunk_proposes_nothing_and_names_the_file_and_hunk(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    patch = (
        "--- a/hello.py\n+++ b/hello.py\n@@ -1,2 +1,2 @@\n def greet():\n"
        '-    return "hello"\n+    return "hi"\n'
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-zwei\n+TWO\n"
    )
    model.add(
        read("hello.py"),
        read("notes.txt"),
        tool_call("apply_patch", {"patch": patch}),
        reply("It did not fit."),
    )

    result = await editor.ask("patch two files")

    assert result.edits.proposed == 0
    assert editor.edits_seen == []
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    error = tool_results(model)[-1]
    assert "notes.txt" in error
    assert "hunk 1" in error


async def test_a_patch_with_a_file_never_read_proposes_nothing(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("apply_patch", {"patch": THREE_FILES.replace("*** Delete File: old.txt\n", "")}),
        reply("ok"),
    )

    await editor.ask("patch without reading")

    assert editor.edits_seen == []
    assert "hello.py has not been read" in tool_results(model)[-1]
    assert not (workspace / "pkg").exists()


async def test_a_patch_that_breaks_syntax_is_refused(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    broken = THREE_FILES.replace('+    return "hi"', '+    return "hi"(')
    (workspace / "old.txt").write_text("obsolete\n")
    model.add(read("hello.py"), read("old.txt"), tool_call("apply_patch", {"patch": broken}))
    model.add(reply("ok"))

    await editor.ask("patch badly")

    assert editor.edits_seen == []
    assert "syntax error in hello.py at line 2" in tool_results(model)[-1]
    assert (workspace / "old.txt").exists()


async def test_an_editor_that_cannot_delete_files_gets_nothing_and_the_model_is_told(
    launch: Launcher, model: ScriptedModel
) -> None:
    """A server of its own: a bare client takes its settings at `initialize` only."""
    workspace = launch.root
    async with launch("minimal", settings_for(model)) as editor:
        (workspace / "old.txt").write_text("obsolete\n")
        model.add(
            read("hello.py"), read("old.txt"), tool_call("apply_patch", {"patch": THREE_FILES})
        )
        model.add(reply("ok"))

        result = await editor.ask("rework the greeting")

        assert editor.edits_seen == []
        assert result.edits.applied == 0
        told = tool_results(model)[-1]
        assert "this editor cannot delete files over LSP" in told
        assert "tell the user" in told
        assert (workspace / "old.txt").exists()
        assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'


async def test_status_counts_edit_attempts_first_tries_and_failures_by_reason(
    launch: Launcher, model: ScriptedModel
) -> None:
    """A server of its own: the totals in status are over every session of the server."""
    model.add(
        read("hello.py"),
        tool_call("edit_file", {"path": "hello.py", "old": "'hello'", "new": "'hi'"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        tool_call("write_file", {"path": "bye.py", "content": "print('bye')\n"}),
        reply("Done."),
    )
    async with launch("visual-studio-code", settings_for(model)) as editor:
        result = await editor.ask("shorten the greeting and add a farewell")

        status = await editor.command("lspAgent.status", {"session": result.session})

    (session,) = status.sessions
    for edits in (session.edits, status.edits):
        assert (edits.attempts, edits.succeeded, edits.failed, edits.firstTry) == (3, 2, 1, 1)
        assert vars(edits.failures) == {"not_found": 1}
        assert vars(edits.byTool.edit_file) == {"attempts": 2, "succeeded": 1}
