"""The language server: LSP commands in, `workspace/applyEdit` proposals and events out.

`AgentServer` is the pygls adapter around the agent core; `LspPort` is the LSP implementation of
the core's `EditorPort`. Handlers stay thin: check arguments, call the agent, shape the result.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import logging
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path

from lsp_agent import __version__
from lsp_agent.config import Settings, load_settings
from lsp_agent.errors import ToolError, UserError
from lsp_agent.lsp import names
from lsp_agent.lsp.arguments import (
    ArgumentError,
    Range,
    ask_arguments,
    session_argument,
    single_object,
)
from lsp_agent.port import Document, EditOutcome, EditProposal
from lsp_agent.tools import edits
from lsp_agent.tools.stats import combined

if TYPE_CHECKING:
    from lsp_agent.agent.sessions import Agent, Selection
    from lsp_agent.changes.tracker import ChangeTracker
    from lsp_agent.model import Provider
    from lsp_agent.safety.sandbox import Availability

# The agent stack (httpx, the loop, the tools) is imported when the first command needs it, and
# warmed up in a thread after `initialized`: `initialize` must be answered fast (DESIGN §8), and
# lsprotocol alone costs a third of a second to import.
AGENT_MODULES = ("lsp_agent.agent.sessions", "lsp_agent.model.openai", "lsp_agent.session.store")

log = logging.getLogger(__name__)

ANNOTATION_ID = "lsp-agent"

_work_done_token: contextvars.ContextVar[types.ProgressToken | None] = contextvars.ContextVar(
    "work_done_token", default=None
)


class AgentProtocol(LanguageServerProtocol):
    """pygls' protocol with `workspace/executeCommand` run as a cancellable request.

    pygls runs registered commands under a private id, so a `$/cancelRequest` for the editor's
    request never reaches them. Handling the method ourselves makes the command's task the
    request's future: the cancel lands in the handler as `CancelledError`, and the handler turns
    it into a cancelled turn. It also gives the handler the request's `workDoneToken`.
    """

    _server: AgentServer

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
        _work_done_token.set(params.work_done_token)
        return await handler(*(params.arguments or []))

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:  # type: ignore[override]
        """The editor says goodbye: the connection's loop ends the process (`connection.py`),
        with code 0 after `shutdown` and 1 without, as the specification wants."""
        self._server.leave()


class LspPort:
    """The agent core's `EditorPort`, spoken in LSP to the connected editor."""

    def __init__(self, server: AgentServer) -> None:
        self.server = server
        self.progress: dict[str, types.ProgressToken] = {}
        """Work-done tokens of running turns, by session id."""

    async def read_document(self, path: Path) -> Document | None:
        document = self.server.open_document(path)
        if document is None:
            return None
        text = document.source
        bom = text.startswith("\ufeff")
        return Document(text[1:] if bom else text, document.version, bom)

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        server = self.server
        capabilities = server.client_capabilities.workspace
        if capabilities is not None and capabilities.apply_edit is False:
            return EditOutcome(
                False,
                "this editor does not accept workspace/applyEdit, so edits cannot be shown",
                failed=True,
            )
        missing = self._missing_operations(proposal)
        if missing is not None:
            return EditOutcome(
                False, f"this editor cannot {missing} files over LSP", unsupported=True
            )
        pinned = []
        for change in proposal.changes:
            current = await self.read_document(change.path)
            if current is not None and change.before is not None and current.text != change.before:
                # The user typed after the edit was planned: positions would land wrong.
                return EditOutcome(False, "the buffer changed before the edit was sent", stale=True)
            pinned.append(replace(change, version=current.version if current else None))
        proposal = replace(proposal, changes=tuple(pinned))
        # Diffing a large rewrite takes a while: keep it off the event loop.
        edit = await asyncio.to_thread(self._workspace_edit, proposal)
        try:
            result = await server.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=edit, label=proposal.label)
            )
        except JsonRpcException as error:
            return EditOutcome(False, f"the editor failed to apply the edit: {error}", failed=True)
        if result.applied:
            return EditOutcome(True)
        for change in proposal.changes:
            document = server.open_document(change.path)
            now = document.version if document is not None else None
            if change.version is not None and now != change.version:
                return EditOutcome(False, result.failure_reason, stale=True)
        return EditOutcome(False, result.failure_reason)

    def _missing_operations(self, proposal: EditProposal) -> str | None:
        """What the proposal needs that the client cannot do (`delete`, `create`), or None.

        Only multi-file proposals insist on `create` support: a lone new file still reaches
        clients without it as a text edit on the missing file, which editors create.
        """
        server = self.server
        if any(change.after is None for change in proposal.changes) and not (
            server.supports_document_changes and server.supports_delete
        ):
            return "delete"
        creates = any(change.before is None for change in proposal.changes)
        if creates and len(proposal.changes) > 1 and not server.supports_create:
            return "create"
        return None

    def _workspace_edit(self, proposal: EditProposal) -> types.WorkspaceEdit:
        server = self.server
        encoding = server.position_encoding
        annotated = server.supports_change_annotations and server.supports_document_changes
        creates: list[Any] = []
        document_changes: list[Any] = []
        deletes: list[Any] = []
        changes: dict[str, list[types.TextEdit]] = {}
        for change in proposal.changes:
            uri = change.path.as_uri()
            if change.after is None:
                # Only reached when the client supports deletes (`_missing_operations`).
                deletes.append(types.DeleteFile(uri=uri, kind="delete"))
                continue
            planned = [
                _text_edit(e, annotated)
                for e in edits.text_edits(change.before or "", change.after, encoding)
            ]
            if server.supports_document_changes:
                if change.before is None and server.supports_create:
                    creates.append(types.CreateFile(uri=uri, kind="create"))
                identifier = types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=change.version
                )
                document_changes.append(types.TextDocumentEdit(identifier, list(planned)))
            else:
                changes[uri] = [_plain_edit(e) for e in planned]
        if not server.supports_document_changes:
            return types.WorkspaceEdit(changes=changes)
        annotations = None
        if annotated:
            annotations = {
                ANNOTATION_ID: types.ChangeAnnotation(
                    label=proposal.label,
                    needs_confirmation=proposal.needs_confirmation,
                    description=proposal.description,
                )
            }
        # Files are created before their text is edited in, and deleted last.
        return types.WorkspaceEdit(
            document_changes=creates + document_changes + deletes, change_annotations=annotations
        )

    async def ask_user(self, question: str, actions: Sequence[str]) -> str | None:
        try:
            answer = await self.server.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=question,
                    actions=[types.MessageActionItem(title=a) for a in actions],
                )
            )
        except JsonRpcException:
            return None
        return answer.title if answer is not None else None

    def emit(self, event: dict[str, Any]) -> None:
        # A compaction that is starting is news for `$/progress` only: the editors' event
        # stream gets each layer's `compaction` event, with its figures, once it is done.
        starting = event["kind"] == "compaction" and event.get("phase") == "started"
        if not starting:
            self.server.protocol.notify(names.EVENT, event)
        token = self.progress.get(event["session"])
        if token is None:
            return
        kind = event["kind"]
        if kind == "tool":
            message = f"{event['name']} …"
        elif kind == "toolResult":
            message = str(event["summary"])
        elif kind == "edit":
            message = ("applied " if event["applied"] else "rejected ") + event["uri"]
        elif kind == "text":
            message = "writing the answer…"
        elif kind == "permission":
            message = f"{event['name']}: {event['decision']}"
        elif kind == "compaction":
            message = (
                "compacting"
                if starting
                else f"context {event['strategy']}: {event['before']} → {event['after']} tokens"
            )
        else:
            return
        self.server.work_done_progress.report(
            token, types.WorkDoneProgressReport(message=message[:200], cancellable=True)
        )

    def log(self, message: str) -> None:
        self.server.window_log_message(
            types.LogMessageParams(type=types.MessageType.Log, message=message)
        )


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

    def receive(self, message: Any) -> None:
        """Handle one message from the editor (parsed JSON, or a `ParseError`)."""
        from lsp_agent.lsp.connection import ParseError

        if isinstance(message, ParseError):
            log.error("lsp-agent: a message from the editor is not JSON: %s", message.detail)
            self._send_error(None, -32700, f"Parse error: {message.detail}")
            return
        if isinstance(message, dict) and message.get("method") == types.SHUTDOWN:
            # Clients often send `exit` without waiting for the answer to `shutdown`.
            self.shutdown_requested = True
        try:
            structured = self.protocol.structure_message(message)
        except JsonRpcException as error:
            log.error("lsp-agent: cannot read a message from the editor: %s", error)
            if _is_request(message):
                self._send_error(message["id"], error.code, str(error))
            return
        try:
            self.protocol.handle_message(structured)
        except Exception:
            log.exception("lsp-agent: cannot handle a message from the editor")
            if _is_request(message):
                self._send_error(message["id"], -32600, "Invalid Request")

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

    @property
    def supports_document_changes(self) -> bool:
        """Versioned edits are understood: said outright, or implied by resource operations,
        which only `documentChanges` can carry (Neovim advertises those alone)."""
        edit = self._edit_capabilities
        return bool(edit and (edit.document_changes or edit.resource_operations))

    @property
    def supports_create(self) -> bool:
        edit = self._edit_capabilities
        operations = (edit and edit.resource_operations) or []
        return types.ResourceOperationKind.Create in operations

    @property
    def supports_delete(self) -> bool:
        edit = self._edit_capabilities
        operations = (edit and edit.resource_operations) or []
        return types.ResourceOperationKind.Delete in operations

    @property
    def supports_change_annotations(self) -> bool:
        edit = self._edit_capabilities
        return bool(edit and edit.change_annotation_support)

    @property
    def _edit_capabilities(self) -> types.WorkspaceEditClientCapabilities | None:
        workspace = self.client_capabilities.workspace
        return workspace.workspace_edit if workspace is not None else None

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
        """The tracked buffer for `path` if the editor has it open, else None."""
        documents = self.workspace.text_documents
        document = documents.get(path.as_uri())
        if document is not None:
            return document
        for candidate in documents.values():
            fs_path = to_fs_path(candidate.uri)
            if fs_path is not None and Path(fs_path).resolve() == path:
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
        """The editor opened or changed a buffer: the tracker hears of it."""
        path = _buffer_path(uri)
        if self.tracker is None or path is None:
            return
        document = self.workspace.text_documents.get(uri)
        if document is not None:
            self.tracker.buffer_changed(
                path, document.source.removeprefix("\ufeff"), document.version
            )

    async def ensure_agent(self) -> Agent:
        """The workspace's agent, made on first use."""
        await self.settings_ready.wait()
        await self.tracker_made.wait()
        if self.agent is None:
            from lsp_agent.agent.sessions import Agent
            from lsp_agent.session.store import SessionStore
            from lsp_agent.tools.workspace import Workspace

            settings, _ = load_settings(self.editor_settings)
            root = self.workspace_root()
            workspace = Workspace(root, read_only=settings.read_only_paths)
            self.agent = Agent(
                settings,
                workspace,
                self.port,
                SessionStore(root),
                _provider,
                tracker=self.tracker,
            )
            await self.refresh_settings()
        return self.agent


def _is_request(message: Any) -> bool:
    return isinstance(message, dict) and "id" in message and "method" in message


def _provider(settings: Settings) -> Provider:
    from lsp_agent.model import make_provider

    return make_provider(
        settings.provider, settings.base_url, settings.model or "", settings.api_key
    )


def _buffer_path(uri: str) -> Path | None:
    fs_path = to_fs_path(uri)
    return Path(fs_path) if fs_path else None


def _plain_edit(edit: types.TextEdit | types.AnnotatedTextEdit) -> types.TextEdit:
    return types.TextEdit(range=edit.range, new_text=edit.new_text)


def _text_edit(edit: edits.TextEdit, annotated: bool) -> types.TextEdit | types.AnnotatedTextEdit:
    range_ = types.Range(
        start=types.Position(line=edit.start_line, character=edit.start_character),
        end=types.Position(line=edit.end_line, character=edit.end_character),
    )
    if annotated:
        return types.AnnotatedTextEdit(
            range=range_, new_text=edit.new_text, annotation_id=ANNOTATION_ID
        )
    return types.TextEdit(range=range_, new_text=edit.new_text)


def selection_of(text: str, range_: Range, encoding: str, path: Path) -> Selection:
    """The selected text and its 1-based lines, from a range in the negotiated encoding."""
    lines = text.splitlines(keepends=True) or [""]

    def offset(line: int, character: int) -> int:
        if line >= len(lines):
            return sum(len(x) for x in lines)
        before = sum(len(x) for x in lines[:line])
        return before + _column_index(lines[line], character, encoding)

    from lsp_agent.agent.sessions import Selection

    start = offset(range_.start.line, range_.start.character)
    end = offset(range_.end.line, range_.end.character)
    return Selection(path, range_.start.line + 1, range_.end.line + 1, text[start:end])


def _column_index(line: str, character: int, encoding: str) -> int:
    """The string index of an LSP column, counted in the encoding's code units."""
    units = 0
    for index, char in enumerate(line):
        if units >= character or char in "\r\n":
            return index
        if encoding == "utf-8":
            units += len(char.encode("utf-8"))
        elif encoding == "utf-16":
            units += 2 if ord(char) > 0xFFFF else 1
        else:
            units += 1
    return len(line.rstrip("\r\n"))


def create_server() -> AgentServer:
    """A server with its commands and document features registered."""
    ls = AgentServer()

    @ls.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        """Keep `initializationOptions`: the editor's settings before any configuration request."""
        options = params.initialization_options
        if not isinstance(options, dict):
            return
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
        from lsp_agent.lsp.connection import EXIT_GRACE_S

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
        token = _work_done_token.get()
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
    """How the workspace is watched: `watching` is `inotify`, `polling`, `native` or `none`."""
    if tracker is None:
        return {"watching": "none", "mode": None, "watches": 0, "fallbackReason": None}
    return {
        "watching": tracker.watching,
        "mode": tracker.mode,
        "watches": tracker.watches,
        "fallbackReason": tracker.fallback_reason,
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
        from lsp_agent.agent.sessions import Selection

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
