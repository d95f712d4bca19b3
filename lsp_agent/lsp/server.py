"""The language server: LSP commands in, proposals, questions and events out.

`AgentServer` holds what one editor connection needs (the workspace's agent, its change tracker,
the editor's settings, capabilities and buffers, the connection's lifecycle) and dispatches each
message the editor sends (after `protocol.vet` has checked it) to a thin handler: check the
arguments, call the agent, shape the result. The `EditorPort` over LSP is in `port.py`, the
commands in `commands.py`, the JSON-RPC machinery in `rpc.py`, the connection in `connection.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import re
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_agent import __version__
from lsp_agent.config import Settings, load_settings
from lsp_agent.lsp import names, positions, protocol
from lsp_agent.lsp.actions import KINDS, code_actions, relative
from lsp_agent.lsp.arguments import ClientOptions, client_options
from lsp_agent.lsp.connection import EXIT_GRACE_S, ParseError, Writer
from lsp_agent.lsp.documents import Buffer, Buffers
from lsp_agent.lsp.folders import Folder, Folders
from lsp_agent.lsp.framing import Garbage
from lsp_agent.lsp.port import LOG, WARNING, LspPort
from lsp_agent.lsp.rpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    MsgId,
    Peer,
    RpcError,
)
from lsp_agent.lsp.uris import to_fs_path

if TYPE_CHECKING:
    from lsp_agent.agent.sessions import Agent
    from lsp_agent.changes.tracker import ChangeTracker

# The agent stack (HTTP client, loop, tools) is loaded before the server answers `initialize`
# (`boot.py`): a server that has answered is ready for its first ask.
AGENT_MODULES = ("lsp_agent.agent.sessions", "lsp_agent.model.openai", "lsp_agent.session.store")

log = logging.getLogger(__name__)

SELECTION_CHARS = 4000
"""How much of the selection a code action's prompt carries (the agent can read the rest)."""

INCREMENTAL = 2
"""`TextDocumentSyncKind.Incremental`."""

_SETTING = re.compile(r"\blspAgent\.([a-z][A-Za-z]+)\b")
"""A setting named in a message: `lspAgent.model`."""

Handler = Callable[[Any], Any]
"""A message's handler: takes its params; a request's returns its result (or an awaitable)."""


class AgentServer:
    """The lsp-agent language server: one agent per workspace folder, settings from the editor."""

    def __init__(self) -> None:
        self.rpc = Peer()
        """The JSON-RPC conversation with the editor."""
        self.port = LspPort(self)
        """The core's view of this editor."""
        self.buffers = Buffers()
        """The editor's open buffers, kept in step with its changes."""
        self.folders = Folders()
        """The editor's workspace folders, each with its agent and change tracker."""
        self.folders_ready = asyncio.Event()
        """Set once the folders of `initialize` are known (after `initialized`)."""
        self.folder_uris: list[str] = []
        """The workspace folders `initialize` named (its `rootUri` when it named none)."""
        self.capabilities: dict[str, Any] = {}
        """The client's capabilities, as `initialize` sent them."""
        self.position_encoding = "utf-16"
        """The position encoding agreed at `initialize`."""
        self.settings: Settings | None = None
        """The settings in effect, once the editor's have been read."""
        self.editor_settings: dict[str, Any] = {}
        """`initializationOptions` merged with the `lspAgent` configuration section."""
        self.client = ClientOptions()
        """What the client said of itself in `initializationOptions.lspAgentClient`."""
        self.settings_ready = asyncio.Event()
        """Set once the first `workspace/configuration` answer (or its absence) is known."""
        self.tasks: set[asyncio.Task[Any]] = set()
        """Background tasks, kept so none is garbage-collected or fails unseen."""
        self.running: dict[MsgId, asyncio.Task[Any]] = {}
        """The editor's requests being answered, by id (for `$/cancelRequest`)."""
        self.progress_sessions: dict[int | str, str] = {}
        """Session of each running turn's progress token, for `window/workDoneProgress/cancel`."""
        self.left = asyncio.Event()
        """Set when the editor has gone (`exit`, or the end of its input): time to end."""
        self.exit_code = 1
        """The process's exit code once `left` is set: 0 only after a `shutdown` request."""
        self.shutdown_requested = False
        """The editor sent `shutdown` (perhaps not answered yet)."""
        self.initialized = False
        """The editor's `initialize` was answered: other requests may follow."""
        self.requests: dict[str, Handler] = {}
        """The requests the server answers, by method."""
        self.notifications: dict[str, Handler] = {}
        """The notifications the server acts on, by method."""

    def on_request(self, method: str) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of the request `method`."""

        def register(handler: Handler) -> Handler:
            self.requests[method] = handler
            return handler

        return register

    def on_notification(self, method: str) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of the notification `method`."""

        def register(handler: Handler) -> Handler:
            self.notifications[method] = handler
            return handler

        return register

    def attach(self, writer: Writer) -> None:
        """Send what the server writes to `writer` (the connection's output)."""
        self.rpc.attach(writer.write)

    def receive(self, message: Any) -> None:
        """Handle one message from the editor: parsed JSON, a `ParseError` or `Garbage`."""
        if not self._acceptable(message):
            return
        method = message.get("method")
        if method is None:
            self.rpc.answered(message)
            return
        if not self._takes(method, message):
            return
        if method == protocol.SHUTDOWN:
            # Clients often send `exit` without waiting for the answer to `shutdown`.
            self.shutdown_requested = True
        params = message.get("params")
        if "id" in message:
            self._answer(message["id"], method, params)
        else:
            self._act(method, params)

    def _answer(self, msg_id: MsgId, method: str, params: Any) -> None:
        """Run a request's handler; its answer goes out when it has one."""
        try:
            outcome = self.requests[method](params)
        except Exception as error:
            self._failed(msg_id, method, error)
            return
        if not inspect.isawaitable(outcome):
            self.rpc.respond(msg_id, outcome)
            return
        task = asyncio.ensure_future(outcome)
        self.running[msg_id] = task
        task.add_done_callback(partial(self._answered, msg_id, method))

    def _answered(self, msg_id: MsgId, method: str, task: asyncio.Future[Any]) -> None:
        if self.running.get(msg_id) is task:
            del self.running[msg_id]
        if task.cancelled():
            self.rpc.fail(msg_id, RpcError(REQUEST_CANCELLED, f"{method} {msg_id!r} was cancelled"))
            return
        error = task.exception()
        if error is None:
            self.rpc.respond(msg_id, task.result())
        else:
            self._failed(msg_id, method, error)

    def _failed(self, msg_id: MsgId, method: str, error: BaseException) -> None:
        if isinstance(error, RpcError):
            self.rpc.fail(msg_id, error)
            return
        summary = "".join(traceback.format_exception_only(type(error), error)).strip()
        log.error("lsp-agent: %s failed", method, exc_info=error)
        self.rpc.fail(msg_id, RpcError(INTERNAL_ERROR, summary))
        self.report_server_error(error, method)

    def _act(self, method: str, params: Any) -> None:
        """Run a notification's handler; a failure is logged (there is no one to answer)."""
        if method == protocol.CANCEL_REQUEST:
            task = self.running.get(params["id"])
            if task is not None:
                task.cancel()
            return
        handler = self.notifications.get(method)
        if handler is None:  # `$/progress` and the like: nothing to do
            return
        try:
            outcome = handler(params)
        except Exception as error:
            self.report_server_error(error, method)
            return
        if inspect.isawaitable(outcome):
            self.run_task(_awaited(outcome), f"handling {method}")

    def _acceptable(self, message: Any) -> bool:
        """Whether `message` is a JSON-RPC message this connection may handle now; when it is
        not, it was answered with the specification's error or logged."""
        if isinstance(message, Garbage):
            self._log_input(
                f"skipped {message.skipped} bytes that are not a message: {message.reason}"
            )
            return False
        if isinstance(message, ParseError):
            self._log_input(f"a message is not JSON: {message.detail}")
            self.rpc.fail(None, RpcError(PARSE_ERROR, f"Parse error: {message.detail}"))
            return False
        refusal = protocol.vet(
            message, initialized=self.initialized, shutting_down=self.shutdown_requested
        )
        if refusal is None:
            return True
        self._log_input(refusal.message)
        if refusal.code is not None:
            self.rpc.fail(refusal.id, RpcError(refusal.code, refusal.message))
        return False

    def _takes(self, method: str, message: dict[str, Any]) -> bool:
        """Whether lsp-agent handles `method`, and this message of it, at all."""
        if "id" in message:
            if method in self.requests:
                return True
            self.rpc.fail(message["id"], RpcError(METHOD_NOT_FOUND, f"Method not found: {method}"))
            return False
        if method in self.notifications or method.startswith("$/"):
            return True
        self._log_input(f"ignored the notification {method}: lsp-agent does not handle it")
        return False

    def report_server_error(self, error: BaseException, source: Any) -> None:
        """A handler failed: a log line with the details, never an "Error in server" popup
        (requests get their error answer; a notification has none to get)."""
        log.error("lsp-agent: %s failed: %r", getattr(source, "__name__", source), error)
        self.port.log(f"lsp-agent: a message from the editor could not be handled: {error!r}")

    def _log_input(self, what: str) -> None:
        log.warning("lsp-agent: %s", what)
        with contextlib.suppress(Exception):
            self.port.log(f"lsp-agent: {what}")

    def capability(self, *path: str) -> Any:
        """The client's capability at `path` (`"window", "workDoneProgress"`), None if absent."""
        node: Any = self.capabilities
        for key in path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    def show_message(self, kind: int, message: str) -> None:
        self.rpc.notify(protocol.SHOW_MESSAGE, {"type": kind, "message": message})

    def log_message(self, message: str) -> None:
        self.rpc.notify(protocol.LOG_MESSAGE, {"type": LOG, "message": message})

    def leave(self) -> None:
        """The editor has gone (`exit`, or the end of its input): end the connection."""
        if not self.left.is_set():
            self.exit_code = 0 if self.shutdown_requested else 1
            self.left.set()

    async def close(self) -> None:
        """Cancel turns and background work, stop watching: the connection is ending."""
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*(folder.close() for folder in self.folders), return_exceptions=True)

    def run_task(self, coroutine: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Start a background task that is kept alive and whose failure is logged."""
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self.tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                log.error("%s failed", what, exc_info=finished.exception())
                self.port.log(f"{what} failed: {finished.exception()!r}")

        task.add_done_callback(done)
        return task

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """Take what `initialize` says (capabilities, folders, settings); the server's answer."""
        self.capabilities = params["capabilities"]
        self.position_encoding = _position_encoding(self.capabilities)
        self.folder_uris = [folder["uri"] for folder in params.get("workspaceFolders") or []]
        if not self.folder_uris:
            root = params.get("rootUri") or _path_uri(params.get("rootPath"))
            self.folder_uris = [root] if root else []
        self.take_options(params.get("initializationOptions"))
        self.initialized = True
        return initialize_result(self.position_encoding)

    def open_document(self, path: Path) -> Buffer | None:
        """The open buffer of `path` if the editor has one, else None.

        Buffers are found by what they are, not by how their URI is spelled: a path can be
        spelled through a symlink or with another drive letter case."""
        return self.document(path.as_uri()) or self._document_by_path(path)

    def document(self, uri: str) -> Buffer | None:
        """The open buffer of `uri` (any percent-encoding of it), or None."""
        return self.buffers.get(uri)

    def _document_by_path(self, path: Path) -> Buffer | None:
        for candidate in self.buffers:
            fs_path = to_fs_path(candidate.uri)
            if fs_path is not None and Path(fs_path).resolve() == path:
                return candidate
        return None

    def open_folders(self) -> None:
        """Give every workspace folder of the editor its tracker (after `initialized`)."""
        for uri in self.folder_uris:
            self.add_folder(uri)
        self.folders_ready.set()

    def add_folder(self, uri: str) -> None:
        fs_path = to_fs_path(uri)
        if not fs_path:
            self._log_input(f"ignored the workspace folder {uri}: not a file URI")
            return
        folder = self.folders.add(Path(fs_path).resolve())
        if folder is not None:
            self.run_task(folder.watch(self.port.log), f"watching {folder.root} for changes")

    async def remove_folder(self, uri: str) -> None:
        fs_path = to_fs_path(uri)
        if not fs_path:
            return
        root = await asyncio.to_thread(Path(fs_path).resolve)
        folder = self.folders.remove(root)
        if folder is not None:
            await folder.close()

    def take_options(self, options: Any) -> None:
        """`initializationOptions`: what the client says of itself, and its settings."""
        if not isinstance(options, dict):
            return
        self.client = client_options(options.get(names.CLIENT_SECTION))
        options = {k: v for k, v in options.items() if k != names.CLIENT_SECTION}
        section = options.get(names.SETTINGS_SECTION, options)
        if isinstance(section, dict):
            self.editor_settings = dict(section)
            return
        self.show_message(
            WARNING,
            f"lspAgent settings in initializationOptions must be an object, "
            f"not {type(section).__name__}: using the other sources",
        )

    def code_actions(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """lsp-agent's code actions for a request (`actions.py`); nothing slow happens here."""
        uri = params["textDocument"]["uri"]
        path = _buffer_path(uri)
        if path is None:
            return []
        document = self.document(uri)
        start, end = params["range"]["start"], params["range"]["end"]
        selected = ""
        if document is not None:
            selected = positions.text_range(
                document.source,
                (start["line"], start["character"]),
                (end["line"], end["character"]),
                self.position_encoding,
            )[:SELECTION_CHARS]
        settings = self.settings or load_settings(self.editor_settings)[0]
        rel = relative(path.resolve(), [folder.root for folder in self.folders])
        return code_actions(params, settings.code_actions, rel, selected)

    def in_client_words(self, text: str) -> str:
        """`text` with every `lspAgent.<setting>` named the way this client's user sets it."""
        return _SETTING.sub(lambda match: self.client.setting(match.group(1)), text)

    async def refresh_settings(self) -> Settings:
        """Read the `lspAgent` section from the editor and apply it."""
        section: Any = None
        if self.capability("workspace", "configuration") is True:
            try:
                answer = await self.rpc.request(
                    protocol.CONFIGURATION, {"items": [{"section": names.SETTINGS_SECTION}]}
                )
                section = answer[0] if isinstance(answer, list) and answer else None
            except RpcError as error:
                self.port.log(f"workspace/configuration failed: {error}")
        merged = dict(self.editor_settings)
        if isinstance(section, dict):
            merged.update({k: v for k, v in section.items() if v is not None})
        settings, warnings = load_settings(merged)
        for warning in warnings:
            self.show_message(WARNING, self.in_client_words(warning))
        self.settings = settings
        for folder in self.folders:
            if folder.agent is not None:
                await folder.agent.update_settings(settings)
        self.settings_ready.set()
        return settings

    def buffer_changed(self, uri: str) -> None:
        """The editor opened or changed a buffer: the tracker and edits waiting for it hear."""
        self.port.buffer_changed()
        tracker = self._tracker_of(uri)
        document = self.document(uri)
        if tracker is not None and document is not None:
            path = _buffer_path(uri)
            assert path is not None
            tracker.buffer_changed(path, document.source.removeprefix("\ufeff"), document.version)

    def buffer_saved(self, uri: str) -> None:
        """The editor saved a buffer (a formatter may rewrite it in the next moment)."""
        tracker, path = self._tracker_of(uri), _buffer_path(uri)
        if tracker is not None and path is not None:
            tracker.buffer_saved(path)

    def buffer_closed(self, uri: str) -> None:
        """The editor closed a buffer: the disk is what counts again."""
        tracker, path = self._tracker_of(uri), _buffer_path(uri)
        if tracker is not None and path is not None:
            tracker.buffer_closed(path)

    def _tracker_of(self, uri: str) -> ChangeTracker | None:
        path = _buffer_path(uri)
        folder = self.folders.of_path(path.resolve()) if path is not None else None
        return folder.tracker if folder is not None else None

    async def ensure_agent(self, folder: Folder) -> Agent:
        """The folder's agent, made on first use with the settings in effect."""
        await self.settings_ready.wait()
        settings = self.settings or load_settings(self.editor_settings)[0]
        made = folder.agent is None
        agent = await folder.ensure_agent(settings, self.port)
        if made:
            await agent.update_settings(settings)
        return agent


def initialize_result(encoding: str) -> dict[str, Any]:
    """The server's answer to `initialize`: what it offers, in the agreed position encoding."""
    return {
        "capabilities": {
            "positionEncoding": encoding,
            "textDocumentSync": {"openClose": True, "change": INCREMENTAL, "save": True},
            "codeActionProvider": {"codeActionKinds": list(KINDS)},
            "executeCommandProvider": {"commands": list(names.COMMANDS)},
            "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}},
        },
        "serverInfo": {"name": "lsp-agent", "version": __version__},
    }


def _position_encoding(capabilities: dict[str, Any]) -> str:
    """The client's first position encoding the server can count in, else UTF-16 (which every
    client must support)."""
    general = capabilities.get("general")
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    if not isinstance(offered, list):
        return "utf-16"
    return next((e for e in offered if e in positions.ENCODINGS), "utf-16")


def _path_uri(path: Any) -> str | None:
    """The URI of `initialize`'s deprecated `rootPath`, when it is an absolute path."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return Path(path).as_uri()


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _buffer_path(uri: str) -> Path | None:
    fs_path = to_fs_path(uri)
    return Path(fs_path) if fs_path else None


def register_features(ls: AgentServer) -> None:
    """The lifecycle, document and workspace features: thin handlers over the server's state.
    Their params were checked against `protocol.PARAMS` before they run."""
    _register_lifecycle(ls)
    _register_documents(ls)
    _register_workspace(ls)


def _register_lifecycle(ls: AgentServer) -> None:
    ls.on_request(protocol.INITIALIZE)(ls.initialize)

    @ls.on_notification(protocol.INITIALIZED)
    def initialized(params: Any) -> None:
        """Fetch the `lspAgent` settings section now that the client can answer requests, and
        start watching every folder."""
        ls.run_task(ls.refresh_settings(), "reading the settings")
        ls.run_task(_warm_up(), "loading the agent")
        ls.open_folders()

    @ls.on_notification(protocol.PROGRESS_CANCEL)
    def progress_cancel(params: dict[str, Any]) -> None:
        """The user pressed Cancel on the progress: cancel that turn."""
        session = ls.progress_sessions.get(params["token"])
        if session is None:
            return
        for folder in ls.folders:
            if folder.agent is not None:
                folder.agent.cancel(session)

    @ls.on_notification(protocol.SET_TRACE)
    def set_trace(params: Any) -> None:
        """The server writes no trace: its log lines go to `window/logMessage` and stderr."""

    @ls.on_request(protocol.SHUTDOWN)
    async def shutdown(params: Any) -> None:
        """Cancel running turns so their transcripts record it, close the provider, stop
        watching; answered within the exit grace whatever a task is doing."""
        try:
            await asyncio.wait_for(ls.close(), EXIT_GRACE_S)
        except TimeoutError:
            log.warning("lsp-agent: shutdown took longer than %.1f s; answering", EXIT_GRACE_S)

    @ls.on_notification(protocol.EXIT)
    def exit_(params: Any) -> None:
        """The editor says goodbye: the connection ends the process (`connection.py`)."""
        ls.leave()


def _register_documents(ls: AgentServer) -> None:
    @ls.on_request(protocol.CODE_ACTION)
    def code_action(params: dict[str, Any]) -> list[dict[str, Any]]:
        """lsp-agent's actions for the cursor, the selection, and each problem reported there."""
        return ls.code_actions(params)

    @ls.on_notification(protocol.DID_OPEN)
    def did_open(params: dict[str, Any]) -> None:
        """A buffer opened: its unsaved text is what the agent reads from now on."""
        document = params["textDocument"]
        ls.buffers.open(document["uri"], document["text"], document.get("version"))
        ls.buffer_changed(document["uri"])

    @ls.on_notification(protocol.DID_CHANGE)
    def did_change(params: dict[str, Any]) -> None:
        """The user typed: a file the agent knows becomes "modified in editor, unsaved"."""
        document = params["textDocument"]
        uri = document["uri"]
        refused = ls.buffers.change(
            uri, document.get("version"), params["contentChanges"], ls.position_encoding
        )
        if refused is not None:
            # Applied, it would garble the server's copy of the buffer: the buffer is dropped,
            # and the file read from disk until the editor opens it again.
            ls._log_input(f"refused a change of {uri}: {refused}; reading the file from disk")
            return
        ls.buffer_changed(uri)

    @ls.on_notification(protocol.DID_SAVE)
    def did_save(params: dict[str, Any]) -> None:
        """A save: a formatter may rewrite the file in the next moment."""
        ls.buffer_saved(params["textDocument"]["uri"])

    @ls.on_notification(protocol.DID_CLOSE)
    def did_close(params: dict[str, Any]) -> None:
        """A buffer closed: the disk is what counts again."""
        uri = params["textDocument"]["uri"]
        ls.buffers.close(uri)
        ls.buffer_closed(uri)


def _register_workspace(ls: AgentServer) -> None:
    @ls.on_notification(protocol.FOLDERS_CHANGED)
    async def folders_changed(params: dict[str, Any]) -> None:
        """Folders were added to the workspace or removed from it."""
        for removed in params["event"]["removed"]:
            await ls.remove_folder(removed["uri"])
        for added in params["event"]["added"]:
            ls.add_folder(added["uri"])

    @ls.on_notification(protocol.CONFIGURATION_CHANGED)
    def did_change_configuration(params: Any) -> None:
        """Settings changed in the editor: read them again."""
        ls.run_task(ls.refresh_settings(), "reading the settings")


def import_agent() -> None:
    """Load what the first ask needs: the agent stack (the loop, the tools, the model's HTTP
    client), what that client imports only on its first request, and the certificates."""
    for module in AGENT_MODULES:
        importlib.import_module(module)
    from lsp_agent.agent.sessions import warm_up

    try:
        warm_up()
    except Exception as error:  # e.g. SSL_CERT_FILE names no file: the first request says so
        log.warning("lsp-agent: preparing the HTTP client failed: %r", error)


async def _warm_up() -> None:
    await asyncio.to_thread(import_agent)  # done already under `lsp-agent serve` (`boot.py`)
    from lsp_agent.safety.sandbox import probe

    await asyncio.to_thread(probe)
