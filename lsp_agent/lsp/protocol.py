"""Every message from the editor, checked before anything acts on it.

`vet` checks a message against JSON-RPC 2.0, the LSP lifecycle and, for each method lsp-agent
handles, the shape of the parameters it reads: whatever a client sends is answered by the
specification's error (or dropped with a log line, for a notification), and never leaves a
request unanswered or a handler reading a number where it wants an object. The shapes check
only what the server reads; anything else in a message is the client's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsp_agent.lsp.rpc import INVALID_PARAMS, INVALID_REQUEST, SERVER_NOT_INITIALIZED

INITIALIZE = "initialize"
INITIALIZED = "initialized"
SHUTDOWN = "shutdown"
EXIT = "exit"
CANCEL_REQUEST = "$/cancelRequest"
PROGRESS = "$/progress"
SET_TRACE = "$/setTrace"
DID_OPEN = "textDocument/didOpen"
DID_CHANGE = "textDocument/didChange"
DID_SAVE = "textDocument/didSave"
DID_CLOSE = "textDocument/didClose"
CODE_ACTION = "textDocument/codeAction"
EXECUTE_COMMAND = "workspace/executeCommand"
FOLDERS_CHANGED = "workspace/didChangeWorkspaceFolders"
CONFIGURATION_CHANGED = "workspace/didChangeConfiguration"
PROGRESS_CANCEL = "window/workDoneProgress/cancel"

# Server → client.
APPLY_EDIT = "workspace/applyEdit"
CONFIGURATION = "workspace/configuration"
SHOW_MESSAGE = "window/showMessage"
SHOW_MESSAGE_REQUEST = "window/showMessageRequest"
SHOW_DOCUMENT = "window/showDocument"
LOG_MESSAGE = "window/logMessage"
PROGRESS_CREATE = "window/workDoneProgress/create"


class Opt:
    """A member that may be absent or null."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


UINT = "uint"
"""A JSON integer ≥ 0 (LSP's `uinteger`)."""
OBJECT = "object"
"""Any JSON object."""
ANY = "any"
ID = (int, str)

POSITION = {"line": UINT, "character": UINT}
RANGE = {"start": POSITION, "end": POSITION}
DOCUMENT = {"uri": str}
FOLDER = {"uri": str, "name": str}
DIAGNOSTIC = {"range": RANGE, "message": str, "source": Opt(str), "code": Opt(ID)}

PARAMS: dict[str, Any] = {
    INITIALIZE: {
        "capabilities": OBJECT,
        "processId": Opt(int),
        "rootUri": Opt(str),
        "rootPath": Opt(str),
        "workspaceFolders": Opt([FOLDER]),
        "initializationOptions": ANY,
    },
    INITIALIZED: Opt(OBJECT),
    SHUTDOWN: ANY,
    CANCEL_REQUEST: {"id": ID},
    PROGRESS: ANY,
    SET_TRACE: {"value": str},
    DID_OPEN: {"textDocument": {"uri": str, "version": Opt(int), "text": str}},
    DID_CHANGE: {
        "textDocument": {"uri": str, "version": Opt(int)},
        "contentChanges": [{"range": Opt(RANGE), "text": str}],
    },
    DID_SAVE: {"textDocument": DOCUMENT, "text": Opt(str)},
    DID_CLOSE: {"textDocument": DOCUMENT},
    CODE_ACTION: {
        "textDocument": DOCUMENT,
        "range": RANGE,
        "context": {"diagnostics": [DIAGNOSTIC], "only": Opt([str])},
    },
    EXECUTE_COMMAND: {"command": str, "arguments": Opt([ANY]), "workDoneToken": Opt(ID)},
    FOLDERS_CHANGED: {"event": {"added": [FOLDER], "removed": [FOLDER]}},
    CONFIGURATION_CHANGED: OBJECT,
    PROGRESS_CANCEL: {"token": ID},
}
"""What each method lsp-agent handles must carry, as far as the server reads it."""


def problem(value: Any, spec: Any, where: str) -> str | None:
    """What is wrong with `value` against `spec` (named `where`), or None."""
    if isinstance(spec, Opt):
        return None if value is None else problem(value, spec.spec, where)
    if spec == ANY:
        return None
    if value is None:
        return f"{where} is missing"
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where} must be an object"
        for key, member in spec.items():
            found = problem(value.get(key), member, f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(spec, list):
        if not isinstance(value, list):
            return f"{where} must be an array"
        for index, item in enumerate(value):
            found = problem(item, spec[0], f"{where}[{index}]")
            if found is not None:
                return found
        return None
    return _scalar_problem(value, spec, where)


def _scalar_problem(value: Any, spec: Any, where: str) -> str | None:
    if spec == OBJECT:
        return None if isinstance(value, dict) else f"{where} must be an object"
    if spec == UINT:
        ok = _is_int(value) and value >= 0
        return None if ok else f"{where} must be an integer ≥ 0"
    types = spec if isinstance(spec, tuple) else (spec,)
    ok = isinstance(value, types) and (bool in types or not isinstance(value, bool))
    if ok:
        return None
    names = " or ".join({int: "an integer", str: "a string", bool: "a boolean"}[t] for t in types)
    return f"{where} must be {names}"


@dataclass(frozen=True)
class Refusal:
    """Why a message is not handled, and the error to answer (None: drop it, with a log line)."""

    code: int | None
    message: str
    id: Any = None
    """The request's id, when it has a usable one."""


def vet(message: Any, *, initialized: bool, shutting_down: bool) -> Refusal | None:
    """None when `message` may be handled; else what to answer or log instead."""
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
            return Refusal(
                INVALID_PARAMS, f"Invalid params: {method} params must be an object", answer_to
            )
        return Refusal(None, f"{method} with params that are not an object")
    refused = _out_of_order(method, request, answer_to, initialized, shutting_down)
    if refused is not None or method == EXIT:
        return refused
    found = _params_problem(method, params)
    if found is None:
        return None
    if request:
        return Refusal(INVALID_PARAMS, f"Invalid params: {found}", answer_to)
    return Refusal(None, f"cannot read {method}: {found}")


def _out_of_order(
    method: str, request: bool, answer_to: Any, initialized: bool, shutting_down: bool
) -> Refusal | None:
    """A message the lifecycle does not allow now: before `initialize`, after `shutdown`."""
    if method == EXIT:
        return None
    if not initialized and method != INITIALIZE:
        if request:
            return Refusal(
                SERVER_NOT_INITIALIZED,
                f"Server not initialized: send initialize before {method}",
                answer_to,
            )
        return Refusal(None, f"{method} before initialize")
    if initialized and method == INITIALIZE and request:
        return Refusal(
            INVALID_REQUEST, "Invalid Request: initialize was already received", answer_to
        )
    if shutting_down:
        if request:
            return Refusal(INVALID_REQUEST, f"Invalid Request: {method} after shutdown", answer_to)
        return Refusal(None, f"{method} after shutdown")
    return None


def _params_problem(method: str, params: Any) -> str | None:
    """What is wrong with a message's params, for the methods lsp-agent handles."""
    if method == INITIALIZE and not isinstance(params, dict):
        return "initialize needs params: an object with capabilities"
    if method == EXECUTE_COMMAND:
        if not isinstance(params, dict):
            return "workspace/executeCommand needs params: an object {command, arguments?}"
        if not isinstance(params.get("command"), str):
            return 'workspace/executeCommand needs "command": a command name, e.g. lspAgent.ask'
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, list):
            return 'workspace/executeCommand "arguments" must be an array'
    spec = PARAMS.get(method)
    return None if spec is None else problem(params, spec, "params")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
