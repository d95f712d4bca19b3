"""Malformed traffic on the server's stdin: every case is answered or refused cleanly, the next
valid request is answered, and nothing pops an error at the user.

Raw bytes over a real `lsp-agent serve` (no LSP library on this side: it would refuse to send
most of these), in a workspace whose path has spaces and non-ASCII letters. One server takes the
cases that keep the connection usable, one after the other, each followed by a valid request;
the lifecycle cases (before `initialize`, after `shutdown`, a bad first message) get their own.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.raw_lsp import frame, read_frame, spawn_server

ANSWER_WITHIN_S = 20.0
"""A hang guard: far above any real answer time."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
NOT_INITIALIZED = -32002


class RawServer:
    """`lsp-agent serve` driven byte by byte: what it writes is read on a thread."""

    def __init__(self, root: Path, tmp: Path) -> None:
        (tmp / "state").mkdir(exist_ok=True)
        (tmp / "home").mkdir(exist_ok=True)
        self.root = root
        self.process = spawn_server(tmp / "state", tmp / "home")
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self.next_id = 1000
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            message = read_frame(stream)
            self.messages.put(message)
            if message is None:
                return

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def answer(self, request_id: Any) -> dict[str, Any]:
        """The response to `request_id`; the server's own requests get a null result."""
        while True:
            try:
                message = self.messages.get(timeout=ANSWER_WITHIN_S)
            except queue.Empty:
                raise AssertionError(f"no answer to request {request_id!r}") from None
            assert message is not None, f"the server closed stdout before answering {request_id!r}"
            if "method" in message:
                if "id" in message:  # a request of the server's (configuration, …)
                    items = message.get("params", {}).get("items", [])
                    result = (
                        [None] * len(items) if message["method"].endswith("configuration") else None
                    )
                    self.send(frame({"jsonrpc": "2.0", "id": message["id"], "result": result}))
                else:
                    self.notifications.append(message)
                continue
            if message.get("id") == request_id:
                return message

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(frame(message))
        return self.answer(self.next_id)

    def status(self) -> dict[str, Any]:
        answer = self.request(
            "workspace/executeCommand", {"command": "lspAgent.status", "arguments": [{}]}
        )
        assert "result" in answer, answer
        return dict(answer["result"])

    def initialize(self) -> None:
        answer = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": self.root.as_uri(),
                "capabilities": {},
                "initializationOptions": {
                    "lspAgent": {"model": "m", "baseUrl": "http://127.0.0.1:9/v1"}
                },
            },
        )
        assert "result" in answer, answer
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def popups(self) -> list[str]:
        return [
            str(n["params"].get("message"))
            for n in self.notifications
            if n["method"] == "window/showMessage" and n["params"].get("type") == 1
        ]

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(10)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("odd") / "My Project ü é"
    path.mkdir()
    (path / "a file.py").write_text("x = 1\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def server(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    started = RawServer(root, tmp_path_factory.mktemp("server"))
    started.initialize()
    yield started
    started.close()


def body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


STATUS = {
    "jsonrpc": "2.0",
    "id": "after",
    "method": "workspace/executeCommand",
    "params": {"command": "lspAgent.status", "arguments": [{}]},
}

FRAMING: dict[str, bytes] = {
    "content-length of 20 digits": b"Content-Length: 99999999999999999999\r\n\r\n{}",
    "content-length of 10^12": b"Content-Length: 1000000000000\r\n\r\n{}",
    "content-length too small": b"Content-Length: 10\r\n\r\n" + body(STATUS | {"id": "short"}),
    "content-length too large": b"Content-Length: 400\r\n\r\n"
    + body({"jsonrpc": "2.0", "method": "x"}),
    "content-length missing": b"Content-Type: application/json\r\n\r\n" + body({"a": 1}),
    "content-length not a number": b"Content-Length: twelve\r\n\r\n{}",
    "content-length negative": b"Content-Length: -5\r\n\r\n{}",
    "garbage between messages": b"\x00\xff hello there \r\n",
    "a body that is not JSON": b"Content-Length: 9\r\n\r\nnot json!",
    "an empty body": b"Content-Length: 0\r\n\r\n",
    "JSON nested too deep": b"Content-Length: 200000\r\n\r\n" + b"[" * 100000 + b"]" * 100000,
}


@pytest.mark.parametrize("raw", list(FRAMING.values()), ids=list(FRAMING))
def test_bad_framing_is_refused_and_the_next_request_answered(
    server: RawServer, raw: bytes
) -> None:
    server.send(raw + frame(STATUS))
    answer = server.answer("after")
    assert answer["result"]["model"] == "m"
    assert server.popups() == []


def test_header_names_in_lower_case_and_lf_only_lines_are_read(server: RawServer) -> None:
    payload = body(STATUS | {"id": "lower"})
    server.send(b"content-length: %d\n\n" % len(payload) + payload)
    assert server.answer("lower")["result"]["model"] == "m"


SHAPES: dict[str, tuple[Any, int]] = {
    "no jsonrpc member": ({"id": 1, "method": "workspace/executeCommand"}, INVALID_REQUEST),
    "jsonrpc 1.0": ({"jsonrpc": "1.0", "id": 2, "method": "shutdown"}, INVALID_REQUEST),
    "method as a number": ({"jsonrpc": "2.0", "id": 3, "method": 7}, INVALID_REQUEST),
    "id as an object": ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "shutdown"}, INVALID_REQUEST),
    "a batch": ([{"jsonrpc": "2.0", "id": 4, "method": "shutdown"}], INVALID_REQUEST),
    "a bare string": ("hello", INVALID_REQUEST),
    "an unknown method": (
        {"jsonrpc": "2.0", "id": 5, "method": "lspAgent/nothing"},
        METHOD_NOT_FOUND,
    ),
    "executeCommand params an array": (
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "workspace/executeCommand",
            "params": ["lspAgent.status"],
        },
        INVALID_PARAMS,
    ),
    "executeCommand without params": (
        {"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand"},
        INVALID_PARAMS,
    ),
    "executeCommand without command": (
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "workspace/executeCommand",
            "params": {"arguments": []},
        },
        INVALID_PARAMS,
    ),
    "an unknown command": (
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "workspace/executeCommand",
            "params": {"command": "x"},
        },
        INVALID_PARAMS,
    ),
    "arguments not an array": (
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "workspace/executeCommand",
            "params": {"command": "lspAgent.status", "arguments": {"session": "s"}},
        },
        INVALID_PARAMS,
    ),
    "a prompt that is a number": (
        {
            "jsonrpc": "2.0",
            "id": 11,
            "method": "workspace/executeCommand",
            "params": {"command": "lspAgent.ask", "arguments": [{"prompt": 42}]},
        },
        INVALID_PARAMS,
    ),
    "a code action at a negative line": (
        {
            "jsonrpc": "2.0",
            "id": 13,
            "method": "textDocument/codeAction",
            "params": {
                "textDocument": {"uri": "file:///x.py"},
                "range": {
                    "start": {"line": -1, "character": 0},
                    "end": {"line": 0, "character": 0},
                },
                "context": {"diagnostics": []},
            },
        },
        INVALID_PARAMS,
    ),
    "a code action without its context": (
        {
            "jsonrpc": "2.0",
            "id": 14,
            "method": "textDocument/codeAction",
            "params": {
                "textDocument": {"uri": "file:///x.py"},
                "range": {
                    "start": {"line": 0, "character": 0},
                    "end": {"line": 0, "character": 0},
                },
            },
        },
        INVALID_PARAMS,
    ),
    "a second initialize": (
        {"jsonrpc": "2.0", "id": 15, "method": "initialize", "params": {"capabilities": {}}},
        INVALID_REQUEST,
    ),
    "a session that is a number": (
        {
            "jsonrpc": "2.0",
            "id": 12,
            "method": "workspace/executeCommand",
            "params": {"command": "lspAgent.cancel", "arguments": [{"session": 5}]},
        },
        INVALID_PARAMS,
    ),
}


@pytest.mark.parametrize(("payload", "code"), list(SHAPES.values()), ids=list(SHAPES))
def test_a_message_of_the_wrong_shape_gets_the_specifications_error(
    server: RawServer, payload: Any, code: int
) -> None:
    server.send(frame(payload))
    request_id = payload.get("id") if isinstance(payload, dict) else None
    answer = server.answer(request_id if isinstance(request_id, (int, str)) else None)
    assert answer["error"]["code"] == code, answer
    assert "TypeError" not in answer["error"]["message"]
    if isinstance(payload, dict) and payload.get("method") == "textDocument/codeAction":
        said = answer["error"]["message"]
        assert ("params.range.start" in said and "line" in said and "-1" in said) or (
            "params.context" in said
        ), answer  # the member that is wrong is named
    assert server.status()["model"] == "m"
    assert server.popups() == []


def test_notifications_of_the_wrong_shape_are_dropped_quietly(
    server: RawServer, root: Path
) -> None:
    uri = (root / "a file.py").as_uri()
    for payload in (
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": 5}},
        {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": []},
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": {"text": ""}},
        },
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1}},
        },
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didClose",
            "params": {"textDocument": {"uri": uri}},
        },
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "never-sent"}},
        {"jsonrpc": "2.0", "id": "unknown-response", "result": None},
    ):
        server.send(frame(payload))
    assert server.status()["model"] == "m"
    assert server.popups() == []


def test_a_huge_and_odd_document_is_taken(server: RawServer, root: Path) -> None:
    uri = (root / "a file.py").as_uri()
    text = ("lone \ud800 surrogate, emoji 🎉, NUL \x00 and a form feed \f\n" * 200_000)[:10_000_000]
    opened = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    server.send(
        frame(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": opened}}
        )
    )
    backwards = {"start": {"line": 3, "character": 0}, "end": {"line": 1, "character": 0}}
    server.send(
        frame(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": 2},
                    "contentChanges": [{"range": backwards, "text": "x"}],
                },
            }
        )
    )
    assert server.status()["model"] == "m"
    logged = [
        str(n["params"]["message"])
        for n in server.notifications
        if n["method"] == "window/logMessage"
    ]
    assert any("ends before it starts" in line for line in logged), logged
    assert server.popups() == []


def test_requests_before_initialize_are_refused_as_not_initialized(
    root: Path, tmp_path: Path
) -> None:
    fresh = RawServer(root, tmp_path)
    try:
        for command in ("lspAgent.status", "lspAgent.ask"):
            answer = fresh.request(
                "workspace/executeCommand", {"command": command, "arguments": [{"prompt": "hi"}]}
            )
            assert answer["error"]["code"] == NOT_INITIALIZED, answer
        assert fresh.request("initialize")["error"]["code"] == INVALID_PARAMS
        fresh.initialize()
        assert fresh.status()["model"] == "m"
    finally:
        fresh.close()


def test_requests_after_shutdown_are_refused_and_exit_ends_with_0(
    root: Path, tmp_path: Path
) -> None:
    fresh = RawServer(root, tmp_path)
    try:
        fresh.initialize()
        assert "error" not in fresh.request("shutdown")
        answer = fresh.request("workspace/executeCommand", {"command": "lspAgent.status"})
        assert answer["error"]["code"] == INVALID_REQUEST
        fresh.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert fresh.process.wait(ANSWER_WITHIN_S) == 0
    finally:
        fresh.close()


@pytest.mark.parametrize(
    "first",
    [
        b"Content-Length: 99999999999999999999\r\n\r\n{}",
        b"Content-Length: 1000000000000\r\n\r\n",
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    ],
    ids=["20 digits", "10^12", "a notification"],
)
def test_a_bad_first_message_leaves_the_server_able_to_start(
    root: Path, tmp_path: Path, first: bytes
) -> None:
    fresh = RawServer(root, tmp_path)
    try:
        fresh.send(first)
        fresh.initialize()
        assert fresh.status()["model"] == "m"
        assert fresh.process.poll() is None
    finally:
        fresh.close()
