"""The language server: LSP commands in, proposals, questions and events out.

`AgentServer` holds what one editor connection needs (the workspace's agent, its change tracker,
the editor's settings and options, the connection's lifecycle); `create_server` registers thin
handlers: check the arguments, call the agent, shape the result. The `EditorPort` over LSP is in
`port.py`, the protocol's own handling in `protocol.py`, the connection in `connection.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from lsp_agent import __version__
from lsp_agent.config import Settings, load_settings
from lsp_agent.lsp import names, positions
from lsp_agent.lsp.actions import code_actions, relative
from lsp_agent.lsp.arguments import ClientOptions, client_options
from lsp_agent.lsp.connection import EXIT_GRACE_S, ParseError, Writer
from lsp_agent.lsp.folders import Folder, Folders
from lsp_agent.lsp.framing import Garbage
from lsp_agent.lsp.port import LspPort
from lsp_agent.lsp.protocol import (
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    AgentProtocol,
    vet,
)

if TYPE_CHECKING:
    from lsp_agent.agent.sessions import Agent
    from lsp_agent.changes.tracker import ChangeTracker

# The agent stack (httpx, the loop, the tools) is imported when the first command needs it, and
# warmed up in a thread after `initialized`: `initialize` must be answered fast (docs/protocol.md),
# and lsprotocol alone costs a third of a second to import.
AGENT_MODULES = ("lsp_agent.agent.sessions", "lsp_agent.model.openai", "lsp_agent.session.store")

log = logging.getLogger(__name__)

CODE_ACTION_KINDS = (types.CodeActionKind.QuickFix, types.CodeActionKind.Refactor)
"""The kinds of code action lsp-agent offers."""

SELECTION_CHARS = 4000
"""How much of the selection a code action's prompt carries (the agent can read the rest)."""

_SETTING = re.compile(r"\blspAgent\.([a-z][A-Za-z]+)\b")
"""A setting named in a message: `lspAgent.model`."""


class AgentServer(LanguageServer):
    """The lsp-agent language server: one agent per workspace, settings from the editor."""

    def __init__(self) -> None:
        super().__init__(
            "lsp-agent",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=AgentProtocol,
        )
        self.port = LspPort(self)
        """The core's view of this editor."""
        self.folders = Folders()
        """The editor's workspace folders, each with its agent and change tracker."""
        self.folders_ready = asyncio.Event()
        """Set once the folders of `initialize` are known (after `initialized`)."""
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
        self.progress_sessions: dict[types.ProgressToken, str] = {}
        """Session of each running turn's progress token, for `window/workDoneProgress/cancel`."""
        self.left = asyncio.Event()
        """Set when the editor has gone (`exit`, or the end of its input): time to end."""
        self.exit_code = 1
        """The process's exit code once `left` is set: 0 only after a `shutdown` request."""
        self.shutdown_requested = False
        """The editor sent `shutdown` (perhaps not answered yet)."""
        self.initialized = False
        """The editor sent `initialize`: other requests may follow."""
        self.unreliable: set[str] = set()
        """Buffers (by decoded URI) whose copy here missed a change the editor sent: read from
        disk until the editor opens them again."""

    def attach(self, writer: Writer) -> None:
        """Send what the server writes to `writer` (the connection's output)."""
        self.protocol.set_writer(writer)

    def receive(self, message: Any) -> None:
        """Handle one message from the editor: parsed JSON, a `ParseError` or `Garbage`."""
        if not self._acceptable(message):
            return
        method = message.get("method")
        if isinstance(method, str) and not self._takes(method, message):
            return
        if method == types.INITIALIZE:
            self.initialized = True
        elif method == types.SHUTDOWN:
            # Clients often send `exit` without waiting for the answer to `shutdown`.
            self.shutdown_requested = True
        try:
            structured = self.protocol.structure_message(message)
        except JsonRpcException as error:
            detail = _cause(error)
            self._log_input(f"cannot read {method or 'a message'}: {detail}")
            if _is_request(message):
                self._send_error(
                    message["id"], error.code, f"Invalid params for {method}: {detail}"
                )
            return
        self.protocol.handle_message(structured)

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
            self._send_error(None, PARSE_ERROR, f"Parse error: {message.detail}")
            return False
        refusal = vet(message, initialized=self.initialized, shutting_down=self.shutdown_requested)
        if refusal is None:
            return True
        self._log_input(refusal.message)
        if refusal.code is not None:
            self._send_error(refusal.id, refusal.code, refusal.message)
        return False

    def _takes(self, method: str, message: dict[str, Any]) -> bool:
        """Whether lsp-agent handles `method`, and this message of it, at all."""
        if not self._handles(method):
            if "id" in message:
                self._send_error(message["id"], METHOD_NOT_FOUND, f"Method not found: {method}")
            elif not method.startswith("$/"):
                self._log_input(f"ignored the notification {method}: lsp-agent does not handle it")
            return False
        if method == types.TEXT_DOCUMENT_DID_CHANGE and _backwards_range(message.get("params")):
            # Applied, it would garble the server's copy of the buffer: refuse it, and read the
            # file from disk until the editor opens it again.
            uri = message["params"]["textDocument"].get("uri")
            self._log_input(f"refused a change of {uri} whose range ends before it starts")
            if isinstance(uri, str):
                self.unreliable.add(unquote(uri))
            return False
        if method == types.TEXT_DOCUMENT_DID_OPEN:
            opened = (message.get("params") or {}).get("textDocument")
            if isinstance(opened, dict) and isinstance(opened.get("uri"), str):
                self.unreliable.discard(unquote(opened["uri"]))
        return True

    def _handles(self, method: str) -> bool:
        features = self.protocol.fm
        return (
            method in features.features
            or method in features.builtin_features
            or method == types.CANCEL_REQUEST
            or method == types.PROGRESS
        )

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A handler failed: a log line with the details, never an "Error in server" popup
        (requests get their error answer; a notification has none to get)."""
        log.error("lsp-agent: %s failed: %r", getattr(source, "__name__", source), error)
        self.port.log(f"lsp-agent: a message from the editor could not be handled: {error!r}")

    def _log_input(self, what: str) -> None:
        log.warning("lsp-agent: %s", what)
        with contextlib.suppress(Exception):
            self.port.log(f"lsp-agent: {what}")

    def _send_error(self, msg_id: Any, code: int, message: str) -> None:
        self.protocol._send_data(
            {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        )

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

    @property
    def position_encoding(self) -> str:
        encoding = self.workspace.position_encoding
        if isinstance(encoding, types.PositionEncodingKind):
            return str(encoding.value)
        return encoding or "utf-16"

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

    def open_document(self, path: Path) -> Any:
        """The tracked buffer for `path` if the editor has it open, else None.

        Buffers are found by what they are, not by how their URI is spelled: pygls keys them by
        the decoded URI, and a path can be spelled through a symlink or another drive letter
        case."""
        return self.document(path.as_uri()) or self._document_by_path(path)

    def document(self, uri: str) -> Any:
        """The tracked buffer of `uri` (any percent-encoding of it), or None."""
        key = unquote(uri)
        if key in self.unreliable:
            return None
        return self.workspace.text_documents.get(key)

    def _document_by_path(self, path: Path) -> Any:
        for key, candidate in self.workspace.text_documents.items():
            fs_path = to_fs_path(candidate.uri)
            if (
                key not in self.unreliable
                and fs_path is not None
                and Path(fs_path).resolve() == path
            ):
                return candidate
        return None

    def open_folders(self) -> None:
        """Give every workspace folder of the editor its tracker (after `initialized`)."""
        uris = [folder.uri for folder in self.workspace.folders.values()]
        if not uris and self.workspace.root_uri:
            uris = [self.workspace.root_uri]
        for uri in uris:
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
        self.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=f"lspAgent settings in initializationOptions must be an object, "
                f"not {type(section).__name__}: using the other sources",
            )
        )

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        """lsp-agent's code actions for a request (`actions.py`); nothing slow happens here."""
        uri = params.text_document.uri
        path = _buffer_path(uri)
        if path is None:
            return []
        document = self.document(uri)
        start, end = params.range.start, params.range.end
        selected = ""
        if document is not None:
            selected = positions.text_range(
                document.source,
                (start.line, start.character),
                (end.line, end.character),
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
        workspace = self.client_capabilities.workspace
        if workspace is not None and workspace.configuration:
            try:
                answer = await self.workspace_configuration_async(
                    types.ConfigurationParams(
                        items=[types.ConfigurationItem(section=names.SETTINGS_SECTION)]
                    )
                )
                section = answer[0] if answer else None
            except JsonRpcException as error:
                self.port.log(f"workspace/configuration failed: {error}")
        merged = dict(self.editor_settings)
        if isinstance(section, dict):
            merged.update({k: v for k, v in section.items() if v is not None})
        settings, warnings = load_settings(merged)
        for warning in warnings:
            self.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Warning, message=self.in_client_words(warning)
                )
            )
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


def _cause(error: Exception) -> str:
    """What lsprotocol said was wrong with a message, in one line."""
    cause = error.__cause__ or error
    text = " ".join(str(cause).split())
    return text[:300] if text else type(cause).__name__


def _backwards_range(params: Any) -> bool:
    """Whether a didChange carries a range whose end comes before its start."""
    changes = params.get("contentChanges") if isinstance(params, dict) else None
    for change in changes if isinstance(changes, list) else []:
        range_ = change.get("range") if isinstance(change, dict) else None
        if not isinstance(range_, dict):
            continue
        start, end = range_.get("start"), range_.get("end")
        if isinstance(start, dict) and isinstance(end, dict):
            try:
                if (end["line"], end["character"]) < (start["line"], start["character"]):
                    return True
            except (KeyError, TypeError):
                continue
    return False


def _is_request(message: Any) -> bool:
    return isinstance(message, dict) and "id" in message and "method" in message


def _buffer_path(uri: str) -> Path | None:
    fs_path = to_fs_path(uri)
    return Path(fs_path) if fs_path else None


def register_features(ls: AgentServer) -> None:
    """The lifecycle, document and workspace features: thin handlers over the server's state."""
    _register_lifecycle(ls)
    _register_documents(ls)
    _register_workspace(ls)


def _register_lifecycle(ls: AgentServer) -> None:
    @ls.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        """Keep `initializationOptions`: the editor's settings before any configuration request."""
        ls.take_options(params.initialization_options)

    @ls.feature(types.INITIALIZED)
    def initialized(params: types.InitializedParams) -> None:
        """Fetch the `lspAgent` settings section now that the client can answer requests, and
        start watching every folder."""
        ls.run_task(ls.refresh_settings(), "reading the settings")
        ls.run_task(_warm_up(), "loading the agent")
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
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=list(CODE_ACTION_KINDS)),
    )
    def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        """lsp-agent's actions for the cursor, the selection, and each problem reported there."""
        return ls.code_actions(params)

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        """A buffer opened: its unsaved text is what the agent reads from now on."""
        ls.buffer_changed(params.text_document.uri)

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        """The user typed: a file the agent knows becomes "modified in editor, unsaved"."""
        ls.buffer_changed(params.text_document.uri)

    @ls.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        """A save: a formatter may rewrite the file in the next moment."""
        ls.buffer_saved(params.text_document.uri)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        """A buffer closed: the disk is what counts again."""
        ls.buffer_closed(params.text_document.uri)


def _register_workspace(ls: AgentServer) -> None:
    @ls.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(params: types.DidChangeWorkspaceFoldersParams) -> None:
        """Folders were added to the workspace or removed from it."""
        for removed in params.event.removed or []:
            await ls.remove_folder(removed.uri)
        for added in params.event.added or []:
            ls.add_folder(added.uri)

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        """Settings changed in the editor: read them again."""
        ls.run_task(ls.refresh_settings(), "reading the settings")


async def _warm_up() -> None:
    for module in AGENT_MODULES:
        await asyncio.to_thread(importlib.import_module, module)
    from lsp_agent.agent.sessions import warm_up

    await asyncio.to_thread(warm_up)
    from lsp_agent.safety.sandbox import probe

    await asyncio.to_thread(probe)
