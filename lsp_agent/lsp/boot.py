"""`lsp-agent serve` on stdio: answer `initialize` before pygls is even imported.

Editors wait for `initialize` (our target: answered within 0.5 s of the process starting), and
importing lsprotocol (every LSP type is an attrs class) alone takes 0.35–0.5 s on a 2-core
machine; pygls cannot start without it. So this module, which needs only the standard library,
starts importing the server in a thread, reads the editor's first message itself and, when it is
an `initialize` it can answer exactly as pygls would, answers at once. Then it hands the
connection to pygls unchanged:

- pygls reads the same bytes: the first message is replayed ahead of the rest of stdin, so pygls
  processes `initialize` too (workspace, client capabilities, our INITIALIZE feature);
- pygls' own answer to it is dropped on its way to stdout and compared with ours: a difference is
  logged as an error (tests/test_boot.py keeps the two byte-identical);
- anything else (another first message, unusual framing, parameters this module cannot vouch for)
  goes to pygls untouched, which answers it as it always did, only later.

One difference remains, on purpose: a capability of the wrong type among the hundreds this module
does not read makes lsprotocol refuse the whole request, so pygls never answers it, while this
module has. That session is broken either way; no real editor sends such capabilities.

The capabilities here mirror pygls' `ServerCapabilitiesBuilder` for the features `create_server`
registers; registering a feature that changes them means changing `initialize_response` too.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from lsp_agent import __version__
from lsp_agent.lsp import names
from lsp_agent.lsp.framing import MAX_BODY_BYTES

log = logging.getLogger(__name__)

SERVER_MODULE = "lsp_agent.lsp.app"

# pygls' stdio reader accepts exactly this header line (`pygls.io_.run_async`); a message framed
# any other way goes to pygls untouched, so it is handled as pygls always handled it.
CONTENT_LENGTH = re.compile(rb"Content-Length: (\d+)\r\n")
CONTENT_TYPE = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"

INCREMENTAL = 2
"""`TextDocumentSyncKind.Incremental`, what `AgentServer` asks pygls for."""

POSITION_ENCODINGS = ("utf-8", "utf-16", "utf-32")
"""The encodings pygls supports, the first of the client's that is one of them wins."""

TRACE_VALUES = ("off", "messages", "verbose")

CODE_ACTION_KINDS = ("quickfix", "refactor")
"""What `server.CODE_ACTION_KINDS` registers, as pygls writes it (tests/test_boot.py checks)."""


def serve_stdio() -> int:
    """Serve LSP on stdin/stdout, answering `initialize` as soon as it arrives."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Only JSON-RPC may reach stdout: a stray print() from any library goes to stderr instead.
    sys.stdout = sys.stderr
    importer = threading.Thread(target=_import_server, name="import-server", daemon=True)
    importer.start()
    consumed, message = read_first_message(stdin)
    response = initialize_response(message)
    writer: BinaryIO = stdout
    if response is not None:
        sent = frame(response)
        stdout.write(sent)
        stdout.flush()
        writer = io.BufferedWriter(DropResponse(stdout, response))
    importer.join()
    from lsp_agent.lsp.app import create_server  # re-raises here if the thread's import failed
    from lsp_agent.lsp.connection import serve

    return serve(create_server(), stdin, writer, head=consumed)


def _import_server() -> None:
    try:
        __import__(SERVER_MODULE)
    except BaseException:
        # The main thread imports it again after `join()` and gets the error with its traceback.
        return


def read_first_message(stream: BinaryIO) -> tuple[bytes, Any]:
    """Read one framed message: the bytes consumed, and the decoded body or None.

    Stops early, with None, as soon as the framing is not what pygls expects, never reading
    further than pygls would (a read past the message could wait forever on the editor); the
    bytes consumed are returned either way so that they can be replayed.
    """
    consumed = bytearray()
    length = 0
    while True:
        line = stream.readline()
        consumed += line
        if not line.strip():
            # pygls reads the body after any blank line; only a plain CRLF one is ours to read.
            if line != b"\r\n":
                return bytes(consumed), None
            break
        if not line.endswith(b"\r\n"):
            return bytes(consumed), None
        match = CONTENT_LENGTH.fullmatch(line)
        if match:
            if length:
                return bytes(consumed), None
            length = int(match.group(1))
    if not length or length > MAX_BODY_BYTES:
        return bytes(consumed), None  # the connection's reader refuses it, and reads on
    body = stream.read(length)
    consumed += body
    if len(body) != length:
        return bytes(consumed), None
    try:
        return bytes(consumed), json.loads(body)
    except (ValueError, RecursionError):
        return bytes(consumed), None


def frame(message: dict[str, Any]) -> bytes:
    """A message framed as pygls frames it."""
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n" % len(body) + CONTENT_TYPE + b"\r\n" + body


def initialize_response(message: Any) -> dict[str, Any] | None:
    """pygls' response to this `initialize` request, or None when this module cannot vouch for it.

    None for anything that is not a plain `initialize` request whose parameters, as far as they are
    checked here, lsprotocol accepts and our INITIALIZE feature handles: pygls then answers it.
    """
    if not _is_initialize(message):
        return None
    capabilities = message["params"]["capabilities"]
    encoding = _position_encoding(capabilities)
    synchronization = _synchronization(capabilities)
    if encoding is None or synchronization is None:
        return None
    text_document_sync: dict[str, Any] = {"openClose": True, "change": INCREMENTAL}
    # pygls offers willSave(WaitUntil) when the client states it and the server registered the
    # feature. We register neither, so: `false` when the client states any value, else absent.
    for key in ("willSave", "willSaveWaitUntil"):
        if synchronization.get(key) is not None:
            text_document_sync[key] = False
    text_document_sync["save"] = True  # we handle didSave (a formatter may follow a save)
    return {
        "id": message["id"],
        "jsonrpc": "2.0",
        "result": {
            "capabilities": {
                "positionEncoding": encoding,
                "textDocumentSync": text_document_sync,
                "codeActionProvider": {"codeActionKinds": list(CODE_ACTION_KINDS)},
                "executeCommandProvider": {"commands": list(names.COMMANDS)},
                "workspace": {
                    "workspaceFolders": {"supported": True, "changeNotifications": True},
                    "fileOperations": {},
                },
            },
            "serverInfo": {"name": "lsp-agent", "version": __version__},
        },
    }


def _is_initialize(message: Any) -> bool:
    if not isinstance(message, dict) or not set(message) <= {"jsonrpc", "id", "method", "params"}:
        return False
    if message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return False
    if not (_is_int(message.get("id")) or isinstance(message.get("id"), str)):
        return False
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("capabilities"), dict):
        return False
    checks: dict[str, Callable[[Any], bool]] = {
        "processId": _is_int,
        "rootUri": _is_str,
        "rootPath": _is_str,
        "locale": _is_str,
        "trace": lambda v: v in TRACE_VALUES,
        "workDoneToken": lambda v: _is_int(v) or _is_str(v),
        "clientInfo": _is_client_info,
        "workspaceFolders": lambda v: isinstance(v, list) and all(map(_is_folder, v)),
        "initializationOptions": _is_options,
    }
    return all(params.get(key) is None or check(params[key]) for key, check in checks.items())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_client_info(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and (value.get("version") is None or isinstance(value["version"], str))
    )


def _is_folder(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("uri"), str)
        and isinstance(value.get("name"), str)
    )


def _is_options(value: Any) -> bool:
    # `create_server`'s INITIALIZE feature reads `initializationOptions.lspAgent` as an object and
    # fails on anything else, so pygls answers with an error then: leave those to pygls.
    if not isinstance(value, dict) or names.SETTINGS_SECTION not in value:
        return True
    return isinstance(value[names.SETTINGS_SECTION], dict)


def _position_encoding(capabilities: dict[str, Any]) -> str | None:
    """The encoding pygls picks: the client's first supported one, else UTF-16."""
    general = capabilities.get("general")
    if general is None:
        return "utf-16"
    if not isinstance(general, dict):
        return None
    offered = general.get("positionEncodings")
    if offered is None:
        return "utf-16"
    if not isinstance(offered, list) or not all(isinstance(e, str) for e in offered):
        return None
    return next((e for e in offered if e in POSITION_ENCODINGS), "utf-16")


def _synchronization(capabilities: dict[str, Any]) -> dict[str, Any] | None:
    """`textDocument.synchronization`, {} when absent, None when lsprotocol might refuse it."""
    text_document = capabilities.get("textDocument")
    if text_document is None:
        return {}
    if not isinstance(text_document, dict):
        return None
    synchronization = text_document.get("synchronization")
    if synchronization is None:
        return {}
    if not isinstance(synchronization, dict):
        return None
    for key in ("willSave", "willSaveWaitUntil"):
        if synchronization.get(key) is not None and not isinstance(synchronization[key], bool):
            return None
    return synchronization


class DropResponse(io.RawIOBase):
    """Passes framed messages through to `out`, except pygls' response to `initialize`.

    That response was already sent by `serve_stdio`; the one pygls makes is compared with it and
    dropped. Every other message, before or after it, passes unchanged and in order.
    """

    def __init__(self, out: BinaryIO, sent: dict[str, Any]) -> None:
        self.out = out
        self.sent = sent
        """The response already sent for `initialize`."""
        self.pending = bytearray()
        """Bytes of a message not yet complete, held while the response is still awaited."""
        self.waiting = True
        """pygls' response to `initialize` has not gone by yet."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        if not self.waiting:
            self._send(data)
            return len(data)
        self.pending += data
        while self.waiting:
            message = _take_frame(self.pending)
            if message is None:
                break
            raw, body = message
            if self._is_initialize_response(body):
                self.waiting = False
                self._check(body)
            else:
                self._send(raw)
        if not self.waiting and self.pending:
            rest, self.pending = bytes(self.pending), bytearray()
            self._send(rest)
        return len(data)

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        if self.closed:
            return
        if self.pending:
            self._send(bytes(self.pending))
            self.pending.clear()
        super().close()
        self.out.close()

    def _send(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def _is_initialize_response(self, body: Any) -> bool:
        return (
            isinstance(body, dict)
            and "method" not in body
            and body.get("id") == self.sent["id"]
            and type(body.get("id")) is type(self.sent["id"])
        )

    def _check(self, body: dict[str, Any]) -> None:
        if body != self.sent:
            log.error(
                "lsp-agent answered initialize with %s but pygls computed %s: the fast answer in "
                "lsp_agent/lsp/boot.py no longer matches the server (tests/test_boot.py)",
                json.dumps(self.sent),
                json.dumps(body),
            )


def _take_frame(buffer: bytearray) -> tuple[bytes, Any] | None:
    """Remove one complete framed message from `buffer`: its bytes and decoded body."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    length = None
    for line in bytes(buffer[:end]).split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value)
    start = end + 4
    if length is None:
        # Not a frame we understand: pass the header block on rather than hold output back.
        raw = bytes(buffer[:start])
        del buffer[:start]
        return raw, None
    if len(buffer) < start + length:
        return None
    raw = bytes(buffer[: start + length])
    del buffer[: start + length]
    try:
        return raw, json.loads(raw[start:])
    except ValueError:
        return raw, None
