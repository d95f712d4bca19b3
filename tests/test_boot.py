"""`initialize`, as every recorded editor sends it and as a hostile one might, and the start of
`lsp-agent serve` (`lsp_agent/lsp/boot.py`).

The server writes its answer as plain JSON; each answer is read back through lsprotocol (the
LSP's types, generated from the specification's model), so a misspelt member or a wrong shape
fails here before an editor sees it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from lsprotocol.converters import get_converter
from pytest_lsp import client_capabilities
from pytest_lsp.client import make_test_lsp_client

from lsp_agent.lsp import names
from lsp_agent.lsp.app import create_server
from lsp_agent.lsp.positions import ENCODINGS as POSITION_ENCODINGS
from lsp_agent.lsp.server import AGENT_MODULES
from tests.editor import server_env
from tests.raw_lsp import frame

SERVE = "from lsp_agent.lsp.boot import serve_stdio; from lsp_agent.lsp.connection import end_process; end_process(serve_stdio())"  # noqa: E501

CONVERTER = get_converter()


def recorded_capabilities() -> list[tuple[str, dict[str, Any]]]:
    """Every capability set pytest-lsp recorded, raw from its JSON files (unknown keys kept),
    and a client that states none."""
    found: list[tuple[str, dict[str, Any]]] = [("bare", {})]
    for resource in resources.files("pytest_lsp.clients").iterdir():
        if resource.name.endswith(".json"):
            found.append((resource.name, json.loads(resource.read_text())["capabilities"]))
    return sorted(found, key=lambda item: item[0])


RECORDED = recorded_capabilities()


def initialize(capabilities: Any, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"processId": 4242, "capabilities": capabilities, **params},
    }


def split_frames(data: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    """Every message in `data`; fails if anything but framed JSON-RPC is there."""
    messages = []
    rest = data
    while rest:
        head, separator, body = rest.partition(b"\r\n\r\n")
        assert separator, f"not a framed message: {rest[:200]!r}"
        lengths = [
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ]
        assert len(lengths) == 1, f"a message without one Content-Length: {head!r}"
        assert len(body) >= lengths[0], f"an incomplete message: {rest[:200]!r}"
        raw = head + separator + body[: lengths[0]]
        message = json.loads(body[: lengths[0]])
        assert isinstance(message, dict), raw
        assert message.get("jsonrpc") == "2.0", raw
        messages.append((raw, message))
        rest = body[lengths[0] :]
    return messages


class Capture:
    """A writer for the server that keeps what it is given."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass


def answers(message: Any) -> list[dict[str, Any]]:
    """Every message the server writes when it receives `message` first, in this process (on
    an event loop of its own, as the connection runs it)."""

    async def receive() -> bytes:
        server = create_server()
        out = Capture()
        server.attach(out)
        server.receive(message)
        await server.close()
        return bytes(out.data)

    return [body for _, body in split_frames(asyncio.run(receive()))]


def expected_encoding(capabilities: dict[str, Any]) -> str:
    offered = capabilities.get("general", {}).get("positionEncodings") or []
    return next((e for e in offered if e in POSITION_ENCODINGS), "utf-16")


@pytest.mark.parametrize(("name", "capabilities"), RECORDED, ids=[n for n, _ in RECORDED])
def test_each_recorded_editor_is_answered_with_what_the_server_offers(
    name: str, capabilities: dict[str, Any]
) -> None:
    (answer,) = answers(initialize(capabilities, "init-1", rootPath="/project", trace="off"))
    assert answer["id"] == "init-1"
    result = CONVERTER.structure(answer["result"], types.InitializeResult)
    offered = result.capabilities
    assert offered.position_encoding == expected_encoding(capabilities)
    assert offered.execute_command_provider is not None
    assert list(offered.execute_command_provider.commands) == list(names.COMMANDS)
    sync = offered.text_document_sync
    assert isinstance(sync, types.TextDocumentSyncOptions)
    assert sync.change == types.TextDocumentSyncKind.Incremental
    assert sync.open_close is True
    assert sync.save is True  # didSave: a formatter may rewrite the file next
    assert offered.workspace is not None
    assert offered.workspace.workspace_folders is not None
    assert offered.workspace.workspace_folders.supported is True
    assert offered.workspace.workspace_folders.change_notifications is True
    assert isinstance(offered.code_action_provider, types.CodeActionOptions)
    assert result.server_info is not None
    assert result.server_info.name == "lsp-agent"


def test_the_client_s_first_encoding_the_server_counts_in_wins() -> None:
    general = {"positionEncodings": ["utf-7", "utf-32", "utf-8"]}
    (answer,) = answers(initialize({"general": general}))
    assert answer["result"]["capabilities"]["positionEncoding"] == "utf-32"
    (answer,) = answers(initialize({"general": {"positionEncodings": ["utf-7"]}}))
    assert answer["result"]["capabilities"]["positionEncoding"] == "utf-16"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.floats(-1, 1) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)
capability_sets = st.dictionaries(
    st.sampled_from(["general", "textDocument", "workspace", "window", "experimental"]),
    json_values
    | st.fixed_dictionaries(
        {},
        optional={
            "positionEncodings": json_values,
            "synchronization": json_values,
            "workspaceEdit": json_values,
            "workDoneProgress": json_values,
            "configuration": json_values,
            "showDocument": json_values,
        },
    ),
)
params_members = st.fixed_dictionaries(
    {},
    optional={
        "rootUri": json_values,
        "rootPath": json_values,
        "workspaceFolders": json_values,
        "initializationOptions": json_values,
        "clientInfo": json_values,
        "trace": json_values,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(capabilities=capability_sets | json_values, members=params_members)
def test_any_initialize_is_answered_once_with_a_result_or_the_specifications_error(
    capabilities: Any, members: dict[str, Any]
) -> None:
    written = answers(initialize(capabilities, 7, **members))
    (answer,) = [m for m in written if "method" not in m]
    assert answer["id"] == 7
    if "error" in answer:
        assert answer["error"]["code"] == -32602, answer  # Invalid params, naming the member
        assert "params" in answer["error"]["message"]
        return
    CONVERTER.structure(answer["result"], types.InitializeResult)
    # Whatever the client said of itself, a readable answer still agrees a known encoding.
    assert answer["result"]["capabilities"]["positionEncoding"] in POSITION_ENCODINGS


def session(
    code: str, first: list[dict[str, Any]], tmp_path: Path, **env: str
) -> list[tuple[bytes, Any]]:
    """Run a server over stdio through initialize → status → shutdown → exit; all it wrote."""
    state, home = tmp_path / "state", tmp_path / "home"
    state.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**server_env(state, home), **env},
    )
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        for message in [
            *first,
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {
                "jsonrpc": "2.0",
                "id": "status",
                "method": "workspace/executeCommand",
                "params": {"command": names.STATUS, "arguments": [{}]},
            },
        ]:
            server.stdin.write(frame(message))
        server.stdin.flush()
        written = bytearray()
        answered: set[Any] = set()
        while True:
            chunk = os.read(server.stdout.fileno(), 65536)
            assert chunk, "the server closed stdout early"
            written += chunk
            for _, body in complete_frames(bytes(written)):
                if "method" in body and "id" in body and body["id"] not in answered:
                    answered.add(body["id"])
                    respond(server.stdin, body)
                elif body.get("id") == "status":
                    server.stdin.write(frame({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"}))
                    server.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
                    server.stdin.close()
                    while chunk := os.read(server.stdout.fileno(), 65536):
                        written += chunk
                    assert server.wait(20) == 0
                    return split_frames(bytes(written))
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def complete_frames(data: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    """The complete messages at the start of `data` (a partial one at the end left out)."""
    complete = data
    while complete:
        try:
            return split_frames(complete)
        except (AssertionError, ValueError):
            cut = complete.rfind(b"Content-Length:")
            if cut <= 0:
                return []
            complete = complete[:cut]
    return []


def respond(stdin: Any, request: dict[str, Any]) -> None:
    """Answer a request of the server's as a plain editor would."""
    items = request.get("params", {}).get("items", [])
    result = [None] * len(items) if request["method"] == "workspace/configuration" else None
    stdin.write(frame({"jsonrpc": "2.0", "id": request["id"], "result": result}))
    stdin.flush()


def responses_to(request_id: Any, written: list[tuple[bytes, Any]]) -> list[tuple[bytes, Any]]:
    return [
        (raw, body) for raw, body in written if "method" not in body and body["id"] == request_id
    ]


@pytest.mark.parametrize(("name", "capabilities"), RECORDED[:3], ids=[n for n, _ in RECORDED[:3]])
def test_lsp_agent_serve_answers_initialize_first_and_once(
    name: str, capabilities: dict[str, Any], tmp_path: Path
) -> None:
    written = session(SERVE, [initialize(capabilities, rootUri=tmp_path.as_uri())], tmp_path)
    ((answer, body),) = responses_to(1, written)
    assert written[0][0] == answer  # the very first bytes on stdout
    assert body["result"]["capabilities"]["executeCommandProvider"]["commands"] == list(
        names.COMMANDS
    )
    ((_, status),) = responses_to("status", written)
    assert status["result"]["folders"][0]["folder"] == tmp_path.resolve().as_uri()


@pytest.mark.parametrize("editor_name", ["visual-studio-code", "neovim"])
async def test_an_editor_is_served_with_its_settings_folder_and_configuration(
    editor_name: str, workspace: Path, state_dir: Path, home: Path
) -> None:
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-c", SERVE, env=server_env(state_dir, home))
    client.set_configuration({"lspAgent": {"baseUrl": "http://127.0.0.1:9/v1"}})
    params = types.InitializeParams(
        capabilities=client_capabilities(editor_name),
        process_id=4242,
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
        initialization_options={"lspAgent": {"model": "from-initialization-options"}},
    )
    result = await client.initialize_session(params)
    try:
        assert result.capabilities.execute_command_provider is not None
        created: Any = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=names.NEW_SESSION, arguments=[{}])
        )
        assert created["session"]  # the workspace folder from initialize is in place
        status: Any = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=names.STATUS, arguments=[{}])
        )
        assert status["model"] == "from-initialization-options"  # initializationOptions read
        assert status["baseUrl"] == "http://127.0.0.1:9/v1"  # workspace/configuration answered
        assert [s["session"] for s in status["sessions"]] == [created["session"]]
    finally:
        await client.shutdown_session()
        await client.stop()


def test_a_stray_print_while_the_server_loads_goes_to_stderr_not_to_the_editor(
    tmp_path: Path,
) -> None:
    noisy = (
        "from lsp_agent.lsp import boot, server\n"
        "from lsp_agent.lsp.connection import end_process\n"
        "load = server.import_agent\n"
        "server.import_agent = lambda: (print('loading…'), load())\n"
        "end_process(boot.serve_stdio())\n"
    )
    written = session(noisy, [initialize({})], tmp_path)  # fails on anything but JSON-RPC
    assert len(responses_to(1, written)) == 1


def test_the_agent_loads_as_soon_as_initialize_is_answered(tmp_path: Path) -> None:
    """`initialize` is answered once pygls is loaded; the agent stack loads right after, without
    waiting for `initialized` or a first command, so the first ask finds it loaded."""
    probe = (
        "import sys\n"
        "from lsp_agent.lsp import boot, server\n"
        "from lsp_agent.lsp.connection import end_process\n"
        "load = server.import_agent\n"
        "def import_agent():\n"
        "    load()\n"
        "    loaded = [m for m in server.AGENT_MODULES if m in sys.modules]\n"
        "    sys.stderr.write(f'loaded {loaded}\\n')\n"
        "    sys.stderr.flush()\n"
        "server.import_agent = import_agent\n"
        "end_process(boot.serve_stdio())\n"
    )
    state, home = tmp_path / "state", tmp_path / "home"
    state.mkdir()
    home.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-c", probe],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(state, home),
    )
    assert server.stdin is not None
    assert server.stderr is not None
    try:
        server.stdin.write(frame(initialize({})))
        server.stdin.flush()
        # Only `initialize` was sent: the stack loads all the same.
        while line := server.stderr.readline():
            if line.startswith(b"loaded "):
                assert line.decode().strip() == f"loaded {list(AGENT_MODULES)}"
                break
        else:
            raise AssertionError("the server ended without loading the agent")
    finally:
        server.kill()
        server.wait()


def test_a_certificate_setting_that_names_no_file_does_not_stop_the_server(
    tmp_path: Path,
) -> None:
    """The certificates are loaded while the server starts; a bad `SSL_CERT_FILE` is the first
    request's error to report, not a server that never starts."""
    missing = str(tmp_path / "no-such-bundle.pem")
    written = session(SERVE, [initialize({})], tmp_path, SSL_CERT_FILE=missing)
    assert len(responses_to(1, written)) == 1
    ((_, status),) = responses_to("status", written)
    assert "result" in status, status
