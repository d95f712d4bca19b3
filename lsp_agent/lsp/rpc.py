"""JSON-RPC 2.0 as LSP frames it: the server's side of one connection, on plain dicts.

lsp-agent speaks the protocol itself. Its messages are few (the lifecycle, buffer sync, code
actions, `workspace/executeCommand`, and a handful of requests to the editor) and every one is
checked where it is read (`protocol.py`), so a library of every LSP type — more to import and to
keep in memory than the rest of the server — bought nothing but a slower start.

`Peer` writes messages, matches the editor's answers to the server's requests, and withdraws a
request the server stops waiting for; `RpcError` is an error answer, either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800

CONTENT_TYPE = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"

MsgId = int | str


class RpcError(Exception):
    """An error answer: one the server sends, or one the editor sent to the server's request."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(detail: object) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid Params: {detail}")


def invalid_request(message: str) -> RpcError:
    return RpcError(INVALID_REQUEST, message)


def frame(message: dict[str, Any]) -> bytes:
    """One message as it goes on the wire: headers, then the JSON body (ASCII: every non-ASCII
    character escaped, so a lone surrogate in a buffer's text cannot break the encoding)."""
    body = json.dumps(message).encode("ascii")
    return b"Content-Length: %d\r\n" % len(body) + CONTENT_TYPE + b"\r\n" + body


class Peer:
    """The server's end of the conversation with one editor."""

    def __init__(self) -> None:
        self._write: Callable[[bytes], None] | None = None
        self._writing = threading.Lock()
        """One message at a time: a log line may come from a worker thread."""
        self._pending: dict[MsgId, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)

    def attach(self, write: Callable[[bytes], None]) -> None:
        """Write every outgoing message with `write` (the connection's output)."""
        self._write = write

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; an editor that has gone is logged, never raised to the caller."""
        if self._write is None:
            log.error("lsp-agent: no connection to send %s on", message.get("method", "an answer"))
            return
        try:
            data = frame(message)
        except (TypeError, ValueError) as error:  # a bug of ours: say what could not be sent
            log.exception("lsp-agent: cannot encode %s", message.get("method", "an answer"))
            if "id" in message and "method" not in message:
                data = frame(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": RpcError(
                            INTERNAL_ERROR, f"cannot encode the answer: {error}"
                        ).to_json(),
                    }
                )
            else:
                return
        try:
            with self._writing:
                self._write(data)
        except (OSError, ValueError):  # the pipe is closed: the editor has gone
            log.warning("lsp-agent: the editor's end of the connection is closed")

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def respond(self, msg_id: MsgId | None, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def fail(self, msg_id: MsgId | None, error: RpcError) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": error.to_json()})

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request to the editor and wait for its answer (an error answer raises
        `RpcError`). When the caller stops waiting, the request is withdrawn with
        `$/cancelRequest`, and a late answer to it is dropped quietly."""
        msg_id = f"lsp-agent-{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        try:
            return await future
        except asyncio.CancelledError:
            if self._pending.pop(msg_id, None) is not None:
                self.notify("$/cancelRequest", {"id": msg_id})
            raise

    def answered(self, message: dict[str, Any]) -> None:
        """The editor's answer to one of the server's requests."""
        future = self._pending.pop(message["id"], None)
        if future is None or future.done():
            log.info("lsp-agent: an answer to %r, which nothing waits for", message["id"])
            return
        error = message.get("error")
        if error is None:
            future.set_result(message.get("result"))
            return
        if not isinstance(error, dict):
            error = {}
        code = error.get("code")
        text = error.get("message")
        future.set_exception(
            RpcError(
                code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                text if isinstance(text, str) else "the editor answered with an error",
                error.get("data"),
            )
        )

    def close(self) -> None:
        """The connection is ending: nothing will answer the requests still out."""
        for future in self._pending.values():
            with contextlib.suppress(asyncio.InvalidStateError):
                future.cancel()
        self._pending.clear()
