"""Plain LSP for real: what a client without our plugins gets — code actions, arguments it can
send, progress and the answer on screen, every workspace folder — replayed the way Helix, eglot
and Neovim's built-in client send it, over a real server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
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

from lsp_agent.lsp.positions import TextEdit, apply_text_edits
from lsp_agent.tools import definitions
from tests.conftest import settings_for
from tests.editor import handles, server_env
from tests.fake_model import ScriptedModel, hang_after, reply, told, tool_call
from tests.neovim import user_message
from tests.raw_lsp import LATER, Error, RawClient


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
    client_name: str | None = None,
) -> LanguageClient:
    """A client as the LSP specification alone makes it: no `lspAgentClient` options (and the
    `clientInfo` name a client sends, when given)."""
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "lsp_agent", "serve", env=server_env(state, home))
    client.set_configuration({"lspAgent": settings_for(model)})
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=folders[0].as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders],
            initialization_options={"lspAgent": settings_for(model)},
            client_info=types.ClientInfo(name=client_name) if client_name else None,
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
    """A short answer is the message, whole, and nothing else. A long one begins in the message
    with the path of a document of its own, one per turn; Neovim's built-in client, which can
    open a document without taking the user's window, gets it shown (eglot 1.9 cannot)."""
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
        assert message.message == "It exports 41."
        assert client.shown_documents == []

        paths = []
        for turn in ("first", "second"):
            long = "".join(f"Line {i} of the {turn} answer.\n" for i in range(100))
            model.add(reply(long))
            await command(client, "lspAgent.ask", f"the {turn} long one")
            message = await shown(client, f"Line 0 of the {turn} answer.")
            path = Path(message.message.rsplit("(the whole answer: ", 1)[1].rstrip(")"))
            assert path.read_text() == long.strip() + "\n"
            paths.append(path)
        assert paths[0] != paths[1]
        assert paths[0].read_text().startswith("Line 0 of the first answer.")
        if name == "emacs":
            assert client.shown_documents == []
        else:
            shown_paths = [Path(unquote(urlparse(d.uri).path)) for d in client.shown_documents]
            assert shown_paths == paths
            assert all(d.take_focus is False for d in client.shown_documents)
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


# Helix, replayed over the server's real stdio as its source (helix-lsp/src/client.rs,
# helix-term/src/application.rs and commands/lsp.rs, master of July 2026) sends and answers.

HELIX_CAPABILITIES: dict[str, Any] = {
    "workspace": {
        "configuration": True,
        "didChangeConfiguration": {"dynamicRegistration": False},
        "workspaceFolders": True,
        "applyEdit": True,
        "executeCommand": {"dynamicRegistration": False},
        "workspaceEdit": {
            "documentChanges": True,
            "resourceOperations": ["create", "rename", "delete"],
            "failureHandling": "abort",
            "normalizesLineEndings": False,
        },
        "didChangeWatchedFiles": {"dynamicRegistration": True, "relativePatternSupport": True},
    },
    "textDocument": {
        "codeAction": {
            "codeActionLiteralSupport": {
                "codeActionKind": {
                    "valueSet": ["", "quickfix", "refactor", "refactor.extract", "source"]
                }
            },
            "isPreferredSupport": True,
            "disabledSupport": True,
            "dataSupport": True,
            "resolveSupport": {"properties": ["edit", "command"]},
        },
    },
    "window": {
        "showMessage": {"messageActionItem": {"additionalPropertiesSupport": True}},
        "workDoneProgress": True,
        "showDocument": {"support": True},
    },
    "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]},
}
"""What Helix master says it can do (the parts lsp-agent reads)."""

GREETER = '''import os


def greet(name):
    """Say hello."""
    message = f"hello {name}"
    return message


def leave():
    return "bye"
'''


class Helix:
    """Helix with lsp-agent in `languages.toml`, one Python file open: what it sends, and how
    it answers the server's requests (`space a`, its pickers, its status line)."""

    def __init__(
        self,
        folder: Path,
        model: ScriptedModel,
        state: Path,
        home: Path,
        *,
        asks: bool = True,
        on_question: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.folder = folder
        self.config = {"lspAgent": settings_for(model, questionTimeout=600)}
        self.on_question = on_question
        handlers: dict[str, Any] = {
            "window/workDoneProgress/create": lambda params: None,
            "workspace/configuration": self._configuration,
            "window/showDocument": lambda params: {"success": True},
            "workspace/applyEdit": self._apply_edit,
        }
        self.documents: dict[str, tuple[int, str]] = {}
        """Each open document's version and text, as Helix has it."""
        # Helix 25.07 and earlier cannot ask: an unknown request is "method not found".
        handlers["window/showMessageRequest"] = (
            self._question if asks else lambda params: Error(-32601, "Method not found")
        )
        capabilities = dict(HELIX_CAPABILITIES)
        if not asks:
            capabilities["window"] = {"workDoneProgress": True}
        self.client = RawClient(state, home, handlers)
        self.client.request(
            "initialize",
            {
                "processId": os.getpid(),
                "workspaceFolders": [{"uri": folder.as_uri(), "name": folder.name}],
                "rootPath": str(folder),
                "rootUri": folder.as_uri(),
                "initializationOptions": self.config,
                "capabilities": capabilities,
                "clientInfo": {"name": "helix", "version": "25.07.1 (079a789e)"},
            },
        )
        self.client.notify("initialized", {})
        self.client.notify("workspace/didChangeConfiguration", {"settings": self.config})

    def _configuration(self, params: dict[str, Any]) -> list[Any]:
        return [self.config.get(item.get("section", "")) for item in params["items"]]

    def _question(self, params: dict[str, Any]) -> Any:
        if self.on_question is not None:
            return self.on_question(params)
        return LATER

    def open(self, name: str, text: str) -> str:
        uri = (self.folder / name).as_uri()
        document = {"uri": uri, "languageId": "python", "version": 0, "text": text}
        self.documents[uri] = (0, text)
        self.client.notify("textDocument/didOpen", {"textDocument": document})
        return uri

    def _apply_edit(self, params: dict[str, Any]) -> dict[str, Any]:
        """Helix applies the edit to its documents (telling the server of each change as it
        goes), then answers."""
        for change in params["edit"].get("documentChanges", []):
            uri = change["textDocument"]["uri"]
            version, text = self.documents[uri]
            edits = [
                TextEdit(
                    e["range"]["start"]["line"],
                    e["range"]["start"]["character"],
                    e["range"]["end"]["line"],
                    e["range"]["end"]["character"],
                    e["newText"],
                )
                for e in change["edits"]
            ]
            text = apply_text_edits(text, edits, "utf-8")
            self.documents[uri] = (version + 1, text)
            self.client.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version + 1},
                    "contentChanges": [{"text": text}],
                },
            )
        return {"applied": True}

    def space_a(self, uri: str, line: int, character: int) -> list[dict[str, Any]]:
        """`space a` with the block cursor on one character: the code actions offered."""
        actions: list[dict[str, Any]] = self.client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": {
                    "start": {"line": line, "character": character},
                    "end": {"line": line, "character": character + 1},
                },
                "context": {"diagnostics": [], "triggerKind": 1},
            },
        )
        return actions

    def run(self, command: dict[str, Any]) -> Any:
        """An action's command, executed as Helix does: its arguments, no progress token."""
        return self.client.request(
            "workspace/executeCommand",
            {"command": command["command"], "arguments": command.get("arguments", [])},
        )

    def status_line(self, text: str) -> str:
        """The first `window/showMessage` (Helix's status line) that contains `text`."""
        found = self.client.wait_for(
            lambda m: m.get("method") == "window/showMessage" and text in m["params"]["message"],
            f"a message with {text!r}",
        )
        return str(found["params"]["message"])

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def helix_at(
    tmp_path: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> Iterator[Callable[..., Helix]]:
    opened: list[Helix] = []

    def start(**options: Any) -> Helix:
        folder = repository(tmp_path / f"project{len(opened)}", {"greeter.py": GREETER})
        opened.append(Helix(folder, model, state_dir, home, **options))
        return opened[-1]

    yield start
    for helix in opened:
        helix.close()


def test_helix_space_a_at_the_cursor_sends_the_function_around_it(
    helix_at: Callable[..., Helix], model: ScriptedModel
) -> None:
    helix = helix_at()
    uri = helix.open("greeter.py", GREETER)
    # The block cursor on the `m` of `message = …`, inside greet().
    actions = helix.space_a(uri, 5, 4)
    explain = next(a for a in actions if a["title"] == "lsp-agent: explain this")
    (argument,) = explain["command"]["arguments"]
    assert argument["range"] == {
        "start": {"line": 3, "character": 0},
        "end": {"line": 6, "character": 18},
    }

    model.add(reply("It greets."))
    started = helix.run(explain["command"])
    assert set(started) == {"session"}
    assert helix.status_line("It greets.") == "It greets."
    asked = user_message(model.requests[-1])
    assert "The user is looking at greeter.py, lines 4-7:" in asked
    assert 'def greet(name):\n    """Say hello."""' in asked
    assert "return message" in asked
    assert "def leave" not in asked

    # Between the functions there is no definition: the lines around the cursor go.
    actions = helix.space_a(uri, 8, 0)
    explain = next(a for a in actions if a["title"] == "lsp-agent: explain this")
    (argument,) = explain["command"]["arguments"]
    assert argument["range"]["start"] == {"line": 0, "character": 0}
    assert argument["range"]["end"]["line"] == 10


def test_helix_gets_short_answers_in_its_status_line_and_long_ones_as_a_file_per_turn(
    helix_at: Callable[..., Helix], model: ScriptedModel, state_dir: Path
) -> None:
    helix = helix_at()
    helix.open("greeter.py", GREETER)
    model.add(reply("Short."))
    helix.run({"command": "lspAgent.start", "arguments": ["what is this?"]})
    assert helix.status_line("Short.") == "Short."
    assert list(state_dir.rglob("answers/*.md")) == []

    first = "".join(f"Point {i} of the first answer.\n" for i in range(100))
    second = "".join(f"Point {i} of the second answer.\n" for i in range(100))
    model.add(reply(first))
    helix.run({"command": "lspAgent.start", "arguments": ["and in detail?"]})
    message = helix.status_line("Point 0 of the first answer.")
    model.add(reply(second))
    helix.run({"command": "lspAgent.start", "arguments": ["and again?"]})
    message_two = helix.status_line("Point 0 of the second answer.")

    first_file = Path(message.rsplit("(the whole answer: ", 1)[1].rstrip(")"))
    second_file = Path(message_two.rsplit("(the whole answer: ", 1)[1].rstrip(")"))
    assert first_file != second_file
    assert first_file.read_text() == first.strip() + "\n"  # not overwritten by the next turn
    assert second_file.read_text() == second.strip() + "\n"
    # Helix opens a shown document in place of the user's view: it is never sent one.
    assert helix.client.messages("window/showDocument") == []


@pytest.mark.parametrize("key", ["Enter", "Escape"])
def test_helix_master_asks_deny_first_and_enter_or_escape_denies_at_once(
    helix_at: Callable[..., Helix], model: ScriptedModel, key: str
) -> None:
    asked: list[dict[str, Any]] = []

    def select(params: dict[str, Any]) -> Any:
        asked.append(params)
        # Helix's select pre-selects the first choice: Enter answers it, Escape answers null.
        return params["actions"][0] if key == "Enter" else None

    helix = helix_at(on_question=select)
    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("Did not run it."))
    helix.run({"command": "lspAgent.start", "arguments": ["make a file"]})
    helix.status_line("Did not run it.")
    assert [action["title"] for action in asked[0]["actions"]] == [
        "Deny",
        "Allow",
        "Allow for this session",
    ]
    said = told(model, "bash")
    why = (
        "the user denied it"
        if key == "Enter"
        else "nobody answered the question (it was dismissed)"
    )
    assert f"needs the user's approval and {why}." in said  # at once, not at the time limit
    assert not (helix.folder / "made.txt").exists()


def test_helix_25_07_cannot_ask_and_the_command_is_denied_at_once(
    helix_at: Callable[..., Helix], model: ScriptedModel
) -> None:
    helix = helix_at(asks=False)
    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("Did not run it."))
    helix.run({"command": "lspAgent.start", "arguments": ["make a file"]})
    helix.status_line("Did not run it.")
    assert "nobody answered the question (it was dismissed)" in told(model, "bash")
    assert not (helix.folder / "made.txt").exists()


def test_helix_applies_an_edit_and_its_spinner_names_the_file_as_the_user_does(
    helix_at: Callable[..., Helix], model: ScriptedModel
) -> None:
    helix = helix_at()
    uri = helix.open("greeter.py", GREETER)
    model.add(
        tool_call("read_file", {"path": "greeter.py"}),
        tool_call("edit_file", {"path": "greeter.py", "old": '"bye"', "new": '"goodbye"'}),
        reply("Changed."),
    )
    helix.run({"command": "lspAgent.start", "arguments": ["say goodbye"]})
    helix.status_line("Changed.")
    assert told(model, "edit_file").startswith("applied: greeter.py\n")
    assert helix.documents[uri][1] == GREETER.replace('"bye"', '"goodbye"')
    reports = [
        m["params"]["value"].get("message", "")
        for m in helix.client.messages("$/progress")
        if m["params"]["value"]["kind"] == "report"
    ]
    assert "applied greeter.py" in reports
    assert not any("file://" in report for report in reports)


PLACES = [
    # (file, text, the cursor's line and column, the lines sent, whether a definition)
    ("a.py", "import os\n\n@cache\ndef f():\n    return 1\n", (4, 4), (2, 4), True),
    ("a.py", "class A:\n    def m(self):\n        pass\n", (2, 8), (1, 2), True),
    ("a.py", "class A:\n    x = 1\n", (0, 1), (0, 1), True),
    ("a.js", "const f = () => {\n  return 1;\n};\n", (1, 2), (0, 2), True),
    ("a.lua", "local M = {}\nfunction M.f()\n  return 1\nend\n", (3, 0), (1, 3), True),
    ("a.rs", "impl X {\n    fn b(&self) {}\n}\n", (1, 8), (1, 1), True),
    ("a.py", "x = 1\n\ny = 2\n", (1, 0), (0, 2), False),
    ("a.txt", "one\ntwo\n", (0, 0), (0, 1), False),
    ("a.py", "def f():\n" + "    x = 1\n" * 300, (150, 4), (140, 160), False),
]


@pytest.mark.parametrize(("name", "text", "cursor", "lines", "definition"), PLACES)
def test_the_code_at_the_cursor_is_the_definition_around_it_or_the_lines_around(
    name: str, text: str, cursor: tuple[int, int], lines: tuple[int, int], definition: bool
) -> None:
    found = definitions.around(name, text, *cursor)
    assert (found.first, found.last, found.definition) == (*lines, definition)


def test_a_prompt_sent_while_changed_settings_are_read_runs_with_the_new_ones(
    tmp_path: Path, model: ScriptedModel, state_dir: Path, home: Path, unused_port: int
) -> None:
    # The user fixes the endpoint's URL and presses Retry at once: the editor has announced
    # the change, the server has asked for the settings, and the answer is still on its way
    # when the prompt arrives (held back here, to make the moment last). The turn must not
    # run with the URL being replaced.
    folder = repository(tmp_path / "project", {"app.py": "x = 1\n"})
    nowhere = {"lspAgent": {**settings_for(model), "baseUrl": f"http://127.0.0.1:{unused_port}/v1"}}
    fixed = {"lspAgent": settings_for(model)}
    answers = [nowhere]
    client = RawClient(
        state_dir,
        home,
        {
            "workspace/configuration": lambda params: answers[0] if answers else LATER,
            "window/workDoneProgress/create": lambda params: None,
        },
    )
    try:
        client.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": folder.as_uri(),
                "workspaceFolders": [{"uri": folder.as_uri(), "name": folder.name}],
                "initializationOptions": nowhere,
                "capabilities": {"workspace": {"configuration": True}},
            },
        )
        client.notify("initialized", {})
        status = client.request("workspace/executeCommand", {"command": "lspAgent.status"})
        assert status["baseUrl"] == nowhere["lspAgent"]["baseUrl"]

        answers.clear()  # from now on the editor answers later
        asked = len(client.messages("workspace/configuration"))
        client.notify("workspace/didChangeConfiguration", {"settings": None})
        held = client.wait_for(
            lambda m: (
                m.get("method") == "workspace/configuration"
                and len(client.messages("workspace/configuration")) > asked
            ),
            "the server asking for the changed settings",
        )
        model.add(reply("Reached."))
        ask = client.send(
            "workspace/executeCommand",
            {"command": "lspAgent.ask", "arguments": [{"prompt": "hello"}]},
        )
        client.answer(held["id"], [fixed["lspAgent"]])
        result = client.response(ask)["result"]
        assert result["status"] == "completed", result
        assert result["answer"] == "Reached."
        assert len(model.requests) == 1
    finally:
        client.close()
