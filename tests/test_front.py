"""What the server puts in front of pygls (`lsp_agent/lsp/server.py`: `receive`, `editor_request`)
on its own, in this process: the server's requests to the editor answered, refused, withdrawn,
or answered with what lsprotocol cannot read; a `$/cancelRequest` that reaches a running command;
what the server writes staying ASCII JSON-RPC. The stories over stdio (test_malformed.py,
test_plain_lsp.py, the real editors) meet the same code as editors do."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from lsp_agent.lsp import names
from lsp_agent.lsp.app import create_server
from lsp_agent.lsp.server import AgentServer


class Wire:
    """What the server writes, as messages (each framed with its exact length)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.raw: list[bytes] = []

    def write(self, data: bytes) -> None:
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: %d\r\n" % len(body)), head
        self.raw.append(body)
        self.messages.append(json.loads(body))

    def close(self) -> None:
        pass

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method and "id" in m]

    def answer_to(self, msg_id: Any) -> dict[str, Any]:
        (found,) = [m for m in self.messages if "method" not in m and m.get("id") == msg_id]
        return found


def started(capabilities: dict[str, Any] | None = None) -> tuple[AgentServer, Wire]:
    """A server that has answered `initialize` (on the running loop), writing to a `Wire`."""
    server, wire = create_server(), Wire()
    server.attach(wire)
    server.receive(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {"processId": None, "capabilities": capabilities or {}},
        }
    )
    assert "result" in wire.answer_to("init")
    return server, wire


async def written(wire: Wire, method: str, count: int = 1) -> list[dict[str, Any]]:
    """The server's requests of `method` once `count` of them are out (each loop turn checked)."""
    while len(wire.requests(method)) < count:
        await asyncio.sleep(0)
    return wire.requests(method)


async def test_an_answer_reaches_the_request_and_an_error_answer_raises() -> None:
    server, wire = started()
    asked = asyncio.ensure_future(
        server.editor_request(
            types.WORKSPACE_APPLY_EDIT,
            types.ApplyWorkspaceEditParams(edit=types.WorkspaceEdit(changes={})),
        )
    )
    failing = asyncio.ensure_future(
        server.editor_request(types.WINDOW_SHOW_DOCUMENT, types.ShowDocumentParams(uri="file:///a"))
    )
    await written(wire, types.WINDOW_SHOW_DOCUMENT)
    (first,) = wire.requests(types.WORKSPACE_APPLY_EDIT)
    (second,) = wire.requests(types.WINDOW_SHOW_DOCUMENT)
    assert first["id"] != second["id"]
    server.receive({"jsonrpc": "2.0", "id": second["id"], "error": {"code": -1, "message": "no"}})
    server.receive({"jsonrpc": "2.0", "id": first["id"], "result": {"applied": True}})
    assert await asked == types.ApplyWorkspaceEditResult(applied=True)
    with pytest.raises(JsonRpcException) as raised:
        await failing
    assert (raised.value.code, raised.value.message) == (-1, "no")
    await server.close()


async def test_a_request_given_up_is_withdrawn_and_its_late_answer_dropped() -> None:
    server, wire = started()
    asked = asyncio.ensure_future(
        server.editor_request(
            types.WINDOW_SHOW_MESSAGE_REQUEST,
            types.ShowMessageRequestParams(type=types.MessageType.Warning, message="run it?"),
        )
    )
    (request,) = await written(wire, types.WINDOW_SHOW_MESSAGE_REQUEST)
    asked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked
    assert wire.messages[-1] == {
        "jsonrpc": "2.0",
        "method": "$/cancelRequest",
        "params": {"id": request["id"]},
    }
    count = len(wire.messages)
    server.receive({"jsonrpc": "2.0", "id": request["id"], "result": {"title": "Allow"}})
    server.receive({"jsonrpc": "2.0", "id": "never-sent", "error": "not an object"})
    await asyncio.sleep(0)
    assert len(wire.messages) == count  # nothing answered, nothing raised
    await server.close()


@pytest.mark.parametrize(
    "answer",
    [
        {"result": {"failureReason": "no applied member"}},
        {"result": None},
        {"error": {"code": "broken", "message": 5}},
    ],
    ids=["applied missing", "no result", "an error of the wrong shape"],
)
async def test_an_answer_lsprotocol_cannot_read_reaches_the_request_as_an_error(
    answer: dict[str, Any],
) -> None:
    server, wire = started()
    asked = asyncio.ensure_future(
        server.editor_request(
            types.WORKSPACE_APPLY_EDIT,
            types.ApplyWorkspaceEditParams(edit=types.WorkspaceEdit(changes={})),
        )
    )
    (request,) = await written(wire, types.WORKSPACE_APPLY_EDIT)
    server.receive({"jsonrpc": "2.0", "id": request["id"], **answer})
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(asked, 10)
    assert "workspace/applyEdit cannot be read" in raised.value.message
    logged = [
        m["params"]["message"] for m in wire.messages if m.get("method") == "window/logMessage"
    ]
    assert any("cannot be read" in line for line in logged), logged
    await server.close()


async def test_a_cancel_request_reaches_the_running_command_and_it_answers_once() -> None:
    server, wire = started()
    server.receive({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    # As if the editor's folders were not known yet: `newSession` waits for them until it is
    # cancelled.
    server.folders_ready.clear()
    server.receive(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "workspace/executeCommand",
            "params": {"command": names.NEW_SESSION, "arguments": [{}]},
        }
    )
    while 9 not in server.running:
        await asyncio.sleep(0)
    server.receive({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 9}})
    while not [m for m in wire.messages if m.get("id") == 9]:
        await asyncio.sleep(0)
    answer = wire.answer_to(9)
    assert answer["error"]["code"] == types.LSPErrorCodes.RequestCancelled.value, answer
    assert 9 not in server.running
    await server.close()


async def test_what_the_server_writes_is_ascii_and_carries_a_lone_surrogate() -> None:
    server, wire = started()
    server.log_message("é \ud800 😀")
    (body,) = [raw for raw in wire.raw if b"window/logMessage" in raw]
    assert body.isascii()
    assert json.loads(body)["params"]["message"] == "é \ud800 😀"
    await server.close()


def test_a_closed_pipe_is_not_raised_to_the_sender() -> None:
    from lsp_agent.lsp.connection import _Writer

    class Closed:
        def write(self, data: bytes) -> None:
            raise BrokenPipeError

        def flush(self) -> None:
            raise BrokenPipeError

        def close(self) -> None:
            pass

    writer = _Writer(Closed())  # type: ignore[arg-type]
    writer.write(b"Content-Length: 2\r\n\r\n{}")
    writer.write(b"Content-Length: 2\r\n\r\n{}")  # already known closed: dropped at once
