"""The language server: a pygls `LanguageServer` holding what one editor connection needs.

`AgentServer` is the workspace's agents, change trackers, settings, capabilities and buffers,
and the connection's lifecycle. Each message the editor sends meets `receive` first, which
checks it (`protocol.py`), answers what pygls cannot (a batch, an id that is an object, a
request lsprotocol cannot read, anything after `shutdown`), keeps the open buffers itself
(`documents.py`: pygls' own copy costs milliseconds per keystroke in a large file), ends the
connection on `exit` within a bound (`connection.py`) and withdraws the server's own requests;
everything else goes to pygls, which dispatches it to the features registered here and to the
commands of `commands.py`. The `EditorPort` over LSP is in `port.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import logging
import re
from collections import OrderedDict
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from lsp_agent import __version__
from lsp_agent.config import Settings, load_settings
from lsp_agent.lsp import names, protocol
from lsp_agent.lsp.actions import KINDS, code_actions, relative
from lsp_agent.lsp.arguments import ClientOptions, client_options
from lsp_agent.lsp.connection import EXIT_GRACE_S, ParseError, Writer
from lsp_agent.lsp.documents import Buffer, Buffers
from lsp_agent.lsp.folders import Folder, Folders
from lsp_agent.lsp.framing import Garbage
from lsp_agent.lsp.port import LspPort

if TYPE_CHECKING:
    from lsp_agent.agent.sessions import Agent
    from lsp_agent.changes.tracker import ChangeTracker

# The agent stack (HTTP client, loop, tools) is loaded in the background as soon as
# `initialize` is answered: the server is ready for its first ask a moment later.
AGENT_MODULES = ("lsp_agent.agent.sessions", "lsp_agent.model.openai", "lsp_agent.session.store")

log = logging.getLogger(__name__)

SETTINGS_WAIT_S = 5.0
"""How long a turn waits for settings being read again before it starts with those in effect."""
WITHDRAWN_KEPT = 256
"""Ids of withdrawn requests remembered, so that their late answers are dropped quietly."""

BUFFER_SYNC = frozenset(
    {types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_CLOSE}
)
"""The notifications the server's own buffer store takes instead of pygls' workspace."""

_SETTING = re.compile(r"\blspAgent\.([a-z][A-Za-z]+)\b")
"""A setting named in a message: `lspAgent.model`."""


class AgentServer(LanguageServer):
    """The lsp-agent language server: one agent per workspace folder, settings from the editor."""

    def __init__(self) -> None:
        super().__init__("lsp-agent", __version__, types.TextDocumentSyncKind.Incremental)
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
        self.capabilities = types.ClientCapabilities()
        """The client's capabilities, as `initialize` sent them."""
        self.position_encoding = "utf-16"
        """The position encoding agreed at `initialize`."""
        self.client_name = ""
        """The client's `clientInfo.name` (`helix`, `Neovim`, `Eglot`, …), "" when it sent none."""
        self.settings: Settings | None = None
        """The settings in effect, once the editor's have been read."""
        self.editor_settings: dict[str, Any] = {}
        """`initializationOptions` merged with the `lspAgent` configuration section."""
        self.client = ClientOptions()
        """What the client said of itself in `initializationOptions.lspAgentClient`."""
        self.settings_ready = asyncio.Event()
        """Set once the first `workspace/configuration` answer (or its absence) is known."""
        self.settings_reading: asyncio.Task[Any] | None = None
        """The reading of the settings the editor last said changed, while it runs."""
        self.tasks: set[asyncio.Task[Any]] = set()
        """Background tasks, kept so none is garbage-collected or fails unseen."""
        self.running: dict[Any, asyncio.Task[Any]] = {}
        """The commands being run, by the id of their request (for `$/cancelRequest`)."""
        self.work_done_tokens: dict[Any, int | str] = {}
        """The `workDoneToken` of each `workspace/executeCommand` request not yet started."""
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
        self._output: Writer | None = None
        """Where the server's messages go (the connection's non-blocking writer)."""
        self._outstanding: dict[str, str] = {}
        """The server's requests the editor has not answered yet: id → method."""
        self._withdrawn: OrderedDict[str, None] = OrderedDict()
        """The server's requests given up on (their late answers are dropped)."""
        self._ids = itertools.count(1)
        """Ids of the server's own requests."""

    def attach(self, writer: Writer) -> None:
        """Send what the server writes to `writer` (the connection's output)."""
        self._output = writer
        self.protocol.set_writer(writer)

    def receive(self, message: Any) -> None:
        """Handle one message from the editor: parsed JSON, a `ParseError` or `Garbage`. Never
        raises: a failure of ours is logged, and a request gets an internal error answer."""
        try:
            self._receive(message)
        except Exception as error:
            self.report_server_error(error, "reading a message")
            msg_id = message.get("id") if isinstance(message, dict) else None
            if isinstance(message, dict) and "method" in message and msg_id is not None:
                self._refuse(msg_id, protocol.INTERNAL_ERROR, f"Internal error: {error!r}")

    def _receive(self, message: Any) -> None:
        if not self._acceptable(message):
            return
        method = message.get("method")
        if method is None:
            self._answered(message)
            return
        if method == types.EXIT:
            self.leave()
            return
        if method == types.CANCEL_REQUEST:
            self._cancel(message.get("params"))
            return
        if not self._takes(method, message):
            return
        if method == types.SHUTDOWN:
            # Clients often send `exit` without waiting for the answer to `shutdown`.
            self.shutdown_requested = True
        typed = self._read(method, message)
        if typed is None:
            return
        if method in BUFFER_SYNC:
            self._sync(method, typed.params)
            return
        self.protocol.handle_message(typed)

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
            self._refuse(None, protocol.PARSE_ERROR, f"Parse error: {message.detail}")
            return False
        refusal = protocol.vet(
            message, initialized=self.initialized, shutting_down=self.shutdown_requested
        )
        if refusal is None:
            return True
        self._log_input(refusal.message)
        if refusal.code is not None:
            self._refuse(refusal.id, refusal.code, refusal.message)
        return False

    def _takes(self, method: str, message: dict[str, Any]) -> bool:
        """Whether lsp-agent handles `method`, and this message of it, at all; when it does not,
        a request is answered "method not found" and a notification logged."""
        request = "id" in message
        features = self.protocol.fm
        if method not in features.features and method not in features.builtin_features:
            if request:
                self._refuse(
                    message["id"], protocol.METHOD_NOT_FOUND, f"Method not found: {method}"
                )
            elif not method.startswith("$/"):
                self._log_input(f"ignored the notification {method}: lsp-agent does not handle it")
            return False
        if method != types.WORKSPACE_EXECUTE_COMMAND or not request:
            return True
        params = message["params"]
        if params["command"] not in features.commands:
            self._refuse(
                message["id"],
                protocol.INVALID_PARAMS,
                f"Invalid params: unknown command {params['command']!r}: lsp-agent offers "
                + ", ".join(names.COMMANDS),
            )
            return False
        token = params.get("workDoneToken")
        if isinstance(token, (int, str)) and not isinstance(token, bool):
            self.work_done_tokens[message["id"]] = token
        return True

    def _read(self, method: str, message: dict[str, Any]) -> Any:
        """The message as lsprotocol's type (pygls reads it); None when it cannot be read, after
        answering a request with the member that is wrong, or logging a notification."""
        try:
            return self.protocol.structure_message(protocol.with_defaults(message))
        except JsonRpcException as error:
            if method == types.INITIALIZE:
                return self._read_initialize(message, error)
            detail = protocol.read_error(error)
            if "id" in message:
                self.work_done_tokens.pop(message["id"], None)
                self._refuse(message["id"], protocol.INVALID_PARAMS, f"Invalid params: {detail}")
            else:
                self._log_input(f"cannot read {method}: {detail}")
            return None

    def _read_initialize(self, message: dict[str, Any], error: JsonRpcException) -> Any:
        """An `initialize` lsprotocol cannot read: without the capabilities it cannot read (an
        editor with one odd capability must still be served), or refused when the rest of it
        is what is wrong."""
        params = message.get("params")
        capabilities = params.get("capabilities") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(capabilities, dict):
            self._refuse(
                message["id"],
                protocol.INVALID_PARAMS,
                f"Invalid params: {protocol.read_error(error)}",
            )
            return None
        kept: dict[str, Any] = {}
        dropped: list[str] = []
        for key, value in capabilities.items():
            trial = {**message, "params": {**params, "capabilities": {key: value}}}
            try:
                self.protocol.structure_message(trial)
            except JsonRpcException:
                dropped.append(key)
            else:
                kept[key] = value
        try:
            typed = self.protocol.structure_message(
                {**message, "params": {**params, "capabilities": kept}}
            )
        except JsonRpcException as still:
            self._refuse(
                message["id"],
                protocol.INVALID_PARAMS,
                f"Invalid params: {protocol.read_error(still)}",
            )
            return None
        self._log_input(
            "the client's capabilities could not all be read ("
            + protocol.read_error(error)
            + "); going on without: "
            + ", ".join(dropped)
        )
        return typed

    def _sync(self, method: str, params: Any) -> None:
        """didOpen / didChange / didClose, into the server's own buffer store."""
        if method == types.TEXT_DOCUMENT_DID_OPEN:
            document = params.text_document
            self.buffers.open(document.uri, document.text, document.version)
            self.buffer_changed(document.uri)
        elif method == types.TEXT_DOCUMENT_DID_CHANGE:
            uri = params.text_document.uri
            refused = self.buffers.change(
                uri, params.text_document.version, params.content_changes, self.position_encoding
            )
            if refused is not None:
                # Applied, it would garble the server's copy of the buffer: the buffer is
                # dropped, and the file read from disk until the editor opens it again.
                self._log_input(f"refused a change of {uri}: {refused}; reading the file from disk")
                return
            self.buffer_changed(uri)
        else:
            uri = params.text_document.uri
            self.buffers.close(uri)
            self.buffer_closed(uri)

    def _cancel(self, params: Any) -> None:
        """`$/cancelRequest`: the command of that request is cancelled (a turn it waits for is
        cancelled with it); its answer says so once it has wound down."""
        msg_id = params.get("id") if isinstance(params, dict) else None
        task = self.running.get(msg_id)
        if task is not None:
            task.cancel()

    def _answered(self, message: dict[str, Any]) -> None:
        """The editor's answer to one of the server's requests, handed to pygls; an answer that
        lsprotocol cannot read reaches the request as an error, never as silence."""
        msg_id = message["id"]
        if msg_id in self._withdrawn:
            del self._withdrawn[msg_id]
            log.info("lsp-agent: a late answer to the withdrawn request %r", msg_id)
            return
        method = self._outstanding.pop(msg_id, None)
        if method is None:
            log.info("lsp-agent: an answer to %r, which nothing waits for", msg_id)
            return
        try:
            typed = self.protocol.structure_message(message)
        except JsonRpcException as error:
            detail = f"the editor's answer to {method} cannot be read: {protocol.read_error(error)}"
            self._log_input(detail)
            typed = self.protocol.structure_message(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "error": {"code": protocol.INTERNAL_ERROR, "message": detail},
                }
            )
        self.protocol.handle_message(typed)

    async def editor_request(self, method: str, params: Any) -> Any:
        """Send a request to the editor and wait for its answer (an error answer raises
        `JsonRpcException`). When the caller stops waiting, the request is withdrawn with
        `$/cancelRequest`, and a late answer to it is dropped quietly."""
        msg_id = f"lsp-agent-{next(self._ids)}"
        self._outstanding[msg_id] = method
        try:
            return await self.protocol.send_request_async(method, params, msg_id=msg_id)
        except asyncio.CancelledError:
            if self._outstanding.pop(msg_id, None) is not None:
                self._withdrawn[msg_id] = None
                while len(self._withdrawn) > WITHDRAWN_KEPT:
                    self._withdrawn.popitem(last=False)
                self.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise
        finally:
            self._outstanding.pop(msg_id, None)

    def notify_editor(self, method: str, params: Any) -> None:
        """Send a notification to the editor (pygls writes it)."""
        self.protocol.notify(method, params)

    def _refuse(self, msg_id: Any, code: int, message: str) -> None:
        """The specification's error answer to a message pygls was not given."""
        if self._output is not None:
            self._output.write(protocol.error_frame(msg_id, code, message))

    def report_server_error(self, error: BaseException, source: Any) -> None:
        """A handler failed: a log line with the details, never an "Error in server" popup (a
        request gets its error answer; a notification has none to get). Errors the server
        answers on purpose (bad arguments, a cancelled turn) are not failures."""
        if isinstance(error, JsonRpcException) and source is FeatureRequestError:
            return
        name = getattr(source, "__name__", source)
        log.error("lsp-agent: %s failed: %r", name, error, exc_info=error)
        self.port.log(f"lsp-agent: a message from the editor could not be handled: {error!r}")

    def _log_input(self, what: str) -> None:
        log.warning("lsp-agent: %s", what)
        with contextlib.suppress(Exception):
            self.port.log(f"lsp-agent: {what}")

    def show_message(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def log_message(self, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Log, message=message))

    def leave(self) -> None:
        """The editor has gone (`exit`, or the end of its input): end the connection."""
        if not self.left.is_set():
            self.exit_code = 0 if self.shutdown_requested else 1
            self.left.set()

    async def close(self) -> None:
        """Cancel turns and background work, stop watching: the connection is ending."""
        for task in list(self.tasks) + list(self.running.values()):
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

    def initialize(self, params: types.InitializeParams) -> None:
        """Take what `initialize` says (capabilities, folders, settings); pygls answers with
        the capabilities of the features registered here."""
        self.capabilities = params.capabilities
        self.client_name = params.client_info.name if params.client_info is not None else ""
        # pygls advertises the encoding it chooses here; the server counts in the same one.
        encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
        self.position_encoding = (
            encoding.value if isinstance(encoding, types.PositionEncodingKind) else encoding
        )
        self.folder_uris = [folder.uri for folder in params.workspace_folders or []]
        if not self.folder_uris:
            root = params.root_uri or _path_uri(params.root_path)
            self.folder_uris = [root] if root else []
        self.take_options(params.initialization_options)
        self.initialized = True
        # Loaded now, while the editor finishes its own start: ready for the first ask.
        self.run_task(_warm_up(), "loading the agent")

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
            types.MessageType.Warning,
            f"lspAgent settings in initializationOptions must be an object, "
            f"not {type(section).__name__}: using the other sources",
        )

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        """lsp-agent's code actions for a request (`actions.py`): the file as the editor shows
        it (its buffer, else the disk), read off the event loop with the tree that finds the
        code at the cursor."""
        uri = params.text_document.uri
        path = _buffer_path(uri)
        if path is None:
            return []
        document = self.document(uri)
        settings = self.settings or load_settings(self.editor_settings)[0]
        roots = [folder.root for folder in self.folders]
        source = document.source.removeprefix("\ufeff") if document is not None else None
        encoding = self.position_encoding

        def build() -> list[types.CodeAction]:
            text = source if source is not None else _disk_text(path)
            rel = relative(path.resolve(), roots)
            return code_actions(params, settings.code_actions, rel, text, encoding)

        return await asyncio.to_thread(build)

    def shown_path(self, uri: str) -> str:
        """A file URI as the user names the file: relative to its workspace folder."""
        path = _buffer_path(uri)
        if path is None:
            return uri
        return relative(path, [folder.root for folder in self.folders])

    def in_client_words(self, text: str) -> str:
        """`text` with every `lspAgent.<setting>` named the way this client's user sets it."""
        return _SETTING.sub(lambda match: self.client.setting(match.group(1)), text)

    async def refresh_settings(self) -> Settings:
        """Read the `lspAgent` section from the editor and apply it."""
        section: Any = None
        workspace = self.capabilities.workspace
        if workspace is not None and workspace.configuration is True:
            try:
                answer = await self.editor_request(
                    types.WORKSPACE_CONFIGURATION,
                    types.ConfigurationParams(
                        items=[types.ConfigurationItem(section=names.SETTINGS_SECTION)]
                    ),
                )
                # lsprotocol reads the answer's array as a tuple.
                section = answer[0] if isinstance(answer, (list, tuple)) and answer else None
            except JsonRpcException as error:
                self.port.log(f"workspace/configuration failed: {error}")
        merged = dict(self.editor_settings)
        if isinstance(section, dict):
            merged.update({k: v for k, v in section.items() if v is not None})
        settings, warnings = load_settings(merged)
        for warning in warnings:
            self.show_message(types.MessageType.Warning, self.in_client_words(warning))
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

    def read_settings(self) -> None:
        """Read the settings again (the editor said they changed); a turn that starts
        meanwhile waits for them (`settings_current`)."""
        self.settings_reading = self.run_task(self.refresh_settings(), "reading the settings")

    async def settings_current(self) -> None:
        """Return once the settings the editor last announced are read (bounded: an editor
        that does not answer `workspace/configuration` keeps the settings in effect)."""
        reading = self.settings_reading
        if reading is not None and not reading.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(reading), SETTINGS_WAIT_S)

    async def ensure_agent(self, folder: Folder) -> Agent:
        """The folder's agent, made on first use with the settings in effect."""
        await self.settings_ready.wait()
        settings = self.settings or load_settings(self.editor_settings)[0]
        made = folder.agent is None
        agent = await folder.ensure_agent(settings, self.port)
        if made:
            await agent.update_settings(settings)
        return agent


def _path_uri(path: Any) -> str | None:
    """The URI of `initialize`'s deprecated `rootPath`, when it is an absolute path."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return Path(path).as_uri()


def _disk_text(path: Path) -> str:
    """A file's text as a code action reads it when the editor has not opened it ("" when it
    cannot be read)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff")
    except OSError:
        return ""


def _buffer_path(uri: str) -> Path | None:
    fs_path = to_fs_path(uri)
    return Path(fs_path) if fs_path else None


def register_features(ls: AgentServer) -> None:
    """The lifecycle, document and workspace features: thin handlers over the server's state.
    Their params were read by lsprotocol before they run."""
    _register_lifecycle(ls)
    _register_documents(ls)
    _register_workspace(ls)


def _register_lifecycle(ls: AgentServer) -> None:
    @ls.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        """Take the editor's capabilities, folders and settings; pygls answers with what the
        features registered here offer."""
        ls.initialize(params)

    @ls.feature(types.INITIALIZED)
    def initialized(params: types.InitializedParams) -> None:
        """Fetch the `lspAgent` settings section now that the client can answer requests, and
        start watching every folder."""
        ls.read_settings()
        ls.open_folders()

    @ls.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(params: types.WorkDoneProgressCancelParams) -> None:
        """The user pressed Cancel on the progress: cancel that turn."""
        session = ls.progress_sessions.get(params.token)
        if session is None:
            return
        for folder in ls.folders:
            if folder.agent is not None:
                folder.agent.cancel(session)

    @ls.feature(types.SHUTDOWN)
    async def shutdown(params: None) -> None:
        """Cancel running turns so their transcripts record it, close the provider, stop
        watching; answered within the exit grace whatever a task is doing."""
        try:
            await asyncio.wait_for(ls.close(), EXIT_GRACE_S)
        except TimeoutError:
            log.warning("lsp-agent: shutdown took longer than %.1f s; answering", EXIT_GRACE_S)


def _register_documents(ls: AgentServer) -> None:
    @ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=list(KINDS))
    )
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        """lsp-agent's actions for the cursor, the selection, and each problem reported there."""
        return await ls.code_actions(params)

    @ls.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        """A save: a formatter may rewrite the file in the next moment."""
        ls.buffer_saved(params.text_document.uri)


def _register_workspace(ls: AgentServer) -> None:
    @ls.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(params: types.DidChangeWorkspaceFoldersParams) -> None:
        """Folders were added to the workspace or removed from it."""
        for removed in params.event.removed:
            await ls.remove_folder(removed.uri)
        for added in params.event.added:
            ls.add_folder(added.uri)

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        """Settings changed in the editor: read them again."""
        ls.read_settings()


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
    await asyncio.to_thread(import_agent)
    from lsp_agent.safety.sandbox import probe

    await asyncio.to_thread(probe)
