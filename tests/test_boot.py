"""The fast `initialize` of `lsp_agent/lsp/boot.py`: the editor gets pygls' own answer, only sooner.

pygls is the oracle. Each client's `initialize` is answered by the boot module and by pygls (in
this process, and as two real servers over stdio); the answers must be byte for byte the same.
Then the editor keeps working on the fast path: pygls has processed the same `initialize`
(workspace, settings), commands answer, and stdout carries exactly one `initialize` response.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
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
from pygls.exceptions import JsonRpcException
from pytest_lsp import client_capabilities
from pytest_lsp.client import make_test_lsp_client

from lsp_agent.lsp import boot, names
from lsp_agent.lsp.app import create_server
from tests.editor import server_env

PLAIN = (
    "import sys; from lsp_agent.lsp.connection import serve, end_process; "
    "from lsp_agent.lsp.app import create_server; "
    "end_process(serve(create_server(), sys.stdin.buffer, sys.stdout.buffer))"
)
FAST = (
    "from lsp_agent.lsp.boot import serve_stdio; from lsp_agent.lsp.connection import end_process; "
    "end_process(serve_stdio())"
)

CLIENTS = ["visual-studio-code", "neovim", "neovim@v0.7.0", "neovim@v0.6.1", "emacs", "bare"]


def capabilities_of(client: str) -> dict[str, Any]:
    """The client's capabilities as it sends them, via pytest-lsp's recorded sets."""
    if client == "bare":
        return {}
    unstructured: dict[str, Any] = get_converter().unstructure(client_capabilities(client))
    return unstructured


def recorded_capabilities() -> list[tuple[str, dict[str, Any]]]:
    """Every capability set pytest-lsp recorded, raw from its JSON files (unknown keys kept)."""
    found = []
    for resource in resources.files("pytest_lsp.clients").iterdir():
        if resource.name.endswith(".json"):
            found.append((resource.name, json.loads(resource.read_text())["capabilities"]))
    return sorted(found, key=lambda item: item[0])


def initialize(capabilities: Any, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"processId": 4242, "capabilities": capabilities, **params},
    }


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def split_frames(data: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    """Every message in `data`; fails if anything but framed JSON-RPC is there."""
    messages = []
    buffer = bytearray(data)
    while buffer:
        taken = boot._take_frame(buffer)
        assert taken is not None, f"an incomplete message at the end of stdout: {bytes(buffer)!r}"
        raw, body = taken
        assert isinstance(body, dict), f"not JSON-RPC: {raw!r}"
        assert body.get("jsonrpc") == "2.0", f"not JSON-RPC: {raw!r}"
        messages.append((raw, body))
    return messages


class Capture:
    """A writer for pygls that keeps what it is given."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass


def pygls_response(message: dict[str, Any]) -> bytes | None:
    """pygls' framed response to `message`, computed in this process; None when it sends none."""
    server = create_server()
    out = Capture()
    server.protocol.set_writer(out)

    async def answer() -> None:
        parsed = json.loads(json.dumps(message), object_hook=server.protocol.structure_message)
        server.protocol.handle_message(parsed)
        for _ in range(50):  # an async handler would answer a few loop turns later
            if out.data:
                return
            await asyncio.sleep(0)

    try:
        asyncio.run(answer())
    except JsonRpcException:
        return None  # pygls cannot read the parameters: it logs that and answers nothing
    responses = [raw for raw, body in split_frames(bytes(out.data)) if "method" not in body]
    assert len(responses) <= 1
    return responses[0] if responses else None


@pytest.mark.parametrize("client", CLIENTS)
def test_each_editor_gets_the_answer_pygls_gives(client: str) -> None:
    message = initialize(capabilities_of(client), rootUri="file:///project")
    fast = boot.initialize_response(message)
    assert fast is not None, "the fast path must answer every known editor"
    assert boot.frame(fast) == pygls_response(message)


@pytest.mark.parametrize(
    ("name", "capabilities"), recorded_capabilities(), ids=[n for n, _ in recorded_capabilities()]
)
def test_raw_recorded_capabilities_get_the_answer_pygls_gives(
    name: str, capabilities: dict[str, Any]
) -> None:
    message = initialize(capabilities, "init-1", rootPath="/project", trace="off")
    fast = boot.initialize_response(message)
    assert fast is not None, name
    assert boot.frame(fast) == pygls_response(message)


def test_the_answer_offers_the_commands_sync_and_folders_of_design_3() -> None:
    fast = boot.initialize_response(initialize(capabilities_of("neovim")))
    assert fast is not None
    capabilities = fast["result"]["capabilities"]
    assert capabilities["executeCommandProvider"]["commands"] == list(names.COMMANDS)
    assert capabilities["textDocumentSync"]["change"] == 2  # incremental
    assert capabilities["workspace"]["workspaceFolders"]["supported"] is True
    assert capabilities["positionEncoding"] == "utf-8"  # Neovim 0.11 prefers it


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.floats(-1, 1) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=5,
)

ABSENT = object()


def field(strategy: st.SearchStrategy[Any], junk: bool = True) -> st.SearchStrategy[Any]:
    """A member that is mostly (7 in 10) well-formed, else absent, null or (`junk`) any JSON."""
    other = [st.just(ABSENT), st.none(), json_values if junk else strategy]
    return st.integers(0, 9).flatmap(lambda n: strategy if n < 7 else other[n - 7])


def obj(**members: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object of `field`s, absent ones left out."""
    return st.fixed_dictionaries(members).map(
        lambda built: {k: v for k, v in built.items() if v is not ABSENT}
    )


encodings = st.lists(
    st.sampled_from(["utf-8", "utf-16", "utf-32", "UTF-8", "utf-7", "", "latin-1"]) | json_values,
    min_size=1,
    max_size=4,
)
synchronization = obj(
    willSave=field(st.booleans()),
    willSaveWaitUntil=field(st.booleans()),
    didSave=field(st.booleans()),
)
# Odd values only where the boot module reads (see the test of a malformed capability elsewhere).
markdown = st.just({"parser": "marked", "version": "1.1.0"})
hover = st.just({"contentFormat": ["markdown", "plaintext"]})
capabilities = obj(
    general=field(obj(positionEncodings=field(encodings), markdown=field(markdown, junk=False))),
    textDocument=field(obj(synchronization=field(synchronization), hover=field(hover, junk=False))),
    workspace=field(st.just({"workspaceFolders": True, "configuration": True}), junk=False),
    notebookDocument=field(
        st.just({"synchronization": {"dynamicRegistration": False}}), junk=False
    ),
    experimental=field(json_values),
)
uris = st.sampled_from(["file:///project", "file:///a%20b", "", "not a uri", "file://"])


def initialize_messages(junk: bool) -> st.SearchStrategy[dict[str, Any]]:
    """`initialize` requests with odd capabilities, and (`junk`) odd everything else too."""
    params = obj(
        capabilities=field(capabilities, junk),
        processId=field(st.integers(0, 2**31), junk),
        rootUri=field(uris, junk),
        rootPath=field(st.sampled_from(["/project", "relative", ""]), junk),
        locale=field(st.just("fr"), junk),
        trace=field(st.sampled_from(["off", "messages", "verbose", "bogus"]), junk),
        clientInfo=field(obj(name=st.text(max_size=4), version=field(st.text(max_size=4))), junk),
        workspaceFolders=field(st.lists(obj(uri=uris, name=st.text(max_size=4)), max_size=2), junk),
        initializationOptions=field(obj(lspAgent=field(st.just({"model": "m"}))), junk),
        workDoneToken=field(st.integers() | st.text(max_size=4), junk),
    )
    if not junk:
        return obj(
            jsonrpc=st.just("2.0"),
            id=st.integers(0, 10) | st.text(max_size=3),
            method=st.just("initialize"),
            params=params,
        )
    return obj(
        jsonrpc=st.sampled_from(["2.0"] * 9 + ["1.0"]),
        id=field(st.integers(0, 10) | st.text(max_size=3)),
        method=st.sampled_from(["initialize"] * 9 + ["shutdown"]),
        params=field(params),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initialize_messages(junk=False))
def test_for_odd_capabilities_the_fast_path_answers_as_pygls_or_not_at_all(
    message: dict[str, Any],
) -> None:
    fast = boot.initialize_response(message)
    if fast is not None:
        assert boot.frame(fast) == pygls_response(message)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initialize_messages(junk=True))
def test_whenever_the_fast_path_answers_pygls_answers_the_same(message: dict[str, Any]) -> None:
    fast = boot.initialize_response(message)
    if fast is not None:
        assert boot.frame(fast) == pygls_response(message)


ODD_REQUESTS = {
    "processId text": initialize({}, processId="x"),
    "processId true": initialize({}, processId=True),
    "processId float": initialize({}, processId=1.5),
    "no capabilities": {**initialize({}), "params": {"processId": 1}},
    "capabilities null": initialize(None),
    "trace bogus": initialize({}, trace="bogus"),
    "clientInfo without name": initialize({}, clientInfo={"version": "1"}),
    "folder without name": initialize({}, workspaceFolders=[{"uri": "file:///p"}]),
    "workDoneToken object": initialize({}, workDoneToken={}),
    "settings null": initialize({}, initializationOptions={"lspAgent": None}),
    "settings list": initialize({}, initializationOptions={"lspAgent": [1]}),
    "settings elsewhere": initialize({}, initializationOptions={"model": "m"}),
    "general list": initialize({"general": []}),
    "general number": initialize({"general": 5}),
    "encodings with an object": initialize({"general": {"positionEncodings": [{}, "utf-8"]}}),
    "encodings number": initialize({"general": {"positionEncodings": 8}}),
    "encodings text": initialize({"general": {"positionEncodings": "utf-8"}}),
    "encodings with a number": initialize({"general": {"positionEncodings": [1, "utf-8"]}}),
    "encodings upper case": initialize({"general": {"positionEncodings": ["UTF-8", "utf-32"]}}),
    "encodings unknown": initialize({"general": {"positionEncodings": ["utf-7"]}}),
    "encodings empty": initialize({"general": {"positionEncodings": []}}),
    "textDocument list": initialize({"textDocument": []}),
    "synchronization list": initialize({"textDocument": {"synchronization": []}}),
    "synchronization number": initialize({"textDocument": {"synchronization": 5}}),
    "textDocument text": initialize({"textDocument": "x"}),
    "willSave object": initialize({"textDocument": {"synchronization": {"willSave": {}}}}),
    "willSave text": initialize({"textDocument": {"synchronization": {"willSave": "yes"}}}),
    "willSave false": initialize({"textDocument": {"synchronization": {"willSave": False}}}),
    "willSaveWaitUntil only": initialize(
        {"textDocument": {"synchronization": {"willSaveWaitUntil": True}}}
    ),
    "id float": initialize({}, 1.5),
    "id null": initialize({}, None),
    "id true": initialize({}, True),
    "jsonrpc 1.0": {**initialize({}), "jsonrpc": "1.0"},
    "extra member": {**initialize({}), "extra": 1},
}


@pytest.mark.parametrize("message", ODD_REQUESTS.values(), ids=ODD_REQUESTS.keys())
def test_an_odd_request_is_answered_as_pygls_answers_it_or_left_to_pygls(
    message: dict[str, Any],
) -> None:
    fast = boot.initialize_response(message)
    if fast is not None:
        assert boot.frame(fast) == pygls_response(message)


def test_a_malformed_capability_the_boot_does_not_read_is_the_one_known_difference() -> None:
    """pygls cannot read such a request and never answers it, so the editor waits forever; the
    boot does not check the ~300 capability fields it does not use, so it answers. Either way
    that session is broken, by a client bug no real editor has (their capabilities are typed,
    and every pygls server would reject them)."""
    message = initialize({"textDocument": {"hover": {"contentFormat": 5}}})
    assert pygls_response(message) is None
    assert boot.initialize_response(message) is not None


def test_settings_the_initialize_feature_may_refuse_are_left_to_pygls() -> None:
    message = initialize({}, initializationOptions={"lspAgent": None})
    assert boot.initialize_response(message) is None
    # Today pygls answers with an internal error: the INITIALIZE feature calls dict(None).
    assert pygls_response(message) is not None


def test_the_first_message_is_read_as_pygls_frames_it() -> None:
    body = json.dumps(initialize({})).encode()
    data = b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body)
    stream = io.BytesIO(data + body + b"Content-Length: 2\r\n\r\n{}")
    consumed, message = boot.read_first_message(stream)
    assert consumed == data + body
    assert message == initialize({})
    assert stream.read() == b"Content-Length: 2\r\n\r\n{}"


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (b"content-length: 2\r\n\r\n{}", 21),  # pygls wants the header exactly so
        (b"Content-Length: 2\n\n{}", 18),  # bare newlines
        (b"Content-Length: 2\r\n \r\n{}", 22),  # a blank line that is not empty
        (b"Content-Length: 0\r\n\r\n", 21),
        (b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 38),
        (b"Content-Length: 2\r\n\r\n{]", 23),
        (b"\r\n", 2),
    ],
)
def test_any_other_framing_is_handed_to_pygls_unread_past_the_message(
    data: bytes, read: int
) -> None:
    stream = io.BytesIO(data + b"Content-Length: 2\r\n\r\n{}")
    consumed, message = boot.read_first_message(stream)
    assert message is None
    assert consumed == data[:read]  # the rest stays in stdin for pygls


def test_a_stream_that_ends_mid_message_is_handed_to_pygls_as_read() -> None:
    consumed, message = boot.read_first_message(io.BytesIO(b"Content-Length: 9\r\n\r\n{}"))
    assert (consumed, message) == (b"Content-Length: 9\r\n\r\n{}", None)
    assert boot.read_first_message(io.BytesIO(b"")) == (b"", None)


def response_filter(sent: dict[str, Any]) -> tuple[boot.DropResponse, io.BytesIO]:
    out = io.BytesIO()
    out.close = lambda: None  # type: ignore[method-assign]  # keep it readable after close()
    return boot.DropResponse(out, sent), out


def test_pygls_answer_to_initialize_is_dropped_and_all_else_passes_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent = boot.initialize_response(initialize({}, 7))
    assert sent is not None
    log = boot.frame({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"x": 1}})
    other = boot.frame({"jsonrpc": "2.0", "id": 7, "method": "workspace/configuration"})
    later = boot.frame({"jsonrpc": "2.0", "id": 2, "result": None})
    stream = log + other + boot.frame(sent) + later
    drop, out = response_filter(sent)
    for start in range(0, len(stream), 5):  # whatever the chunks pygls writes in
        drop.write(stream[start : start + 5])
    drop.close()
    assert out.getvalue() == log + other + later
    assert "no longer matches" not in caplog.text


def test_a_different_answer_from_pygls_is_logged_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent = boot.initialize_response(initialize({}))
    assert sent is not None
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}
    drop, out = response_filter(sent)
    with caplog.at_level(logging.ERROR, logger="lsp_agent.lsp.boot"):
        drop.write(boot.frame(error))
    assert out.getvalue() == b""
    assert "no longer matches" in caplog.text


def respond(stdin: Any, request: dict[str, Any]) -> None:
    """What a simple editor answers to the server's requests."""
    result: Any = None
    if request["method"] == "workspace/configuration":
        result = [None for _ in request["params"]["items"]]
    stdin.write(frame({"jsonrpc": "2.0", "id": request["id"], "result": result}))
    stdin.flush()


def session(code: str, first: list[dict[str, Any]], tmp_path: Path) -> list[tuple[bytes, Any]]:
    """Run a server over stdio through initialize → status → shutdown → exit; all it wrote."""
    state, home = tmp_path / "state", tmp_path / "home"
    state.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(state, home),
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
        buffer = bytearray()
        while True:
            chunk = os.read(server.stdout.fileno(), 65536)
            assert chunk, "the server closed stdout early"
            written += chunk
            buffer += chunk
            taken = boot._take_frame(buffer)
            while taken is not None:
                body = taken[1]
                if "method" in body and "id" in body:
                    respond(server.stdin, body)
                elif body.get("id") == "status":
                    server.stdin.write(frame({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"}))
                    server.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
                    server.stdin.close()
                    while chunk := os.read(server.stdout.fileno(), 65536):
                        written += chunk
                    assert server.wait(20) == 0
                    return split_frames(bytes(written))
                taken = boot._take_frame(buffer)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def responses_to(request_id: Any, written: list[tuple[bytes, Any]]) -> list[tuple[bytes, Any]]:
    return [
        (raw, body) for raw, body in written if "method" not in body and body["id"] == request_id
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_the_fast_server_answers_as_the_plain_one_and_only_once(
    client: str, tmp_path: Path
) -> None:
    first = [initialize(capabilities_of(client), rootUri=tmp_path.as_uri())]
    plain = session(PLAIN, first, tmp_path)
    fast = session(FAST, first, tmp_path)
    ((plain_answer, _),) = responses_to(1, plain)
    ((fast_answer, _),) = responses_to(1, fast)
    assert fast_answer == plain_answer
    assert fast[0][0] == fast_answer  # the very first bytes on stdout
    ((_, plain_status),) = responses_to("status", plain)
    ((_, fast_status),) = responses_to("status", fast)
    # How far the change tracker got watching the folder is a matter of timing, not of mode.
    assert plain_status["result"].pop("changes")
    assert fast_status["result"].pop("changes")
    assert plain_status["result"].pop("folders")
    assert fast_status["result"].pop("folders")
    assert fast_status == plain_status


@pytest.mark.parametrize(
    "first",
    [
        [initialize({}, 1.5)],  # an id pygls echoes as it is, which the boot leaves to it
        [initialize({}, initializationOptions={"lspAgent": None})],  # the server warns
        [{"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}}, initialize({})],
    ],
    ids=["float-id", "bad-settings", "notification-first"],
)
def test_what_the_boot_cannot_vouch_for_is_answered_by_pygls_as_before(
    first: list[dict[str, Any]], tmp_path: Path
) -> None:
    request_id = first[-1]["id"]
    plain = session(PLAIN, first, tmp_path)
    fast = session(FAST, first, tmp_path)
    ((plain_answer, _),) = responses_to(request_id, plain)
    ((fast_answer, _),) = responses_to(request_id, fast)
    assert fast_answer == plain_answer


@pytest.mark.parametrize("editor_name", ["visual-studio-code", "neovim"])
async def test_an_editor_on_the_fast_path_is_served_as_before(
    editor_name: str, workspace: Path, state_dir: Path, home: Path
) -> None:
    """pygls processed the same initialize: the editor's settings, folder and config all count."""
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-c", FAST, env=server_env(state_dir, home))
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
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
        message = {**request, "params": get_converter().unstructure(params)}
        oracle = await asyncio.to_thread(pygls_response, message)
        assert oracle is not None
        assert (
            get_converter().unstructure(result)
            == json.loads(oracle.split(b"\r\n\r\n")[1])["result"]
        )
        created: Any = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=names.NEW_SESSION, arguments=[{}])
        )
        assert created["session"]  # the workspace folder from initialize is in place
        status: Any = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=names.STATUS, arguments=[{}])
        )
        assert status["model"] == "from-initialization-options"  # our INITIALIZE feature ran
        assert status["baseUrl"] == "http://127.0.0.1:9/v1"  # workspace/configuration answered
        assert [s["session"] for s in status["sessions"]] == [created["session"]]
    finally:
        await client.shutdown_session()
        await client.stop()


def test_a_stray_print_while_the_server_loads_goes_to_stderr_not_to_the_editor(
    tmp_path: Path,
) -> None:
    noisy = (
        "from lsp_agent.lsp import boot\n"
        "from lsp_agent.lsp.connection import end_process\n"
        "load = boot._import_server\n"
        "boot._import_server = lambda: (print('loading…'), load())\n"
        "end_process(boot.serve_stdio())\n"
    )
    written = session(noisy, [initialize({})], tmp_path)  # fails on anything but JSON-RPC
    assert len(responses_to(1, written)) == 1
