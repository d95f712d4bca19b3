"""pygls' protocol, with the parts lsp-agent handles itself.

- `workspace/executeCommand` runs as a cancellable request: pygls runs registered commands under
  a private id, so a `$/cancelRequest` for the editor's request never reached them. Handling the
  method here makes the command's task the request's future: the cancel lands in the handler as
  `CancelledError`, and the handler turns it into a cancelled turn. The handler also gets the
  request's `workDoneToken`.
- `exit` ends the connection through the server (`connection.py`), with code 0 after `shutdown`
  and 1 without, as the specification wants.

`vet` checks every message against JSON-RPC 2.0 and the LSP lifecycle before pygls sees it, so
that whatever a client sends is answered by the specification's error (or dropped, for a
notification) and never leaves a request unanswered.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol, lsp_method

from lsp_agent.lsp import names

work_done_token: contextvars.ContextVar[types.ProgressToken | None] = contextvars.ContextVar(
    "work_done_token", default=None
)
"""The `workDoneToken` of the `workspace/executeCommand` request being handled."""


class Leaving(Protocol):
    """The server's side of the end of a connection (`server.AgentServer.leave`)."""

    def leave(self) -> None: ...


class AgentProtocol(LanguageServerProtocol):
    """pygls' protocol with lsp-agent's commands and lifecycle."""

    _server: Leaving  # type: ignore[assignment]

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(  # type: ignore[override]
        self, params: types.ExecuteCommandParams
    ) -> Any:
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams.of(
                ValueError(
                    f"unknown command {params.command!r}: lsp-agent offers "
                    + ", ".join(names.COMMANDS)
                )
            )
        work_done_token.set(params.work_done_token)
        return await handler(*(params.arguments or []))

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:  # type: ignore[override]
        """The editor says goodbye: the connection ends the process."""
        self._server.leave()


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002


@dataclass(frozen=True)
class Refusal:
    """Why a message is not handled, and the error to answer (None: drop it, with a log line)."""

    code: int | None
    message: str
    id: Any = None
    """The request's id, when it has a usable one."""


def vet(message: Any, *, initialized: bool, shutting_down: bool) -> Refusal | None:
    """None when `message` may go to the protocol; else what to answer or log instead."""
    if not isinstance(message, dict):
        kind = "a batch (an array)" if isinstance(message, list) else type(message).__name__
        return Refusal(INVALID_REQUEST, f"Invalid Request: a message must be an object, not {kind}")
    has_id = "id" in message
    msg_id = message.get("id")
    usable_id = isinstance(msg_id, (int, float, str)) and not isinstance(msg_id, bool)
    if has_id and not usable_id and msg_id is not None:
        return Refusal(INVALID_REQUEST, "Invalid Request: id must be a number or a string")
    answer_to = msg_id if usable_id else None
    if message.get("jsonrpc") != "2.0":
        return Refusal(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', answer_to)
    if "method" not in message:
        if has_id and ("result" in message or "error" in message):
            return None  # a response to one of our requests
        return Refusal(None, "a message that is neither a request, a notification nor a response")
    method = message["method"]
    if not isinstance(method, str):
        return Refusal(INVALID_REQUEST, "Invalid Request: method must be a string", answer_to)
    request = has_id
    params = message.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        if request:
            return Refusal(INVALID_PARAMS, f"Invalid params: {method} params must be an object")
        return Refusal(None, f"{method} with params that are not an object")
    refused = _out_of_order(method, request, answer_to, initialized, shutting_down)
    if refused is not None or method == types.EXIT:
        return refused
    if request:
        problem = _params_problem(method, params)
        if problem is not None:
            return Refusal(INVALID_PARAMS, f"Invalid params: {problem}", answer_to)
    return None


def _out_of_order(
    method: str, request: bool, answer_to: Any, initialized: bool, shutting_down: bool
) -> Refusal | None:
    """A message the lifecycle does not allow now: before `initialize`, after `shutdown`."""
    if method == types.EXIT:
        return None
    if not initialized and method != types.INITIALIZE:
        if request:
            return Refusal(
                SERVER_NOT_INITIALIZED,
                f"Server not initialized: send initialize before {method}",
                answer_to,
            )
        return Refusal(None, f"{method} before initialize")
    if shutting_down:
        if request:
            return Refusal(INVALID_REQUEST, f"Invalid Request: {method} after shutdown", answer_to)
        return Refusal(None, f"{method} after shutdown")
    return None


def _params_problem(method: str, params: Any) -> str | None:
    """What is wrong with a request's params, for the requests lsp-agent handles itself."""
    if method == types.INITIALIZE and not isinstance(params, dict):
        return "initialize needs params: an object with capabilities"
    if method == types.WORKSPACE_EXECUTE_COMMAND:
        if not isinstance(params, dict):
            return "workspace/executeCommand needs params: an object {command, arguments?}"
        if not isinstance(params.get("command"), str):
            return 'workspace/executeCommand needs "command": a command name, e.g. lspAgent.ask'
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, list):
            return 'workspace/executeCommand "arguments" must be an array'
    return None
