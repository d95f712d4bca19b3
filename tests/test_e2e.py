"""User stories end to end: a real LSP client over stdio, the server as a subprocess, and a
scripted OpenAI-compatible model on loopback (real HTTP and SSE).

The stories share the module's server (`shared_editor`: a fresh session, settings and workspace
each) and run with VS Code's client capabilities; the two whose outcome depends on the client run
with Neovim's as well, and say why. Stories about a server's own life start their own (`launch`).
The shape of the WorkspaceEdit for every recorded client is tests/test_workspace_edit.py's."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.conftest import EDITORS, Launcher, settings_for
from tests.editor import Editor, reject
from tests.fake_model import ScriptedModel, error, hang_after, reply, tool_call

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


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results the model was shown in one request, in order."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def last_tool_result(model: ScriptedModel) -> str:
    return tool_results(model.requests[-1])[-1]


def read_then_edit(path: str, old: str, new: str) -> list[Any]:
    return [
        tool_call("read_file", {"path": path}),
        tool_call("edit_file", {"path": path, "old": old, "new": new}),
    ]


async def test_the_user_accepts_an_edit_and_the_file_changes(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(*read_then_edit("hello.py", '"hello"', '"hello, world"'), reply("Changed it."))

    result = await editor.ask("make the greeting friendlier")

    assert result.status == "completed"
    assert result.answer == "Changed it."
    assert (result.edits.proposed, result.edits.applied, result.edits.rejected) == (1, 1, 0)
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello, world"\n'
    assert "applied" in last_tool_result(model)
    assert editor.edits_seen[0].label == "lsp-agent: hello.py"
    kinds = [e["kind"] for e in editor.events]
    assert {"text", "tool", "toolResult", "edit", "status"} <= set(kinds)
    assert editor.events_of("edit")[0]["applied"] is True
    assert editor.events_of("edit")[0]["uri"] == (workspace / "hello.py").as_uri()


@pytest.mark.parametrize("editor_name", EDITORS)  # annotations: VS Code has them, Neovim not
async def test_the_edit_is_minimal_and_annotated_as_the_client_supports(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    body = "".join(f"line {i}\n" for i in range(100))
    (workspace / "long.txt").write_text(body)
    model.add(*read_then_edit("long.txt", "line 50\n", "line fifty\n"), reply("ok"))

    await editor.ask("spell out 50")

    edit = editor.edits_seen[0].edit
    assert edit.document_changes is not None  # Neovim: implied by its resourceOperations
    (document_edit,) = edit.document_changes
    assert isinstance(document_edit, types.TextDocumentEdit)
    assert document_edit.text_document.version is None  # not open in the editor
    (text_edit,) = document_edit.edits
    assert isinstance(text_edit, (types.TextEdit, types.AnnotatedTextEdit))  # not a snippet
    if editor.vscode:
        assert isinstance(text_edit, types.AnnotatedTextEdit)
        assert edit.change_annotations is not None
        annotation = edit.change_annotations[text_edit.annotation_id]
        assert annotation.needs_confirmation is True
    else:  # no changeAnnotationSupport: plain edits, no annotations
        assert not isinstance(text_edit, types.AnnotatedTextEdit)
        assert edit.change_annotations is None
    assert text_edit.range.start.line == 50
    assert len(text_edit.new_text) < 10
    assert (workspace / "long.txt").read_text() == body.replace("line 50\n", "line fifty\n")


async def test_auto_mode_does_not_ask_for_confirmation(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(*read_then_edit("hello.py", "hello", "hi"), reply("ok"))
    await editor.ask("shorter", mode="auto")
    edit = editor.edits_seen[0].edit
    assert edit.change_annotations  # VS Code's capabilities: the edit is annotated
    assert all(not a.needs_confirmation for a in edit.change_annotations.values())


async def test_in_ask_mode_the_model_can_read_but_nothing_is_edited_or_run(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        *read_then_edit("hello.py", '"hello"', '"bye"'),  # the model tries anyway
        reply("It returns a greeting; I would change it to say bye."),
    )

    result = await editor.ask("what does greet return?", mode="ask")

    assert result.status == "completed"
    assert result.edits.proposed == 0
    assert editor.edits_seen == []
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    offered = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    assert {"read_file", "search", "list_files"} <= offered
    assert not offered & {"edit_file", "write_file", "apply_patch", "bash"}
    assert "ask mode" in str(model.requests[0]["messages"][-1]["content"])
    assert "not available: the user asked this in ask mode" in last_tool_result(model)
    assert editor.events_of("start")[0]["mode"] == "ask"
    items = await editor.command("lspAgent.history", {"session": result.session})
    assert [getattr(item, "mode", None) for item in items if item.type == "prompt"] == ["ask"]


async def test_the_user_rejects_the_edit_and_the_model_is_told_why(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.decide = reject("keep the greeting as it is")
    model.add(*read_then_edit("hello.py", '"hello"', '"bye"'), reply("Understood."))

    result = await editor.ask("change the greeting")

    assert result.status == "completed"
    assert (result.edits.proposed, result.edits.applied, result.edits.rejected) == (1, 0, 1)
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    told = last_tool_result(model)
    assert "rejected" in told
    assert "keep the greeting as it is" in told
    assert editor.events_of("edit")[0]["applied"] is False


async def test_a_rejection_after_the_user_typed_in_the_file_is_final_and_its_reason_told(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    """The user types elsewhere in the file, then rejects with a reason: no second review of
    the same edit, and the model hears the reason."""
    editor.open("hello.py", language="python")
    editor.before_apply = lambda: editor.type(
        "hello.py", 'def greet():\n    return "hello"\n# note\n'
    )
    editor.decide = reject("not this way")
    model.add(*read_then_edit("hello.py", '"hello"', '"bye"'), reply("Understood."))

    result = await editor.ask("change the greeting")

    assert len(editor.edits_seen) == 1  # shown once
    assert (result.edits.proposed, result.edits.applied, result.edits.rejected) == (1, 0, 1)
    told = last_tool_result(model)
    assert "the user rejected" in told
    assert "not this way" in told
    assert editor.buffers[editor.uri("hello.py")].text.endswith("# note\n")


async def test_a_refusal_without_a_word_while_the_user_types_is_merged_and_asked_once_more(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    """VS Code's own client refuses an edit made for an older version without saying why, and a
    user's "no" looks the same: the edit is merged onto the typing and shown once more; the
    second wordless refusal is the user's."""
    editor.open("hello.py", language="python")
    typed = iter(
        ['# one\ndef greet():\n    return "hello"\n', '# two\ndef greet():\n    return "hello"\n']
    )
    editor.before_apply = lambda: editor.type("hello.py", next(typed))
    editor.decide = reject(None)
    model.add(*read_then_edit("hello.py", '"hello"', '"bye"'), reply("Understood."))

    result = await editor.ask("change the greeting")

    assert len(editor.edits_seen) == 2  # once, then once merged onto "# one"
    assert (result.edits.proposed, result.edits.applied, result.edits.rejected) == (1, 0, 1)
    told = last_tool_result(model)
    assert "the user rejected" in told


async def test_old_text_not_found_or_ambiguous_goes_back_to_the_model(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "twice.py").write_text("x = 1\nx = 1\n")
    model.add(
        tool_call("read_file", {"path": "twice.py"}),
        tool_call("edit_file", {"path": "twice.py", "old": "y = 2", "new": "y = 3"}),
        tool_call("edit_file", {"path": "twice.py", "old": "x = 1", "new": "x = 2"}),
        reply("I could not make the edit."),
    )

    result = await editor.ask("edit twice.py")

    assert result.status == "completed"
    not_found, ambiguous = tool_results(model.requests[-1])[1:3]
    assert "not found" in not_found
    assert "read the file again" in not_found
    assert "2 times" in ambiguous
    assert "add" in ambiguous
    assert result.edits.proposed == 0
    assert (workspace / "twice.py").read_text() == "x = 1\nx = 1\n"


async def test_an_unsaved_buffer_is_read_and_the_edit_is_pinned_to_its_version(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    editor.open("hello.py", 'def greet():\n    return "unsaved"\n', "python")
    editor.type("hello.py", 'def greet():\n    return "typed"\n')
    model.add(*read_then_edit("hello.py", '"typed"', '"edited"'), reply("done"))

    result = await editor.ask("edit the greeting")

    assert result.status == "completed"
    assert result.edits.applied == 1
    assert '"typed"' in tool_results(model.requests[1])[0]  # the model saw the buffer
    buffer = editor.buffers[editor.uri("hello.py")]
    assert buffer.text == 'def greet():\n    return "edited"\n'
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    (document_edit,) = editor.edits_seen[0].edit.document_changes or []
    assert isinstance(document_edit, types.TextDocumentEdit)
    assert document_edit.text_document.version == 2


async def test_the_user_types_on_the_edited_line_between_read_and_edit_so_it_is_refused(
    editor: Editor, model: ScriptedModel
) -> None:
    editor.open("hello.py", language="python")
    typed = threading.Event()

    async def type_after_the_read() -> None:
        await editor.wait_for_event("toolResult")
        editor.type("hello.py", 'def greet():\n    return "mine"\n')
        await editor.command("lspAgent.status", {})  # a round trip: the server has the change
        typed.set()

    def edit_once_typed(request: dict[str, Any]) -> Any:
        assert typed.wait(20)
        return tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"x"'})

    model.add(tool_call("read_file", {"path": "hello.py"}), edit_once_typed, reply("ok"))
    typing = asyncio.create_task(type_after_the_read())

    result = await editor.ask("edit")
    await typing

    assert result.edits.proposed == 0
    told = last_tool_result(model)
    assert "hello.py changed after you read it" in told
    assert "on the lines your edit changes" in told
    assert 'return "mine"' in told  # the user's line, quoted
    assert editor.buffers[editor.uri("hello.py")].text == 'def greet():\n    return "mine"\n'


async def test_the_user_types_over_the_edited_line_while_it_is_previewed_so_it_is_not_applied(
    editor: Editor, model: ScriptedModel
) -> None:
    editor.open("hello.py", language="python")
    editor.before_apply = lambda: editor.type("hello.py", 'def greet():\n    return "mine"\n')
    model.add(*read_then_edit("hello.py", '"hello"', '"x"'), reply("ok"))

    result = await editor.ask("edit")

    assert result.edits.applied == 0
    assert result.edits.rejected == 1
    told = last_tool_result(model)
    assert "not proposed — hello.py changed after you read it" in told
    assert "Read the file again" in told
    assert editor.buffers[editor.uri("hello.py")].text == 'def greet():\n    return "mine"\n'


@pytest.mark.parametrize("editor_name", EDITORS)  # UTF-16 positions for VS Code, UTF-8 for Neovim
async def test_an_edit_after_emoji_lands_exactly_in_the_negotiated_encoding(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "emoji.py").write_text('s = "😀👍🏽 ok"; x = 1\nlast = "𝔘"\n', encoding="utf-8")
    model.add(
        tool_call("read_file", {"path": "emoji.py"}),
        tool_call("edit_file", {"path": "emoji.py", "old": "x = 1", "new": "x = 22"}),
        tool_call("edit_file", {"path": "emoji.py", "old": '"𝔘"', "new": '"𝔘𝔙"'}),
        reply("ok"),
    )

    result = await editor.ask("bump x")

    assert result.edits.applied == 2
    assert (workspace / "emoji.py").read_text(encoding="utf-8") == (
        's = "😀👍🏽 ok"; x = 22\nlast = "𝔘𝔙"\n'
    )


async def test_a_crlf_file_edited_with_lf_text_stays_crlf(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    model.add(*read_then_edit("win.txt", "two\nthree\n", "2\n3\n"), reply("ok"))

    result = await editor.ask("numbers")

    assert result.edits.applied == 1
    assert (workspace / "win.txt").read_bytes() == b"one\r\n2\r\n3\r\n"


async def test_a_new_file_is_created_through_the_editor(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("write_file", {"path": "pkg/new.py", "content": "VALUE = 1\n"}),
        tool_call("write_file", {"path": "hello.py", "content": "clobber\n"}),
        reply("ok"),
    )

    result = await editor.ask("add a module")

    assert (workspace / "pkg" / "new.py").read_text() == "VALUE = 1\n"
    assert "already exists" in last_tool_result(model)
    assert result.edits.applied == 1
    changes = editor.edits_seen[0].edit.document_changes or []
    assert isinstance(changes[0], types.CreateFile)


async def test_paths_outside_the_workspace_and_secrets_are_refused(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / ".env").write_text("API_KEY=secret\n")
    model.add(
        tool_call("read_file", {"path": "../outside.txt"}),
        tool_call("read_file", {"path": ".env"}),
        tool_call("edit_file", {"path": "hello.py", "old": "a", "new": "b"}),
        tool_call("read_file", "{not json"),
        reply("ok"),
    )

    result = await editor.ask("snoop")

    assert result.status == "completed"
    outside, env, unread, malformed = tool_results(model.requests[-1])
    assert "outside the workspace" in outside
    assert "protected" in env
    assert "API_KEY=secret" not in env
    assert "read_file first" in unread
    assert "not valid JSON" in malformed


async def test_the_model_endpoint_fails_once_with_500_and_the_turn_goes_on(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(error(500, "overloaded"), reply("fine now"))

    result = await editor.ask("hi")

    assert result.status == "completed"
    assert result.answer == "fine now"
    assert len(model.requests) == 2


async def test_an_unreachable_endpoint_fails_the_turn_with_a_clear_error(
    editor: Editor, unused_port: int
) -> None:
    url = f"http://127.0.0.1:{unused_port}/v1"
    await editor.configure({"baseUrl": url, "model": "m"})

    result = await editor.ask("hi")

    assert result.status == "failed"
    assert url in result.error
    assert "baseUrl" in result.error
    status = await editor.command("lspAgent.status", {})
    assert status.baseUrl == url


async def test_a_model_picker_gets_what_the_endpoint_lists_and_the_model_in_effect(
    editor: Editor, model: ScriptedModel
) -> None:
    model.models = ["test-model", "bigger-model"]
    await editor.configure({"baseUrl": model.base_url, "model": "test-model"})

    listed = await editor.command("lspAgent.models", {})

    assert listed.models == ["test-model", "bigger-model"]
    assert (listed.current, listed.baseUrl, listed.provider) == (
        "test-model",
        model.base_url,
        "openai",
    )
    await editor.configure({"baseUrl": "http://127.0.0.1:9/v1", "model": "test-model"})
    with pytest.raises(JsonRpcException) as raised:  # an endpoint that does not answer
        await editor.command("lspAgent.models", {})
    assert "127.0.0.1:9" in str(raised.value)
    await editor.configure({"baseUrl": model.base_url, "model": "test-model"})


async def test_a_missing_model_says_how_to_set_it(editor: Editor, model: ScriptedModel) -> None:
    await editor.configure({"baseUrl": model.base_url})

    with pytest.raises(JsonRpcException) as raised:
        await editor.ask("hi")

    assert "LSP_AGENT_MODEL" in str(raised.value)
    assert "lspAgent.model" in str(raised.value)
    assert model.requests == []


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ([{"prompt": 42}], "prompt"),
        ([{}], "prompt"),
        ([{"prompt": "x", "mode": "yolo"}], "mode"),
        ([{"prompt": "x", "range": {"start": {"line": 0, "character": 0}}}], "uri"),
        ([["a", "list"]], "the prompt as a string"),
    ],
)
async def test_bad_command_arguments_get_a_json_rpc_error_naming_the_key(
    editor: Editor, arguments: list[Any], named: str
) -> None:
    with pytest.raises(JsonRpcException) as raised:
        await editor.command("lspAgent.ask", *arguments)
    assert named in str(raised.value)
    status = await editor.command("lspAgent.status", {})  # still serving
    assert status.model == "test-model"


async def test_a_selection_goes_into_the_user_message(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(reply("It returns hello."))
    range_ = {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 18}}

    await editor.ask("what does this do?", uri=editor.uri("hello.py"), range=range_)

    user = next(m for m in model.requests[0]["messages"] if m["role"] == "user")["content"]
    assert "hello.py" in user
    assert 'return "hello"' in user
    assert "line 2" in user


async def test_a_second_ask_on_a_busy_session_is_refused(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(hang_after("thinking"))
    first = asyncio.create_task(editor.ask("slow"))
    text = await editor.wait_for_event("text")

    with pytest.raises(JsonRpcException) as raised:
        await editor.ask("again", session=text["session"])
    assert "already running" in str(raised.value)

    await editor.command("lspAgent.cancel", {"session": text["session"]})
    assert (await first).status == "cancelled"


async def test_cancel_with_the_command_closes_the_model_stream(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(hang_after("Let me think"))
    running = asyncio.create_task(editor.ask("think hard"))
    text = await editor.wait_for_event("text")
    await editor.wait_for_text("Let me think")  # all of it, before the cancel

    answer = await editor.command("lspAgent.cancel", {"session": text["session"]})

    assert answer.cancelled is True
    result = await running
    assert result.status == "cancelled"
    assert result.answer.startswith("Let me think")
    assert model.client_disconnected.wait(5)


async def test_cancel_with_cancel_request_closes_the_model_stream(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(hang_after("Let me think"))
    msg_id = str(uuid.uuid4())
    future = editor.client.protocol.send_request(
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command="lspAgent.ask", arguments=[{"prompt": "x"}]),
        msg_id=msg_id,
    )
    await editor.wait_for_event("text")

    editor.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    result = await asyncio.wait_for(asyncio.wrap_future(future), 20)
    assert result["status"] == "cancelled"
    assert model.client_disconnected.wait(5)
    status = (await editor.wait_for_event("status"))["status"]
    assert status == "cancelled"


async def test_cancel_from_the_progress_closes_the_model_stream(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(hang_after("Let me think"))
    token = "ask-1"
    running = asyncio.create_task(editor.command("lspAgent.ask", {"prompt": "x"}, token=token))
    await editor.wait_for_event("text")
    begin = editor.progress(token)[0]
    assert isinstance(begin, types.WorkDoneProgressBegin)
    assert begin.cancellable

    editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))

    result = await asyncio.wait_for(running, 20)
    assert result.status == "cancelled"
    assert model.client_disconnected.wait(5)
    assert isinstance(editor.progress(token)[-1], types.WorkDoneProgressEnd)


async def test_a_session_is_resumed_by_a_fresh_server_from_its_transcript(
    launch: Launcher, model: ScriptedModel
) -> None:
    model.add(*read_then_edit("hello.py", '"hello"', '"hola"'), reply("Saludos."))
    async with launch("visual-studio-code", settings_for(model)) as first:
        result = await first.ask("say it in Spanish")

    model.add(reply("You asked for Spanish."))
    async with launch("visual-studio-code", settings_for(model)) as second:
        listed = await second.command("lspAgent.sessions", {})
        assert [s.session for s in listed] == [result.session]
        assert listed[0].title == "say it in Spanish"
        assert listed[0].turns == 1
        again = await second.ask("what did I ask?", session=result.session)
        assert again.session == result.session
        sent = model.requests[-1]["messages"]
        assert any(m["role"] == "user" and m["content"] == "say it in Spanish" for m in sent)
        assert any(m["role"] == "assistant" and m.get("content") == "Saludos." for m in sent)
    transcript = next(launch.state_dir.rglob(f"{result.session}.jsonl")).read_text()
    records = [json.loads(line) for line in transcript.splitlines()]
    assert sum(1 for r in records if r["type"] == "turn") == 2


async def test_status_shows_settings_and_their_sources(
    launch: Launcher, model: ScriptedModel
) -> None:
    """A server of its own: status lists every session of the server."""
    model.add(reply("hi"))
    async with launch("visual-studio-code", settings_for(model)) as editor:
        result = await editor.ask("hello")
        status = await editor.command("lspAgent.status", {})
        assert status.model == "test-model"
        assert status.provider == "openai"
        assert status.contextWindow == 128000
        assert status.settings.model.source == "editor"
        (session,) = status.sessions
        assert session.session == result.session
        assert session.turns == 1
        assert session.running is False
        assert session.contextTokens > 0
        new = await editor.command("lspAgent.newSession", {})
        assert new.session != result.session


async def test_a_client_without_document_changes_gets_plain_changes(
    launch: Launcher, model: ScriptedModel
) -> None:
    """A server of its own: a bare client takes its settings at `initialize` only."""
    model.add(*read_then_edit("hello.py", '"hello"', '"hey"'), reply("ok"))
    async with launch("minimal", settings_for(model)) as editor:
        result = await editor.ask("shorter")

        assert result.edits.applied == 1
        edit = editor.edits_seen[0].edit
        assert edit.document_changes is None
        assert edit.changes is not None
        assert (launch.root / "hello.py").read_text() == 'def greet():\n    return "hey"\n'
