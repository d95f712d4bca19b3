"""Plain LSP for real: what a client without our plugins gets — code actions, arguments it can
send, progress and the answer on screen, every workspace folder — replayed the way Helix, eglot
and Neovim's built-in client send it, over a real server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import (
    DEFAULT_CLIENT_FEATURES,
    make_test_lsp_client,
    register_lsp_features,
)

from tests.conftest import settings_for
from tests.editor import handles, server_env
from tests.fake_model import ScriptedModel, hang_after, reply, tool_call


def repository(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


async def plain(
    folders: list[Path],
    model: ScriptedModel,
    state: Path,
    home: Path,
    capabilities: types.ClientCapabilities,
) -> LanguageClient:
    """A client as the LSP specification alone makes it: no `lspAgentClient` options."""
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "lsp_agent", "serve", env=server_env(state, home))
    client.set_configuration({"lspAgent": settings_for(model)})
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=folders[0].as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders],
            initialization_options={"lspAgent": settings_for(model)},
        )
    )
    return client


@pytest.fixture
def two_folders(tmp_path: Path) -> list[Path]:
    return [
        repository(tmp_path / "front", {"app.js": "export const answer = 41;\n"}),
        repository(tmp_path / "back", {"server.py": "ANSWER = 41\n"}),
    ]


@pytest_asyncio.fixture
async def helix(
    two_folders: list[Path], model: ScriptedModel, state_dir: Path, home: Path
) -> AsyncIterator[LanguageClient]:
    """Helix's capabilities are close to a bare client's: no window/showMessageRequest, no
    progress, no showDocument."""
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(apply_edit=True, workspace_folders=True),
        window=types.WindowClientCapabilities(work_done_progress=False),
    )
    client = await plain(two_folders[:1], model, state_dir, home, capabilities)
    yield client
    await client.shutdown_session()
    await client.stop()


async def shown(client: LanguageClient, text: str) -> types.ShowMessageParams:
    """The first `window/showMessage` that contains `text`, waiting for it."""
    while True:
        found = [m for m in client.messages if text in m.message]
        if found:
            return found[0]
        await asyncio.wait_for(client.wait_for_notification(types.WINDOW_SHOW_MESSAGE), 20)


async def code_action_request(client: LanguageClient, params: types.CodeActionParams) -> Any:
    """The raw JSON result: lsprotocol's own client-side parsing takes every code action that
    carries a command for a bare Command (its `_code_action_hook`), so the test reads the JSON."""
    protocol = client.protocol
    future = protocol.send_request(types.TEXT_DOCUMENT_CODE_ACTION, params, msg_id="actions")
    protocol._result_types["actions"] = None  # before the answer arrives: keep it as JSON
    return await asyncio.wrap_future(future)


def command(client: LanguageClient, name: str, *arguments: Any) -> Any:
    return client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(arguments))
    )


async def test_code_actions_offer_the_agent_at_the_cursor_and_for_each_problem(
    helix: LanguageClient, two_folders: list[Path], model: ScriptedModel
) -> None:
    uri = (two_folders[0] / "app.js").as_uri()
    problem = types.Diagnostic(
        range=types.Range(start=types.Position(0, 22), end=types.Position(0, 24)),
        message="the answer is 42, not 41",
        source="reviewer",
    )
    actions = await code_action_request(
        helix,
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
            context=types.CodeActionContext(diagnostics=[problem]),
        ),
    )
    assert [action["title"] for action in actions] == [
        "lsp-agent: fix this problem: the answer is 42, not 41",
        "lsp-agent: explain this",
        "lsp-agent: write tests for this",
    ]
    fix = actions[0]
    assert fix["kind"] == "quickfix"
    assert fix["diagnostics"][0]["message"] == problem.message
    assert fix["command"]["command"] == "lspAgent.start"
    (argument,) = fix["command"]["arguments"]
    assert "reviewer: the answer is 42, not 41" in argument["prompt"]
    assert "app.js" in argument["prompt"]

    model.add(reply("It should be 42."))
    started = await command(helix, fix["command"]["command"], *fix["command"]["arguments"])
    assert set(started) == {"session"}  # answered at once; the turn goes on
    await shown(helix, "It should be 42.")
    assert "line 1" in model.requests[-1]["messages"][1]["content"]


@pytest.mark.parametrize(
    "arguments",
    [
        ["what is the answer?"],
        ["what", "is", "the", "answer?"],
        [{"prompt": "what is the answer?"}],
    ],
    ids=["a string", "several strings", "an object"],
)
async def test_ask_takes_the_prompt_the_way_each_client_can_send_it(
    helix: LanguageClient, model: ScriptedModel, arguments: list[Any]
) -> None:
    model.add(reply("41."))
    result = await command(helix, "lspAgent.ask", *arguments)
    assert result["status"] == "completed"
    assert model.requests[-1]["messages"][1]["content"] == "what is the answer?"


async def test_no_arguments_get_an_error_saying_what_to_send(helix: LanguageClient) -> None:
    with pytest.raises(JsonRpcException) as raised:
        await command(helix, "lspAgent.ask")
    assert "prompt" in str(raised.value)
    assert "as a string" in str(raised.value)


async def test_a_client_that_did_not_ask_for_events_gets_none_but_sees_the_answer(
    helix: LanguageClient, model: ScriptedModel
) -> None:
    events: list[Any] = []

    @handles(helix, "lspAgent/event")
    def on_event(params: Any) -> None:
        events.append(params)

    model.add(reply("## The answer\n\nIt is **41**."))

    await command(helix, "lspAgent.ask", "what is the answer?")

    message = await shown(helix, "The answer")
    assert "It is **41**." in message.message
    assert message.type == types.MessageType.Info
    assert events == []


async def test_a_command_that_needs_approval_is_denied_when_the_client_cannot_ask(
    helix: LanguageClient, model: ScriptedModel, two_folders: list[Path]
) -> None:
    # Helix answers window/showMessageRequest with "method not found"; the test client cannot
    # (pytest-lsp fails a test on it), so it dismisses the question: the server treats both the
    # same, as no answer (lsp/port.py's ask_user).
    @handles(helix, types.WINDOW_SHOW_MESSAGE_REQUEST)
    def no_answer(params: types.ShowMessageRequestParams) -> None:
        return None

    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("could not"))
    await command(helix, "lspAgent.ask", "make a file")
    told = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert "not run" in told
    assert "nobody answered" in told
    assert not (two_folders[0] / "made.txt").exists()


async def test_a_client_that_never_accepts_a_progress_token_still_gets_its_answer(
    two_folders: list[Path], model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    """The server makes the progress token before the turn starts; a client that says it shows
    progress but never answers that request gets the turn without progress, not a hang."""
    client = LanguageClient(converter_factory=default_converter)
    never = asyncio.Event()

    async def silent(params: types.WorkDoneProgressCreateParams) -> None:
        await never.wait()  # no answer, ever

    features = {**DEFAULT_CLIENT_FEATURES, types.WINDOW_WORK_DONE_PROGRESS_CREATE: silent}
    register_lsp_features(client, features)
    await client.start_io(
        sys.executable, "-m", "lsp_agent", "serve", env=server_env(state_dir, home)
    )
    client.set_configuration({"lspAgent": settings_for(model)})
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("emacs"),
            root_uri=two_folders[0].as_uri(),
            initialization_options={"lspAgent": settings_for(model)},
        )
    )
    try:
        model.add(reply("It exports 41."))
        result = await command(client, "lspAgent.ask", "what does app.js export?")
        assert result["status"] == "completed"
        assert result["answer"] == "It exports 41."
        assert client.progress_reports == {}
        assert len(model.requests) == 1
    finally:
        never.set()
        await client.shutdown_session()
        await client.stop()


@pytest.mark.parametrize("name", ["emacs", "neovim"])
async def test_progress_and_the_answer_for_a_client_that_shows_them(
    two_folders: list[Path], model: ScriptedModel, state_dir: Path, home: Path, name: str
) -> None:
    """eglot shows progress but cannot open a document: the answer comes as a message naming
    its file; Neovim's built-in client can, and the answer opens as a Markdown document."""
    client = await plain(two_folders[:1], model, state_dir, home, client_capabilities(name))
    try:
        model.add(tool_call("read_file", {"path": "app.js"}), reply("It exports 41."))
        await command(client, "lspAgent.ask", "what does app.js export?")
        ((token, reports),) = client.progress_reports.items()
        assert str(token).startswith("lsp-agent-turn-")
        assert isinstance(reports[0], types.WorkDoneProgressBegin)
        assert isinstance(reports[-1], types.WorkDoneProgressEnd)
        assert any("read_file" in (getattr(r, "message", "") or "") for r in reports)
        message = await shown(client, "It exports 41.")
        if name == "emacs":
            assert client.shown_documents == []
            assert "the whole answer: " in message.message
        else:
            (document,) = client.shown_documents
            path = Path(unquote(urlparse(document.uri).path))
            assert path.suffix == ".md"
            assert path.read_text() == "It exports 41.\n"
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_each_workspace_folder_runs_its_own_agent(
    two_folders: list[Path], model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    front, back = two_folders
    client = await plain(
        two_folders, model, state_dir, home, client_capabilities("visual-studio-code")
    )
    try:
        with pytest.raises(JsonRpcException) as raised:
            await command(client, "lspAgent.ask", {"prompt": "hi"})
        assert "2 folders" in str(raised.value)
        assert str(front) in str(raised.value)

        for folder, mine, other in ((front, "app.js", "server.py"), (back, "server.py", "app.js")):
            model.add(tool_call("list_files", {}), reply("listed"))
            uri = (folder / mine).as_uri()
            result = await command(client, "lspAgent.ask", {"prompt": "list", "uri": uri})
            assert result["status"] == "completed"
            listed = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
            assert mine in listed[-1]
            assert other not in listed[-1]

        sessions = await command(client, "lspAgent.sessions", {})
        assert {item["folder"] for item in sessions} == {front.as_uri(), back.as_uri()}
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_a_folder_added_later_gets_an_agent(
    two_folders: list[Path], model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    front, back = two_folders
    client = await plain([front], model, state_dir, home, client_capabilities("visual-studio-code"))
    try:
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=back.as_uri(), name="back")], removed=[]
                )
            )
        )
        model.add(reply("ok"))
        result = await command(client, "lspAgent.ask", {"prompt": "hi", "folder": back.as_uri()})
        assert result["status"] == "completed"
        status = await command(client, "lspAgent.status", {})
        assert {f["folder"] for f in status["folders"]} == {front.as_uri(), back.as_uri()}
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_a_turn_started_for_a_client_that_times_requests_out_reports_itself(
    helix: LanguageClient, model: ScriptedModel
) -> None:
    model.add(hang_after("Thinking"))
    started = await command(helix, "lspAgent.start", "think hard")
    cancelled = await command(helix, "lspAgent.cancel", {"session": started["session"]})
    assert cancelled == {"cancelled": True}
    message = await shown(helix, "the turn was cancelled")
    assert message.type == types.MessageType.Info


@pytest.mark.parametrize(
    ("setting_name", "named"),
    [
        (None, "lspAgent.model"),
        ("setup({ settings = { %s = … } })", "setup({ settings = { model = … } })"),
    ],
)
async def test_a_command_error_names_the_setting_the_way_the_client_sets_it(
    tmp_path: Path,
    model: ScriptedModel,
    state_dir: Path,
    home: Path,
    setting_name: str | None,
    named: str,
) -> None:
    folder = repository(tmp_path / "project", {"app.py": "x = 1\n"})
    settings = {k: v for k, v in settings_for(model).items() if k != "model"}
    options: dict[str, Any] = {"lspAgent": settings}
    if setting_name is not None:
        options["lspAgentClient"] = {"settingName": setting_name}
    client = make_test_lsp_client()
    await client.start_io(
        sys.executable, "-m", "lsp_agent", "serve", env=server_env(state_dir, home)
    )
    client.set_configuration({"lspAgent": settings})
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            root_uri=folder.as_uri(),
            initialization_options=options,
        )
    )
    try:
        with pytest.raises(JsonRpcException) as raised:
            await command(client, "lspAgent.ask", {"prompt": "hi"})
        assert f"no model configured: set {named}" in str(raised.value)
        assert model.requests == []
    finally:
        await client.shutdown_session()
        await client.stop()
