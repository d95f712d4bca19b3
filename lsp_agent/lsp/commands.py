"""The `lspAgent.*` commands: thin handlers that check arguments, call the agent, shape results.

Every command's arguments are checked first (`arguments.py`): a wrong one is a JSON-RPC error
`-32602` naming the key; something the user can fix (no folder open, no model set, a busy
session) is `-32600` with a sentence. A turn runs the same whether `lspAgent.ask` waits for it
or `lspAgent.start` answers at once: `Turns` mirrors it as `$/progress` and, for clients that
do not show answers themselves, ends it with the answer on screen.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcRequestCancelled
from pygls.uris import to_fs_path

from lsp_agent import __version__
from lsp_agent.config import load_settings
from lsp_agent.errors import ToolError, UserError
from lsp_agent.lsp import names, positions
from lsp_agent.lsp.arguments import (
    ArgumentError,
    AskArguments,
    ask_arguments,
    folder_argument,
    session_argument,
    undo_arguments,
)
from lsp_agent.tools.stats import EditStats, combined

if TYPE_CHECKING:
    from lsp_agent.agent.conversation import Selection, Session, TurnResult
    from lsp_agent.agent.sessions import Agent
    from lsp_agent.config import Settings
    from lsp_agent.lsp.arguments import Range
    from lsp_agent.lsp.folders import Folder
    from lsp_agent.lsp.server import AgentServer
    from lsp_agent.safety.sandbox import Availability

log = logging.getLogger(__name__)

T = TypeVar("T")

Token = int | str
"""A `$/progress` token."""

Command = Callable[..., Awaitable[Any]]

work_done_token: contextvars.ContextVar[Token | None] = contextvars.ContextVar(
    "work_done_token", default=None
)
"""The `workDoneToken` of the `workspace/executeCommand` request being handled (each command
runs as its own task, in its own context)."""

ENDED = {
    "cancelled": "the turn was cancelled",
    "failed": "the turn failed",
    "max_turns": "the turn stopped at the lspAgent.maxTurns limit",
}
"""How a turn that did not complete ends its answer, for clients that show it as a message."""

PROGRESS_CREATE_WAIT_S = 3.0
"""How long a client may take to accept a progress token before the turn starts without one
(clients answer in milliseconds; one that has not answered in seconds is not going to)."""

ANSWER_IN_MESSAGE = 1500
"""Characters of an answer a `window/showMessage` carries whole; a longer answer begins there
and is written to a document of its own."""


def register(ls: AgentServer) -> None:
    """Register every `lspAgent.*` command on the server."""
    turns = Turns(ls)
    command = partial(_command, ls)

    @command(names.ASK)
    async def ask(*arguments: Any) -> dict[str, Any]:
        """Run one agent turn; answers when the turn ends."""
        args = _checked(lambda: ask_arguments(names.ASK, arguments))
        token = await turns.token(work_done_token.get())
        agent, session = await _start_turn(ls, args)
        turns.begin(session, args.prompt, token)
        result = await turns.follow(agent, session, token)
        answer = result.to_json()
        if answer.get("error"):
            answer["error"] = ls.in_client_words(answer["error"])
        return answer

    @command(names.START)
    async def start(*arguments: Any) -> dict[str, Any]:
        """Start one agent turn and answer at once; events, progress and a final message tell
        the rest (for clients that time out long requests)."""
        args = _checked(lambda: ask_arguments(names.START, arguments))
        token = await turns.token(work_done_token.get())
        agent, session = await _start_turn(ls, args)
        turns.begin(session, args.prompt, token)
        ls.run_task(turns.follow(agent, session, token), "a turn")
        return {"session": session.id}

    @command(names.CANCEL)
    async def cancel(*arguments: Any) -> dict[str, bool]:
        """Cancel a session's running turn."""
        session = _checked(lambda: session_argument(names.CANCEL, arguments, required=True))
        assert session is not None
        cancelled = any(f.agent.cancel(session) for f in ls.folders if f.agent is not None)
        return {"cancelled": cancelled}

    @command(names.NEW_SESSION)
    async def new_session(*arguments: Any) -> dict[str, str]:
        """Start a new conversation."""
        folder = _checked(lambda: folder_argument(names.NEW_SESSION, arguments))
        agent = await _agent(ls, await _folder(ls, folder=folder))
        return {"session": agent.new_session().id}

    @command(names.SESSIONS)
    async def sessions(*arguments: Any) -> list[dict[str, Any]]:
        """The stored sessions of a folder (of every folder when none is named), newest first."""
        folder = _checked(lambda: folder_argument(names.SESSIONS, arguments))
        chosen = [await _folder(ls, folder=folder)] if folder is not None else list(ls.folders)
        listed: list[dict[str, Any]] = []
        for one in chosen:
            agent = await _agent(ls, one)
            for info in await asyncio.to_thread(agent.store.list):
                transcript = agent.store.directory / f"{info.session}.jsonl"
                listed.append(
                    {**info.as_dict(), "transcript": str(transcript), "folder": one.root.as_uri()}
                )
        # Newest first by start time, as the store lists them: two ids of the same second are
        # ordered by their random tail, not by which came first.
        return sorted(
            listed, key=lambda item: (str(item["started"]), str(item["session"])), reverse=True
        )

    @command(names.HISTORY)
    async def history(*arguments: Any) -> list[dict[str, Any]]:
        """A session's conversation as displayable items, from its transcript."""
        session = _checked(lambda: session_argument(names.HISTORY, arguments, required=True))
        assert session is not None
        agent = await _agent(ls, await _folder(ls, session=session))
        items = await _user_errors_async(ls, agent.history(session))
        # A failed turn's sentence names settings the way this client's user sets them.
        return [
            {**item, "error": ls.in_client_words(item["error"])}
            if item.get("type") == "status" and isinstance(item.get("error"), str)
            else item
            for item in items
        ]

    @command(names.UNDO_TURN)
    async def undo_turn(*arguments: Any) -> dict[str, Any]:
        """Propose one edit that restores what a turn's accepted edits changed (with
        `rewind`, every later turn's too; with `conversation`, the conversation goes back too)."""
        args = _checked(lambda: undo_arguments(arguments))
        agent = await _agent(ls, await _folder(ls, session=args.session))
        undo = agent.undo_turn(args.session, args.turn, args.mode, args.rewind, args.conversation)
        return await _user_errors_async(ls, undo)

    _register_endpoint(ls, command)


def _register_endpoint(
    ls: AgentServer, command: Callable[[str], Callable[[Command], Command]]
) -> None:
    """The commands that tell what is in effect: the model and its endpoint, the sessions."""

    @command(names.MODELS)
    async def models(*arguments: Any) -> dict[str, Any]:
        """The models the endpoint lists, and the one in effect: what a model picker offers."""
        folder = _checked(lambda: folder_argument(names.MODELS, arguments))
        agent = await _agent(ls, await _folder(ls, folder=folder))
        listed = await _user_errors_async(ls, agent.provider.list_models())
        settings = agent.settings
        return {
            "models": listed,
            "current": settings.model,
            "baseUrl": settings.base_url,
            "provider": settings.provider,
        }

    @command(names.STATUS)
    async def status(*arguments: Any) -> dict[str, Any]:
        """The model and settings in effect, and the sessions of this server."""
        wanted = _checked(lambda: session_argument(names.STATUS, arguments, required=False))
        await ls.settings_ready.wait()
        settings = load_settings(ls.editor_settings)[0] if ls.settings is None else ls.settings
        listed: list[dict[str, Any]] = []
        figures: list[EditStats] = []
        agents = [f.agent for f in ls.folders if f.agent is not None]
        for agent in agents:
            for entry in agent.status():
                entry["edits"] = agent.sessions[entry["session"]].toolbox.edit_stats.to_json()
                entry["folder"] = agent.workspace.root.as_uri()
                listed.append(entry)
            figures.extend(s.toolbox.edit_stats for s in agent.sessions.values())
        if wanted is not None:
            listed = [s for s in listed if s["session"] == wanted]
        # The probe runs a real sandboxed command once per process: off the event loop.
        sandbox = await asyncio.to_thread(_sandbox_availability, agents[0] if agents else None)
        opened = list(ls.folders)
        servers = [await _mcp_status(f, settings) for f in opened]
        folders = [
            {"folder": f.root.as_uri(), "changes": _tracker_status(f), "mcp": mcp}
            for f, mcp in zip(opened, servers, strict=True)
        ]
        return {
            "model": settings.model,
            "baseUrl": settings.base_url,
            "provider": settings.provider,
            "sandbox": sandbox.kind,
            "sandboxReason": sandbox.reason,
            "sandboxUncovered": sandbox.uncovered,
            "contextWindow": settings.context_window,
            "sessions": listed,
            "edits": combined(figures).to_json(),
            "settings": settings.describe(),
            "version": __version__,
            "changes": folders[0]["changes"] if folders else _tracker_status(None),
            "mcp": servers[0] if servers else {"servers": [], "problems": []},
            "folders": folders,
        }


def _command(ls: AgentServer, name: str) -> Callable[[Command], Command]:
    """A decorator that registers its function as the command `name` with pygls.

    The command runs as its request's own task: `$/cancelRequest` for the request cancels it
    (and a turn it waits for), and it then answers the specification's "request cancelled".
    Its arguments arrive as the editor sent them (`arguments.py` checks them).
    """

    def register(handler: Command) -> Command:
        async def run(*arguments: Any) -> Any:
            msg_id = ls.protocol.msg_id
            work_done_token.set(ls.work_done_tokens.pop(msg_id, None))
            task = asyncio.current_task()
            if msg_id is not None and task is not None:
                ls.running[msg_id] = task
            try:
                return await handler(*arguments)
            except asyncio.CancelledError:
                raise JsonRpcRequestCancelled(f"{name} {msg_id!r} was cancelled") from None
            finally:
                ls.running.pop(msg_id, None)

        ls.command(name)(run)
        return handler

    return register


class Turns:
    """Follows running turns for the editor: `$/progress`, and the answer for clients that do
    not show answers themselves (`window/showMessage`, and the answer as a Markdown document
    through `window/showDocument` where the client can open one)."""

    def __init__(self, ls: AgentServer) -> None:
        self.ls = ls
        self._tokens = itertools.count(1)

    async def token(self, given: Token | None) -> Token | None:
        """The turn's progress token: the editor's, else one of ours for a client that shows
        progress. Made before the turn starts: made after, the client's answer could come after
        the turn's first tool, whose report would then be lost."""
        return given if given is not None else await self._made_token()

    def begin(self, session: Session, prompt: str, token: Token | None) -> None:
        """Start reporting the session's turn (at once: the turn runs from the next step)."""
        if token is None:
            return
        ls = self.ls
        ls.port.progress[session.id] = token
        ls.progress_sessions[token] = session.id
        ls.port.report(
            token,
            types.WorkDoneProgressBegin(title="lsp-agent", message=prompt[:100], cancellable=True),
        )

    async def follow(self, agent: Agent, session: Session, token: Token | None) -> TurnResult:
        """Wait for the session's turn to end, ending its progress; the turn's result."""
        ls = self.ls
        try:
            result = await agent.wait(session)
        finally:
            if token is not None:
                ls.port.progress.pop(session.id, None)
                ls.progress_sessions.pop(token, None)
                ls.port.report(token, types.WorkDoneProgressEnd(message="done"))
        if not ls.client.shows_answers:
            await self._show_answer(agent, result, session.turns)
        return result

    async def _made_token(self) -> Token | None:
        """A progress token of the server's, for clients that show progress and sent none."""
        ls = self.ls
        window = ls.capabilities.window
        if ls.client.shows_answers or window is None or window.work_done_progress is not True:
            return None
        token = f"lsp-agent-turn-{next(self._tokens)}"
        try:
            async with asyncio.timeout(PROGRESS_CREATE_WAIT_S):
                await ls.port.request(
                    types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                    types.WorkDoneProgressCreateParams(token=token),
                )
        except TimeoutError:  # withdrawn: the turn must not wait on a client that never answers
            log.warning(
                "lsp-agent: no answer to %s in %.0f s; the turn runs without progress",
                types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                PROGRESS_CREATE_WAIT_S,
            )
            return None
        except Exception as error:  # the client refused: go on without progress
            log.info("lsp-agent: no progress token: %r", error)
            return None
        return token

    async def _show_answer(self, agent: Agent, result: TurnResult, turn: int) -> None:
        """The answer on screen, for a client without our plugins: a message that carries a
        short answer whole; a long one begins in the message and is written to a document of
        its own (one per turn: nothing shown before is rewritten under the user's eyes), which
        opens beside the user's view where the client can do that without taking it."""
        ls = self.ls
        text = result.answer.strip()
        if result.status != "completed":
            ended = f"lsp-agent: {ENDED.get(result.status, result.status)}"
            ended += f": {result.error}" if result.error else ""
            text = f"{text}\n\n({ended})" if text else ended
        kind = types.MessageType.Error if result.status == "failed" else types.MessageType.Info
        if len(text) <= ANSWER_IN_MESSAGE:
            ls.show_message(kind, ls.in_client_words(text))
            return
        document = await asyncio.to_thread(_answer_file, agent, result, turn, text)
        message = f"{text[:ANSWER_IN_MESSAGE]}…\n\n(the whole answer: {document})"
        ls.show_message(kind, ls.in_client_words(message))
        if opens_beside(ls.capabilities, ls.client_name):
            try:
                await ls.port.request(
                    types.WINDOW_SHOW_DOCUMENT,
                    types.ShowDocumentParams(uri=document.as_uri(), take_focus=False),
                )
            except Exception as error:
                log.info("lsp-agent: the answer document was not shown: %r", error)


REPLACES_THE_VIEW = frozenset({"helix"})
"""Clients (by `clientInfo.name`) that show a document in place of the user's view whatever
`takeFocus` says (Helix opens it in the current view unless a popup is open): they get the
answer's path in the message instead."""


def opens_beside(capabilities: types.ClientCapabilities, client_name: str) -> bool:
    """Whether `window/showDocument` with `takeFocus: false` opens the answer without taking the
    user's view: the client supports the request (Neovim 0.7 says `support: false`: only
    `support` counts) and is not one known to replace the view."""
    window = capabilities.window
    if window is None or window.show_document is None or not window.show_document.support:
        return False
    return client_name.lower() not in REPLACES_THE_VIEW


def _answer_file(agent: Agent, result: TurnResult, turn: int, text: str) -> Path:
    """The turn's answer as a Markdown file beside the session's transcript, one per turn
    (`answers/<session>-<turn>.md`): an editor that shows it never meets it rewritten."""
    folder = agent.store.directory / "answers"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.session}-{turn}.md"
    path.write_text(text + "\n", encoding="utf-8")
    return path


async def _start_turn(ls: AgentServer, args: AskArguments) -> tuple[Agent, Session]:
    path = _path_of(args.uri) if args.uri is not None else None
    folder_path = _path_of(args.folder) if args.folder is not None else None
    folder = await _folder(ls, path=path, folder=folder_path, session=args.session)
    # A prompt sent right after a setting changed (the user fixed the URL and pressed Retry)
    # runs with the new settings, not with those the editor was being asked for.
    await ls.settings_current()
    agent = await _agent(ls, folder)
    selection = None
    if args.uri is not None:
        selection = await _selection(ls, agent, args)
    await _user_errors_async(ls, agent.load(args.session))
    session = _user_errors(
        ls,
        lambda: agent.start(args.prompt, args.session, selection, args.mode, args.codebase),
    )
    return agent, session


async def _folder(
    ls: AgentServer,
    *,
    path: Path | None = None,
    folder: Path | str | None = None,
    session: str | None = None,
) -> Folder:
    await ls.folders_ready.wait()
    where = _path_of(folder) if isinstance(folder, str) else folder
    return _user_errors(ls, lambda: ls.folders.choose(path=path, folder=where, session=session))


async def _agent(ls: AgentServer, folder: Folder) -> Agent:
    return await _user_errors_async(ls, ls.ensure_agent(folder))


async def _selection(ls: AgentServer, agent: Agent, args: AskArguments) -> Selection:
    from lsp_agent.agent.conversation import Selection

    assert args.uri is not None
    try:
        path = agent.workspace.resolve(str(_path_of(args.uri)))
        document = await agent.workspace_document(path)
    except ToolError as error:
        raise JsonRpcInvalidParams(f"Invalid Params: uri: {error.message}") from None
    if args.range is None:
        return Selection(path)
    return selection_of(document.text, args.range, ls.position_encoding, path)


def _path_of(uri: str) -> Path:
    fs_path = to_fs_path(uri)
    if not fs_path:
        raise JsonRpcInvalidParams(f"Invalid Params: not a file URI: {uri!r}")
    return Path(fs_path).resolve()


def _tracker_status(folder: Folder | None) -> dict[str, Any]:
    """How a folder is watched: `watching` is `inotify`, `native`, `polling` (compared once a
    turn: past a watch limit, or the watcher not trusted, `fallbackReason` says which) or
    `none`; `watches` held against `watchLimit`; `ready` once the first comparison is made."""
    tracker = folder.tracker if folder is not None else None
    if tracker is None:
        return {
            "watching": "none",
            "mode": None,
            "watches": 0,
            "watchLimit": None,
            "fallbackReason": None,
            "ready": False,
        }
    return {
        "watching": tracker.watching,
        "mode": tracker.mode,
        "watches": tracker.watches,
        "watchLimit": tracker.watch_limit,
        "fallbackReason": tracker.fallback_reason,
        "ready": tracker.ready,
    }


async def _mcp_status(folder: Folder, settings: Settings) -> dict[str, Any]:
    """A folder's MCP servers: what each is doing, or, before its first session, what is
    configured (the configuration read again now)."""
    if folder.agent is not None:
        return await folder.agent.mcp.status()
    from lsp_agent.mcp.hub import status
    from lsp_agent.session.store import SessionStore

    try:
        home: Path | None = Path.home()
    except RuntimeError:
        home = None
    state = SessionStore(folder.root).directory
    return await status(folder.root, settings.mcp_servers, home, state, None)


def _sandbox_availability(agent: Agent | None) -> Availability:
    if agent is not None:
        return agent.sandbox.availability
    from lsp_agent.safety.sandbox import probe

    return probe()


def _checked(parse: Callable[[], T]) -> T:
    try:
        return parse()
    except ArgumentError as error:
        raise JsonRpcInvalidParams(f"Invalid Params: {error}") from None


def _user_errors(ls: AgentServer, call: Callable[[], T]) -> T:
    """`call()`, its user error an invalid-request answer in the client's words."""
    try:
        return call()
    except UserError as error:
        raise JsonRpcInvalidRequest(ls.in_client_words(str(error))) from None


async def _user_errors_async(ls: AgentServer, awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except UserError as error:
        raise JsonRpcInvalidRequest(ls.in_client_words(str(error))) from None


def selection_of(text: str, range_: Range, encoding: str, path: Path) -> Selection:
    """The selected text and its 1-based lines, from a range in the negotiated encoding."""
    from lsp_agent.agent.conversation import Selection

    start, end = range_.start, range_.end
    selected = positions.text_range(
        text, (start.line, start.character), (end.line, end.character), encoding
    )
    # A selection that ends at the start of a line (a whole-line selection, Ctrl+A over a file
    # ending in a newline) ends on the line before: the editor's own count, and its chip's.
    last = end.line if end.character == 0 and end.line > start.line else end.line + 1
    return Selection(path, start.line + 1, last, selected)
