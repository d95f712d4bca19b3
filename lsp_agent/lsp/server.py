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
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from lsp_agent import __version__
from lsp_agent.config import Settings, load_settings
from lsp_agent.errors import ToolError, UserError
from lsp_agent.lsp import names, positions
from lsp_agent.lsp.arguments import (
    ArgumentError,
    ClientOptions,
    Range,
    ask_arguments,
    client_options,
    session_argument,
    single_object,
)
from lsp_agent.lsp.connection import EXIT_GRACE_S, ParseError, Writer
from lsp_agent.lsp.framing import Garbage
from lsp_agent.lsp.port import LspPort
from lsp_agent.lsp.protocol import (
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    AgentProtocol,
    vet,
    work_done_token,
)
from lsp_agent.tools.stats import combined

if TYPE_CHECKING:
    from lsp_agent.agent.conversation import Selection
    from lsp_agent.agent.sessions import Agent
    from lsp_agent.changes.tracker import ChangeTracker
    from lsp_agent.safety.sandbox import Availability

# The agent stack (httpx, the loop, the tools) is imported when the first command needs it, and
# warmed up in a thread after `initialized`: `initialize` must be answered fast (docs/protocol.md),
# and lsprotocol alone costs a third of a second to import.
AGENT_MODULES = ("lsp_agent.agent.sessions", "lsp_agent.model.provider", "lsp_agent.session.store")

log = logging.getLogger(__name__)


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
        self.agent: Agent | None = None
        """The workspace's agent, made once the client said which folder is open."""
        self.tracker: ChangeTracker | None = None
        """Watches the workspace folder for changes made by someone else than the agent."""
        self.tracker_made = asyncio.Event()
        """Set once the tracker exists, or is known not to (no folder open, or it failed)."""
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
        if isinstance(message, Garbage):
            self._log_input(
                f"skipped {message.skipped} bytes that are not a message: {message.reason}"
            )
            return
        if isinstance(message, ParseError):
            self._log_input(f"a message is not JSON: {message.detail}")
            self._send_error(None, PARSE_ERROR, f"Parse error: {message.detail}")
            return
        refusal = vet(message, initialized=self.initialized, shutting_down=self.shutdown_requested)
        if refusal is not None:
            self._log_input(refusal.message)
            if refusal.code is not None:
                self._send_error(refusal.id, refusal.code, refusal.message)
            return
        method = message.get("method")
        if isinstance(method, str) and not self._handles(method):
            if "id" in message:
                self._send_error(message["id"], METHOD_NOT_FOUND, f"Method not found: {method}")
            elif not method.startswith("$/"):
                self._log_input(f"ignored the notification {method}: lsp-agent does not handle it")
            return
        if method == types.TEXT_DOCUMENT_DID_CHANGE and _backwards_range(message.get("params")):
            # Applied, it would garble the server's copy of the buffer: refuse it, and read the
            # file from disk until the editor opens it again.
            uri = message["params"]["textDocument"].get("uri")
            self._log_input(f"refused a change of {uri} whose range ends before it starts")
            if isinstance(uri, str):
                self.unreliable.add(unquote(uri))
            return
        if method == types.TEXT_DOCUMENT_DID_OPEN:
            opened = (message.get("params") or {}).get("textDocument")
            if isinstance(opened, dict) and isinstance(opened.get("uri"), str):
                self.unreliable.discard(unquote(opened["uri"]))
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
        if self.agent is not None:
            await self.agent.aclose()
        if self.tracker is not None:
            await self.tracker.stop()

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

    def workspace_root(self) -> Path:
        folders = list(self.workspace.folders.values())
        uri = folders[0].uri if folders else self.workspace.root_uri
        fs_path = to_fs_path(uri) if uri else None
        if not fs_path:
            raise UserError(
                "no workspace folder is open: open a folder in the editor, then ask again"
            )
        return Path(fs_path).resolve()

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
                types.ShowMessageParams(type=types.MessageType.Warning, message=warning)
            )
        if self.agent is not None:
            await self.agent.update_settings(settings)
        self.settings_ready.set()
        return settings

    async def watch_workspace(self) -> None:
        """Start the change tracker on the workspace folder (after `initialized`)."""
        try:
            root = self.workspace_root()
            changes = await asyncio.to_thread(importlib.import_module, "lsp_agent.changes.tracker")
            self.tracker = changes.ChangeTracker(root, log_line=self.port.log)
        except UserError:
            return  # no folder: no agent either, and `ask` says so
        finally:
            self.tracker_made.set()
        await self.tracker.start()

    def buffer_changed(self, uri: str) -> None:
        """The editor opened or changed a buffer: the tracker and edits waiting for it hear."""
        self.port.buffer_changed()
        path = _buffer_path(uri)
        if self.tracker is None or path is None:
            return
        document = self.document(uri)
        if document is not None:
            self.tracker.buffer_changed(
                path, document.source.removeprefix("\ufeff"), document.version
            )

    async def ensure_agent(self) -> Agent:
        """The workspace's agent, made on first use."""
        await self.settings_ready.wait()
        await self.tracker_made.wait()
        if self.agent is None:
            from lsp_agent.agent.sessions import build_agent

            settings, _ = load_settings(self.editor_settings)
            self.agent = build_agent(
                settings, self.workspace_root(), self.port, tracker=self.tracker
            )
            await self.refresh_settings()
        return self.agent


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


def selection_of(text: str, range_: Range, encoding: str, path: Path) -> Selection:
    """The selected text and its 1-based lines, from a range in the negotiated encoding."""
    from lsp_agent.agent.conversation import Selection

    start, end = range_.start, range_.end
    selected = positions.text_range(
        text, (start.line, start.character), (end.line, end.character), encoding
    )
    return Selection(path, start.line + 1, end.line + 1, selected)


def create_server() -> AgentServer:
    """A server with its commands and document features registered."""
    ls = AgentServer()

    @ls.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        """Keep `initializationOptions`: the editor's settings before any configuration request."""
        options = params.initialization_options
        if not isinstance(options, dict):
            return
        ls.client = client_options(options.get(names.CLIENT_SECTION))
        options = {k: v for k, v in options.items() if k != names.CLIENT_SECTION}
        section = options.get(names.SETTINGS_SECTION, options)
        if isinstance(section, dict):
            ls.editor_settings = dict(section)
        else:
            ls.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Warning,
                    message=f"lspAgent settings in initializationOptions must be an object, "
                    f"not {type(section).__name__}: using the other sources",
                )
            )

    @ls.feature(types.INITIALIZED)
    def initialized(params: types.InitializedParams) -> None:
        """Fetch the `lspAgent` settings section now that the client can answer requests."""
        ls.run_task(ls.refresh_settings(), "reading the settings")
        ls.run_task(_warm_up(), "loading the agent")
        ls.run_task(ls.watch_workspace(), "watching the workspace for changes")

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
        path = _buffer_path(params.text_document.uri)
        if ls.tracker is not None and path is not None:
            ls.tracker.buffer_saved(path)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        """A buffer closed: the disk is what counts again."""
        path = _buffer_path(params.text_document.uri)
        if ls.tracker is not None and path is not None:
            ls.tracker.buffer_closed(path)

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        """Settings changed in the editor: read them again."""
        ls.run_task(ls.refresh_settings(), "reading the settings")

    @ls.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(params: types.WorkDoneProgressCancelParams) -> None:
        """The user pressed Cancel on the progress: cancel that turn."""
        session = ls.progress_sessions.get(params.token)
        if session is not None and ls.agent is not None:
            ls.agent.cancel(session)

    @ls.feature(types.SHUTDOWN)
    async def shutdown(params: None) -> None:
        """Cancel running turns so their transcripts record it, close the provider, stop
        watching; answered within the exit grace whatever a task is doing."""
        try:
            await asyncio.wait_for(ls.close(), EXIT_GRACE_S)
        except asyncio.TimeoutError:
            log.warning("lsp-agent: shutdown took longer than %.1f s; answering", EXIT_GRACE_S)

    @ls.command(names.ASK)
    async def ask(*arguments: Any) -> dict[str, Any]:
        """Run one agent turn; answers when the turn ends."""
        args = _checked(lambda: ask_arguments(arguments))
        agent = await _agent(ls)
        selection = None
        if args.uri is not None:
            selection = await _selection(ls, agent, args.uri, args.range)
        token = work_done_token.get()
        try:
            await agent.load(args.session)
        except UserError as error:
            raise JsonRpcInvalidRequest(message=str(error)) from None
        session = _user_errors(lambda: agent.start(args.prompt, args.session, selection, args.mode))
        if token is not None:
            ls.port.progress[session.id] = token
            ls.progress_sessions[token] = session.id
            ls.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title="lsp-agent", message=args.prompt[:100], cancellable=True
                ),
            )
        try:
            result = await agent.wait(session)
        finally:
            if token is not None:
                ls.port.progress.pop(session.id, None)
                ls.progress_sessions.pop(token, None)
                ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
        return result.to_json()

    @ls.command(names.CANCEL)
    async def cancel(*arguments: Any) -> dict[str, bool]:
        """Cancel a session's running turn."""
        session = _checked(lambda: session_argument(names.CANCEL, arguments, required=True))
        assert session is not None
        cancelled = ls.agent.cancel(session) if ls.agent is not None else False
        return {"cancelled": cancelled}

    @ls.command(names.NEW_SESSION)
    async def new_session(*arguments: Any) -> dict[str, str]:
        """Start a new conversation."""
        _checked(lambda: single_object(names.NEW_SESSION, arguments))
        agent = await _agent(ls)
        return {"session": agent.new_session().id}

    @ls.command(names.SESSIONS)
    async def sessions(*arguments: Any) -> list[dict[str, Any]]:
        """The workspace's stored sessions, newest first."""
        _checked(lambda: single_object(names.SESSIONS, arguments))
        agent = await _agent(ls)
        listed = await asyncio.to_thread(agent.store.list)
        return [
            {**info.as_dict(), "transcript": str(agent.store.directory / f"{info.session}.jsonl")}
            for info in listed
        ]

    @ls.command(names.STATUS)
    async def status(*arguments: Any) -> dict[str, Any]:
        """The model and settings in effect, and the sessions of this server."""
        wanted = _checked(lambda: session_argument(names.STATUS, arguments, required=False))
        await ls.settings_ready.wait()
        agent = ls.agent
        settings = agent.settings if agent is not None else load_settings(ls.editor_settings)[0]
        listed = agent.status() if agent is not None else []
        figures = {
            sid: session.toolbox.edit_stats
            for sid, session in (agent.sessions.items() if agent is not None else ())
        }
        for entry in listed:
            entry["edits"] = figures[entry["session"]].to_json()
        if wanted is not None:
            listed = [s for s in listed if s["session"] == wanted]
        # The probe runs a real sandboxed command once per process: off the event loop.
        sandbox = await asyncio.to_thread(_sandbox_availability, agent)
        return {
            "model": settings.model,
            "baseUrl": settings.base_url,
            "provider": settings.provider,
            "sandbox": sandbox.kind,
            "sandboxReason": sandbox.reason,
            "contextWindow": settings.context_window,
            "sessions": listed,
            "edits": combined(figures.values()).to_json(),
            "settings": settings.describe(),
            "version": __version__,
            "changes": _tracker_status(ls.tracker),
        }

    return ls


def _tracker_status(tracker: ChangeTracker | None) -> dict[str, Any]:
    """How the workspace is watched: `watching` is `inotify`, `native`, `polling` (compared
    once a turn, past the inotify limit) or `none`; `ready` once the first comparison is made."""
    if tracker is None:
        return {
            "watching": "none",
            "mode": None,
            "watches": 0,
            "fallbackReason": None,
            "ready": False,
        }
    return {
        "watching": tracker.watching,
        "mode": tracker.mode,
        "watches": tracker.watches,
        "fallbackReason": tracker.fallback_reason,
        "ready": tracker.ready,
    }


def _sandbox_availability(agent: Agent | None) -> Availability:
    if agent is not None:
        return agent.sandbox.availability
    from lsp_agent.safety.sandbox import probe

    return probe()


async def _warm_up() -> None:
    for module in AGENT_MODULES:
        await asyncio.to_thread(importlib.import_module, module)
    from lsp_agent.safety.sandbox import probe

    await asyncio.to_thread(probe)


async def _agent(ls: AgentServer) -> Agent:
    try:
        return await ls.ensure_agent()
    except UserError as error:
        raise JsonRpcInvalidRequest(message=str(error)) from None


async def _selection(
    ls: AgentServer, agent: Agent, uri: str, range_: Range | None
) -> Selection | None:
    fs_path = to_fs_path(uri)
    if fs_path is None:
        raise JsonRpcInvalidParams.of(ValueError(f"uri must be a file URI, not {uri!r}"))
    try:
        path = agent.workspace.resolve(fs_path)
        document = await agent.workspace_document(path)
    except ToolError as error:
        raise JsonRpcInvalidParams.of(ValueError(f"uri: {error.message}")) from None
    if range_ is None:
        from lsp_agent.agent.conversation import Selection

        return Selection(path)
    return selection_of(document.text, range_, ls.position_encoding, path)


def _checked(parse: Any) -> Any:
    try:
        return parse()
    except ArgumentError as error:
        raise JsonRpcInvalidParams.of(error) from None


def _user_errors(call: Any) -> Any:
    try:
        return call()
    except UserError as error:
        raise JsonRpcInvalidRequest(message=str(error)) from None
