"""Permission questions end to end: a real LSP client answers `window/showMessageRequest`, the
server runs the command in the real sandbox (or not at all), and the scripted model is told.

The stories share the module's server, with VS Code's client capabilities: how a question is
asked and answered is the same for every client (`window/showMessageRequest`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests import processes
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


ACTIONS = ["Deny", "Allow", "Allow for this session"]
"""The refusal first: the choice a client preselects, or a stray Enter takes, denies."""


def tool_results(model: ScriptedModel) -> list[str]:
    return [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]


def bash(command: str) -> Any:
    return tool_call("bash", {"command": command})


def answering(title: str | None) -> Any:
    def answer(_: types.ShowMessageRequestParams) -> str | None:
        return title

    return answer


async def test_the_user_allows_a_command_once_and_it_runs_in_the_sandbox(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.answer = answering("Allow")
    model.add(bash("touch made.txt && echo made"), bash("touch again.txt"), reply("done"))

    result = await editor.ask("make a file")

    assert result.status == "completed"
    assert (workspace / "made.txt").exists()
    assert (workspace / "again.txt").exists()
    assert len(editor.questions) == 2  # "Allow" is for this call only
    question = editor.questions[0]
    assert question.type == types.MessageType.Warning
    assert [a.title for a in question.actions or []] == ACTIONS
    assert "bash" in question.message or "command" in question.message
    assert "touch made.txt" in question.message
    made, _ = tool_results(model)
    assert made.startswith("exit code 0")
    assert '<untrusted source="bash">' in made
    assert "made" in made
    events = editor.events_of("permission")
    assert events[0]["name"] == "bash"
    assert events[0]["decision"] == "allow"


async def test_allow_for_this_session_is_not_asked_again_for_the_same_command(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.answer = answering("Allow for this session")
    model.add(
        bash("touch  one.txt"),
        bash("touch one.txt"),  # the same command, spaced differently
        bash("touch two.txt"),  # another command: asked
        reply("done"),
    )

    result = await editor.ask("make files")

    assert result.status == "completed"
    assert len(editor.questions) == 2
    assert "two.txt" in editor.questions[1].message
    # The question says what the answer covers: this exact command, nothing like it.
    covers = "“Allow for this session” allows this exact command again until the session ends"
    assert covers in editor.questions[0].message
    opened = editor.events_of("question", state="open")
    assert opened[0]["sessionCovers"].startswith(covers)
    assert all(r.startswith("exit code 0") for r in tool_results(model))
    model.add(bash("touch one.txt"), reply("again"))
    await editor.ask("once more", session=result.session)
    assert len(editor.questions) == 2  # still this session: still allowed


async def test_the_user_denies_a_command_and_nothing_runs(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.answer = answering("Deny")
    model.add(bash("touch denied.txt"), reply("ok, I will not"))

    result = await editor.ask("make a file")

    assert result.status == "completed"
    assert not (workspace / "denied.txt").exists()
    (told,) = tool_results(model)
    assert "not run" in told
    assert "denied" in told
    assert "Nothing ran" in told
    event = editor.events_of("permission")[0]
    assert event["name"] == "bash"
    assert event["decision"] == "deny"
    assert editor.events_of("toolResult")[0]["ok"] is False


async def test_a_dismissed_question_counts_as_deny(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.answer = None  # the user closes the message
    model.add(bash("touch ignored.txt"), reply("ok"))

    await editor.ask("make a file")

    assert len(editor.questions) == 1
    assert not (workspace / "ignored.txt").exists()
    (told,) = tool_results(model)
    assert "not run" in told
    assert "nobody answered" in told
    assert editor.events_of("permission")[0]["decision"] == "deny"


async def test_read_only_commands_run_without_a_question_and_network_tools_never_run(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.answer = answering("Allow")
    model.add(bash("ls && git status --short"), bash("curl http://example.com"), reply("ok"))

    await editor.ask("look around")

    assert editor.questions == []
    listing, curl = tool_results(model)
    assert "hello.py" in listing
    assert listing.startswith("exit code 0")
    assert "refused by policy" in curl
    assert "network" in curl
    event = editor.events_of("permission")[0]
    assert event["decision"] == "deny"
    assert event["asked"] is False


async def test_status_reports_the_sandbox_in_effect(editor: Editor) -> None:
    status = await editor.command("lspAgent.status", {})

    assert status.sandbox == "bwrap"  # the test machine has bubblewrap (scripts/test.sh)
    assert "bubblewrap" in status.sandboxReason


async def test_cancelling_the_turn_kills_the_running_command(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    sleep = f"1002.{uuid.uuid4().int % 10**6:06d}"
    os.mkfifo(workspace / "started")
    model.add(bash(f"sleep {sleep} & cat started"), reply("never"))
    running = asyncio.create_task(editor.ask("wait"))
    async with opened_for_writing(workspace / "started"):  # once the command reads the pipe
        assert processes.running(sleep)

        answer = await editor.command("lspAgent.cancel", {"session": editor.session})

    assert answer.cancelled is True
    assert (await running).status == "cancelled"
    assert processes.gone(sleep)


@contextlib.asynccontextmanager
async def opened_for_writing(fifo: Path, timeout: float = 20.0) -> AsyncIterator[None]:
    """Open a named pipe for writing, which returns once a reader has it open."""
    opening = asyncio.create_task(asyncio.to_thread(os.open, fifo, os.O_WRONLY))
    try:
        fd = await asyncio.wait_for(asyncio.shield(opening), timeout)
    except TimeoutError:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the waiting open return
        os.close(await opening)
        raise AssertionError(f"nothing opened {fifo.name} within {timeout}s") from None
    try:
        yield
    finally:
        os.close(fd)
