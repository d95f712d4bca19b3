"""Every message from the editor, checked before pygls acts on it.

pygls dispatches what it is given and trusts that it is a JSON-RPC message of the lifecycle's
moment: a batch, an id that is an object, a body that is not JSON or a request after `shutdown`
would be logged and never answered, and a request that lsprotocol cannot read (a missing member,
a negative line) would go unanswered too, while the editor waits for ever. So `vet` checks the
envelope (JSON-RPC 2.0) and the lifecycle, and `read_error` turns what lsprotocol refused to read
into the specification's `-32602` naming the member; what is refused is answered with the
specification's error, built by `error_frame` (pygls has no way to answer a message it never
read), or dropped with a log line when it is a notification.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import cattrs
from lsprotocol import types

PARSE_ERROR = types.ErrorCodes.ParseError.value
INVALID_REQUEST = types.ErrorCodes.InvalidRequest.value
METHOD_NOT_FOUND = types.ErrorCodes.MethodNotFound.value
INVALID_PARAMS = types.ErrorCodes.InvalidParams.value
INTERNAL_ERROR = types.ErrorCodes.InternalError.value
SERVER_NOT_INITIALIZED = types.ErrorCodes.ServerNotInitialized.value

CONTENT_TYPE = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    types.INITIALIZED: {},
    types.WORKSPACE_DID_CHANGE_CONFIGURATION: {"settings": None},
}
"""Notifications whose params clients leave out (or leave empty) although lsprotocol wants
them: read as these, rather than dropped (a dropped `initialized` would leave the folders
unwatched, a dropped configuration change the old settings in force)."""


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
    if refused is not None or method == types.EXIT:
        return refused
    found = _command_problem(params) if method == types.WORKSPACE_EXECUTE_COMMAND else None
    if found is None:
        return None
    if request:
        return Refusal(INVALID_PARAMS, f"Invalid params: {found}", answer_to)
    return Refusal(None, f"cannot read {method}: {found}")


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
    if initialized and method == types.INITIALIZE and request:
        return Refusal(
            INVALID_REQUEST, "Invalid Request: initialize was already received", answer_to
        )
    if shutting_down:
        if request:
            return Refusal(INVALID_REQUEST, f"Invalid Request: {method} after shutdown", answer_to)
        return Refusal(None, f"{method} after shutdown")
    return None


def _command_problem(params: Any) -> str | None:
    """What lsprotocol would read too kindly in `workspace/executeCommand` (an object for the
    argument array becomes the array of its keys), said in the user's words."""
    if not isinstance(params, dict):
        return "workspace/executeCommand needs params: an object {command, arguments?}"
    if not isinstance(params.get("command"), str):
        return 'workspace/executeCommand needs "command": a command name, e.g. lspAgent.ask'
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, list):
        return 'workspace/executeCommand "arguments" must be an array'
    return None


def with_defaults(message: dict[str, Any]) -> dict[str, Any]:
    """`message` with the params `DEFAULT_PARAMS` fills in where a client left them out."""
    defaults = DEFAULT_PARAMS.get(message["method"])
    if defaults is None or "id" in message:
        return message
    params = message.get("params")
    if not isinstance(params, dict):
        params = {}
    return {**message, "params": {**defaults, **params}}


_SNAKE = re.compile(r"_([a-z])")


def read_error(error: BaseException) -> str:
    """What lsprotocol could not read in a message, naming the members as the editor spells
    them (`params.range.start`), from the error pygls raised while structuring it."""
    cause = error.__cause__
    if isinstance(cause, (cattrs.BaseValidationError, cattrs.errors.ForbiddenExtraKeysError)):
        found = cattrs.transform_error(cause, format_exception=_problem)
    else:
        found = [str(cause or error)]
    described = []
    for line in found[:3]:
        what, _, where = line.rpartition(" @ ")
        member = _SNAKE.sub(lambda match: match.group(1).upper(), where.removeprefix("$."))
        described.append(f"{member}: {what}" if what else line)
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    said = "; ".join(described) + more
    # Older cattrs name the member but not what its own check said: add the first such check.
    checks = [str(leaf).rstrip(".") for leaf in _leaves(cause) if isinstance(leaf, ValueError)]
    if checks and checks[0] not in said:
        said += f" ({checks[0]})"
    return said


def _leaves(error: BaseException | None) -> list[BaseException]:
    """The exceptions at the bottom of an exception group (cattrs nests one per class)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [] if error is None else [error]


def _problem(error: BaseException, wanted: type | None) -> str:
    """One thing lsprotocol could not read: a missing member, a wrong type, or what its own
    check says (`Position.line should be in range [0:2147483647], but was -1.`)."""
    if isinstance(error, KeyError):
        return "required member missing"
    if isinstance(error, ValueError) and str(error):
        return str(error).rstrip(".")
    name = getattr(wanted, "__name__", None)
    return f"not a valid {name}" if name else "not a valid value"


def frame(message: dict[str, Any]) -> bytes:
    """One message as it goes on the wire: headers, then the JSON body (ASCII: every non-ASCII
    character escaped, as pygls writes its own)."""
    body = json.dumps(message).encode("ascii")
    return b"Content-Length: %d\r\n" % len(body) + CONTENT_TYPE + b"\r\n" + body


def error_frame(msg_id: Any, code: int, message: str) -> bytes:
    """The error answer to a message pygls was never given."""
    return frame({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})
