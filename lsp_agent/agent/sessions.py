"""The agent loop: one turn = model call → tool calls → results → … → answer.

`Agent` owns the sessions of one workspace. A turn runs as its own asyncio task so that a cancel
(from any of the editor's three paths) closes the model stream or the running tool at once, and
the turn still ends with a result and a transcript that says what happened.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_agent.agent.instructions import Instructions, changed_note, fingerprint, read_instructions
from lsp_agent.agent.prompt import system_prompt
from lsp_agent.config import Settings, require_model
from lsp_agent.context.history import (
    ContextEvent,
    ContextState,
    before_call,
    build_request,
    end_of_turn,
    restore_state,
)
from lsp_agent.context.reminder import FileChangeSource, GitStatusChanges, reminder_message
from lsp_agent.context.tokens import TokenMeter, request_bytes
from lsp_agent.errors import UserError
from lsp_agent.messages import Reply, ToolCall, Usage, estimate_tokens
from lsp_agent.model import TOOL_MODELS, Provider, ProviderError
from lsp_agent.port import Document, EditorPort
from lsp_agent.safety.sandbox import Sandbox
from lsp_agent.session.store import SessionStore, Transcript
from lsp_agent.tools.skills import SkillLocks, discover, prompt_section
from lsp_agent.tools.stats import EditStats
from lsp_agent.tools.textcalls import looks_like_tool_call, text_tool_call
from lsp_agent.tools.todo import Plan
from lsp_agent.tools.toolbox import (
    NEVER_LOCKED,
    TOOL_SCHEMAS,
    EditCounts,
    Toolbox,
    ToolResult,
    editor_view,
)
from lsp_agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from lsp_agent.changes.tracker import ChangeTracker

COMPLETED = "completed"
CANCELLED = "cancelled"
FAILED = "failed"
MAX_TURNS = "max_turns"

IMITATIONS_ALLOWED = 1
"""Replies that imitate a tool call in text (and are not one) the model is corrected for in a
turn; the next one ends the turn with the capability message."""


@dataclass(frozen=True)
class Selection:
    """What the user was looking at when they asked: a file and a range of lines."""

    path: Path
    start_line: int = 0
    """1-based, inclusive; 0 when the user pointed at the whole file."""
    end_line: int = 0
    text: str = ""


@dataclass(frozen=True)
class _Stored:
    """A stored session as read from disk, before it is rebuilt on the event loop."""

    transcript: Transcript
    history: list[dict[str, Any]]
    records: list[dict[str, Any]]
    instructions: Instructions
    state: ContextState
    warning: str | None


@dataclass
class TurnResult:
    """The answer to `lspAgent.ask`."""

    session: str
    status: str
    answer: str
    edits: EditCounts
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `lspAgent.ask` result shape of DESIGN §3."""
        result: dict[str, Any] = {
            "session": self.session,
            "status": self.status,
            "answer": self.answer,
            "edits": {
                "proposed": self.edits.proposed,
                "applied": self.edits.applied,
                "rejected": self.edits.rejected,
            },
        }
        if self.error is not None:
            result["error"] = self.error
        return result


@dataclass
class Session:
    """One conversation: its stored history, transcript, tools, and the turn running on it."""

    transcript: Transcript
    history: list[dict[str, Any]]
    """Every stored message, system prompt first; what is sent is derived from it."""
    toolbox: Toolbox
    changes: FileChangeSource
    """Files changed by someone else since the agent's last turn, for `<file_changes>`."""
    meter: TokenMeter
    """Tokens of the next request: last measured prompt plus an estimate of what came after."""
    context: ContextState = field(default_factory=ContextState)
    """Which stored messages are sent stubbed, dropped or replaced by a hand-off note."""
    turns: int = 0
    """Number of user prompts so far."""
    task: asyncio.Task[TurnResult] | None = None
    """The running turn, if any: one at a time per session."""
    instructions: Instructions = field(default_factory=lambda: Instructions((), ""))
    """The AGENTS.md files the system prompt was written with (their fingerprint, to tell
    when one changed)."""

    @property
    def id(self) -> str:
        return self.transcript.session_id

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    @property
    def plan(self) -> Plan:
        """The model's plan (the `todo` tool), shown in the reminder."""
        return self.toolbox.plan

    @property
    def context_tokens(self) -> int:
        """Estimated tokens of the next request."""
        return self.meter.context_tokens


class Agent:
    """Runs turns for the sessions of one workspace through one editor port."""

    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        port: EditorPort,
        store: SessionStore,
        provider_factory: Callable[[Settings], Provider],
        *,
        sandbox: Sandbox | None = None,
        auto_approve: Collection[str] = (),
        tracker: ChangeTracker | None = None,
    ) -> None:
        self.settings = settings
        """Settings in effect; replaced as a whole when the editor's change."""
        self.workspace = workspace
        self.port = port
        self.store = store
        self.sessions: dict[str, Session] = {}
        """Sessions loaded in this process, by id."""
        self._provider_factory = provider_factory
        self._provider: Provider | None = None
        self.sandbox = sandbox if sandbox is not None else Sandbox(workspace.root)
        """Where every session's commands run (the probe runs on first use)."""
        self.auto_approve = frozenset(auto_approve)
        """Tools whose permission questions are answered Allow (the CLI's --yes flags)."""
        self.tracker = tracker
        """The workspace's change tracker (the server's); None: `git status` between turns."""
        try:
            home: Path | None = Path.home()
        except RuntimeError:  # no home directory to speak of (HOME unset, unknown user)
            home = None
        self.home = home
        """The user's home: `~/.agents/` holds their AGENTS.md and skills."""

    @property
    def provider(self) -> Provider:
        """The model endpoint, made on first use from the current settings."""
        if self._provider is None:
            self._provider = self._provider_factory(self.settings)
        return self._provider

    async def update_settings(self, settings: Settings) -> None:
        """Take new settings; the provider is rebuilt when what it depends on changed."""
        old, self.settings = self.settings, settings
        keys = ("provider", "base_url", "model", "api_key")
        if self._provider is not None and any(
            getattr(old, k) != getattr(settings, k) for k in keys
        ):
            provider, self._provider = self._provider, None
            await provider.aclose()

    async def aclose(self) -> None:
        """Cancel running turns and close the provider."""
        for session in self.sessions.values():
            if session.task is not None and not session.task.done():
                session.task.cancel()
        tasks = [s.task for s in self.sessions.values() if s.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._provider is not None:
            await self._provider.aclose()

    def new_session(self) -> Session:
        """Start a conversation with a fresh transcript and a system prompt fixed for its life."""
        transcript = self.store.create()
        self._redact(transcript)
        instructions = read_instructions(self.workspace.root, self.home)
        toolbox = self._toolbox(transcript.session_id)
        listed = prompt_section(list(toolbox.skills.skills.values())) if toolbox.skills else ""
        system = {
            "role": "system",
            "content": system_prompt(self.workspace.root, instructions.prompt_section(), listed),
        }
        session = Session(transcript, [], toolbox, self._changes(transcript.session_id), _meter())
        session.instructions = instructions
        transcript.append(
            {
                "type": "event",
                "kind": "instructions",
                "fingerprint": instructions.fingerprint,
                "files": [str(item.path) for item in instructions.files],
            }
        )
        session.meter.rebase(request_bytes(session.history))
        toolbox.on_edit = lambda attempt: transcript.append(
            {**attempt.event(), "turn": session.turns}
        )
        self.sessions[session.id] = session
        self._store(session, system)
        return session

    def session(self, session_id: str | None) -> Session:
        """The named session (loaded from its transcript if needed), else the most recent one."""
        if session_id is None:
            if self.sessions:
                return max(self.sessions.values(), key=lambda s: s.id)
            latest = self.store.latest()
            if latest is None:
                return self.new_session()
            session_id = latest.session_id
        if session_id in self.sessions:
            return self.sessions[session_id]
        return self._resume(self._read_stored(session_id))

    async def load(self, session_id: str | None) -> None:
        """Bring a stored session into memory with its transcript read and parsed off the event
        loop (a long session's transcript is megabytes of JSON), so that `start` finds it. Makes
        no session: without one stored, `start` creates it."""
        if session_id is None:
            if self.sessions:
                return
            latest = await asyncio.to_thread(self.store.latest)
            if latest is None:
                return
            session_id = latest.session_id
        if session_id in self.sessions:
            return
        stored = await asyncio.to_thread(self._read_stored, session_id)
        if session_id not in self.sessions:  # another request may have loaded it meanwhile
            self._resume(stored)

    def _read_stored(self, session_id: str) -> _Stored:
        """What resuming a session needs from disk; touches no state of the loop's."""
        try:
            transcript = self.store.open(session_id)
        except (KeyError, ValueError) as error:
            raise UserError(
                f"no session {session_id!r} in this workspace: "
                "lspAgent.sessions lists them; omit `session` to continue the latest"
            ) from error
        self._redact(transcript)
        history = transcript.messages()
        records = transcript.records()
        instructions = _instructions_of(records, self.workspace.root, self.home)
        if not history or history[0].get("role") != "system":
            instructions = read_instructions(self.workspace.root, self.home)
            history.insert(
                0,
                {
                    "role": "system",
                    "content": system_prompt(self.workspace.root, instructions.prompt_section()),
                },
            )
        state, warning = restore_state(records, history)
        return _Stored(transcript, history, records, instructions, state, warning)

    def _resume(self, stored: _Stored) -> Session:
        """A session rebuilt from what `_read_stored` read, registered with the agent."""
        transcript, history = stored.transcript, stored.history
        session_id = transcript.session_id
        if stored.warning is not None:
            self.port.log(f"session {session_id}: {stored.warning}")
        toolbox = self._toolbox(session_id)
        toolbox.plan = Plan.from_history(history)
        if toolbox.skills is not None:
            toolbox.skills.relock_from(history)  # skills loaded before stay loaded
        meter = _meter()
        meter.rebase(request_bytes(build_request(history, stored.state)))
        session = Session(
            transcript,
            history,
            toolbox,
            self._changes(session_id),
            meter,
            stored.state,
            turns=transcript.turns,
        )
        session.instructions = stored.instructions
        toolbox.edit_stats = EditStats.from_events(stored.records)
        toolbox.on_edit = lambda attempt: transcript.append(
            {**attempt.event(), "turn": session.turns}
        )
        self.sessions[session.id] = session
        return session

    def start(
        self,
        prompt: str,
        session_id: str | None = None,
        selection: Selection | None = None,
        mode: str | None = None,
    ) -> Session:
        """Start a turn on a session; raises `UserError` when it cannot start."""
        require_model(self.settings)
        session = self.session(session_id)
        if session.running:
            raise UserError(
                f"session {session.id} is already running a turn: wait for it to end, "
                "or cancel it with lspAgent.cancel"
            )
        review = (mode or self.settings.mode) == "review"
        session.toolbox.needs_confirmation = lambda: review
        session.task = asyncio.create_task(self._turn(session, prompt, selection))
        return session

    async def wait(self, session: Session) -> TurnResult:
        """The result of the session's turn. If the waiter is cancelled, so is the turn."""
        task = session.task
        assert task is not None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            return await task

    async def ask(
        self,
        prompt: str,
        session_id: str | None = None,
        selection: Selection | None = None,
        mode: str | None = None,
    ) -> TurnResult:
        """Run one turn and return how it ended."""
        return await self.wait(self.start(prompt, session_id, selection, mode))

    async def workspace_document(self, path: Path) -> Document:
        """A file as the editor shows it: the open buffer, else the disk."""
        return await editor_view(self.port, self.workspace, path)

    def cancel(self, session_id: str) -> bool:
        """Cancel the session's running turn; False when nothing was running."""
        session = self.sessions.get(session_id)
        if session is None or session.task is None or session.task.done():
            return False
        session.task.cancel()
        return True

    def status(self) -> list[dict[str, Any]]:
        """Per-session figures for `lspAgent.status`."""
        return [
            {
                "session": s.id,
                "running": s.running,
                **s.meter.status(),
                "turns": s.turns,
            }
            for s in self.sessions.values()
        ]

    async def _turn(self, session: Session, prompt: str, selection: Selection | None) -> TurnResult:
        session.turns += 1
        turn = session.turns
        counts = EditCounts()
        session.toolbox.counts = counts
        streamed: list[str] = []
        pending: list[ToolCall] = []

        def emit(kind: str, **fields: Any) -> None:
            self.port.emit({"session": session.id, "turn": turn, "kind": kind, **fields})

        async def finish(status: str, answer: str, error: str | None = None) -> TurnResult:
            # The snapshot comes before the status event: editors take that event as the end.
            await self._snapshot(session)
            session.transcript.append(
                {"type": "turn", "turn": turn, "status": status, "error": error}
            )
            emit("status", status=status, **({"error": error} if error else {}))
            return TurnResult(session.id, status, answer, counts, error)

        def compacting(_: str) -> None:
            # Only `$/progress` shows a compaction starting; its figures come when it is done.
            emit("compaction", strategy="compact", phase="started")

        async def decide(point: Callable[..., Any]) -> None:
            session.context, events = await point(
                session.history,
                session.context,
                self.settings,
                self.provider,
                session.meter,
                progress=compacting,
            )
            self._record(session, events, emit)

        answer = ""
        imitations = 0
        try:
            self._store(session, {"role": "user", "content": _user_text(prompt, selection, self)})
            for _ in range(self.settings.max_turns):
                streamed.clear()
                await decide(before_call)
                view = build_request(session.history, session.context)
                if session.toolbox.skills is not None:
                    # A skill whose load_skill call a layer dropped or compacted locks again.
                    session.toolbox.skills.relock_from(view)
                note = await asyncio.to_thread(
                    changed_note, session.instructions, self.workspace.root, self.home
                )
                reminder = await reminder_message(
                    self.workspace.root,
                    todos=session.plan.items,
                    file_changes=await session.changes.changes(),
                    notes=[note] if note else [],
                )

                def on_text(chunk: str) -> None:
                    streamed.append(chunk)
                    emit("text", text=chunk)

                schemas = session.toolbox.schemas()
                reply = await self.provider.complete([*view, reminder], schemas, on_text)
                self._measure(session, reply.usage)
                if not reply.tool_calls and reply.text:
                    reply = self._text_call(session, reply, schemas)
                pending = list(reply.tool_calls)
                self._store(session, reply.message())
                if reply.text:
                    answer = reply.text
                if not reply.tool_calls and _imitates_a_call(reply.text, schemas):
                    imitations += 1
                    if imitations > IMITATIONS_ALLOWED:
                        await decide(end_of_turn)
                        return await finish(FAILED, answer, self._cannot_call_tools(imitations))
                    self._store(session, {"role": "user", "content": IMITATION_CORRECTION})
                    continue
                if not reply.tool_calls:
                    await decide(end_of_turn)
                    return await finish(COMPLETED, answer)
                while pending:
                    call = pending[0]
                    emit("tool", name=call.name, args=_display_args(call.arguments))
                    result = await self._run_tool(session, call)
                    if result.permission is not None:
                        emit("permission", **result.permission)
                    emit("toolResult", name=call.name, ok=result.ok, summary=result.summary)
                    for path, applied in result.edits:
                        emit("edit", uri=path.as_uri(), applied=applied)
                    self._store(session, _tool_message(call, result.text))
                    pending.pop(0)
            await decide(end_of_turn)
            note = (
                f"stopped after {self.settings.max_turns} model calls (maxTurns); "
                "ask again to continue"
            )
            return await finish(MAX_TURNS, answer or note, note)
        except asyncio.CancelledError:
            self._close_pending(session, pending, "cancelled by the user before this tool finished")
            session.transcript.append(
                {"type": "event", "kind": "cancelled", "turn": turn, "partial": "".join(streamed)}
            )
            return await finish(CANCELLED, "".join(streamed) or answer)
        except ProviderError as error:
            self._close_pending(session, pending, "not run: the model endpoint failed")
            return await finish(FAILED, answer, error.message)
        except Exception as error:  # a bug of ours: the user gets a sentence, the log the trace
            self.port.log("".join(traceback.format_exception(error)))
            self._close_pending(session, pending, "not run: lsp-agent hit an internal error")
            return await finish(
                FAILED, answer, f"internal error in lsp-agent: {error!r}; see the log"
            )
        finally:
            session.toolbox.end_turn()

    async def _run_tool(self, session: Session, call: ToolCall) -> ToolResult:
        """Run a tool; a crash of ours becomes a result the model can work around."""
        try:
            return await session.toolbox.run(call.name, call.arguments)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.port.log("".join(traceback.format_exception(error)))
            text = (
                f"error: the {call.name} tool crashed ({type(error).__name__}: {error}). "
                "This is a bug in lsp-agent, not in your call; try another way."
            )
            return ToolResult(text=text, ok=False, summary=text[:200], reason="crash")

    def _close_pending(self, session: Session, pending: list[ToolCall], why: str) -> None:
        """Answer tool calls that will never run, so the stored history stays valid."""
        for call in pending:
            self._store(session, _tool_message(call, f"error: {why}"))
        pending.clear()

    def _store(self, session: Session, message: dict[str, Any]) -> None:
        session.history.append(message)
        session.meter.added(message)
        session.transcript.append({"type": "message", "turn": session.turns, "message": message})

    def _record(
        self, session: Session, events: list[ContextEvent], emit: Callable[..., None]
    ) -> None:
        """Keep each context decision in the transcript (resume rebuilds the state from the
        last one) and show it to the editor."""
        for event in events:
            session.transcript.append(event.record())
            emit("compaction", **event.notification())

    async def _snapshot(self, session: Session) -> None:
        """Remember the tree as the turn leaves it, for the next turn's `<file_changes>`."""
        try:
            await session.changes.snapshot()
        except Exception as error:  # a missing git must not turn a finished turn into a crash
            self.port.log(f"file-change snapshot failed: {error!r}")

    def _measure(self, session: Session, usage: Usage) -> None:
        session.meter.measured(usage)
        session.transcript.append(
            {
                "type": "event",
                "kind": "usage",
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cached_tokens": usage.cached_tokens,
                "estimated": usage.estimated,
            }
        )

    def _toolbox(self, session_id: str) -> Toolbox:
        """A session's toolbox, with the skills found now (once per session)."""
        review = self.settings.mode == "review"
        found = discover(self.workspace.root, self.home, self.port.log)
        return Toolbox(
            self.workspace,
            self.port,
            lambda: review,
            settings=lambda: self.settings,
            sandbox=self.sandbox,
            auto_approve=self.auto_approve,
            skills=SkillLocks(found, never_locked=NEVER_LOCKED) if found else None,
            tracker=self.tracker,
            tracker_key=session_id,
        )

    def _text_call(self, session: Session, reply: Reply, schemas: list[dict[str, Any]]) -> Reply:
        """A reply that is exactly one tool call written as text (small local models do that)
        becomes that call; the transcript keeps the text it came from."""
        call_id = f"text_call_{session.id[-8:]}_{len(session.history)}"
        call = text_tool_call(reply.text, schemas, call_id=call_id)
        if call is None:
            return reply
        session.transcript.append(
            {
                "type": "event",
                "kind": "text_tool_call",
                "turn": session.turns,
                "name": call.name,
                "text": reply.text,
            }
        )
        return replace(reply, text="", tool_calls=(call,))

    def _cannot_call_tools(self, imitations: int) -> str:
        model = self.settings.model or "the model"
        return (
            f"{model} cannot call tools: it wrote {imitations} tool calls as text that could "
            f"not be run. Use a model with tool calling, e.g. {TOOL_MODELS} on Ollama, or start "
            "llama.cpp's llama-server with --jinja, and set lspAgent.model."
        )

    def _changes(self, session_id: str) -> FileChangeSource:
        if self.tracker is not None:
            from lsp_agent.changes.tracker import SessionChanges

            return SessionChanges(self.tracker, session_id)
        return GitStatusChanges(self.workspace.root)

    def _redact(self, transcript: Transcript) -> None:
        if self.settings.api_key:
            transcript.redact(self.settings.api_key)


IMITATION_CORRECTION = (
    "[lsp-agent] Your last reply looks like a tool call written as text, and it could not be "
    "run (unknown tool, wrong arguments, or more than one call). Call tools through the tool "
    "calling interface with arguments that match their schema; do not write calls as text."
)
"""What the model is told after a broken imitation of a tool call."""


def _imitates_a_call(text: str, schemas: list[dict[str, Any]]) -> bool:
    names = [schema["function"]["name"] for schema in schemas]
    return bool(text) and looks_like_tool_call(text, names)


def _instructions_of(records: list[dict[str, Any]], root: Path, home: Path | None) -> Instructions:
    """The AGENTS.md fingerprint a stored session started with (now's, for older transcripts
    that did not record it: nothing is then reported as changed)."""
    for record in reversed(records):
        if record.get("type") == "event" and record.get("kind") == "instructions":
            value = record.get("fingerprint")
            if isinstance(value, str):
                return Instructions((), value)
    return Instructions((), fingerprint(root, home))


def _meter() -> TokenMeter:
    """A session's meter: before the first measurement, the tool schemas count as overhead."""
    return TokenMeter(overhead_tokens=estimate_tokens(json.dumps(TOOL_SCHEMAS)))


def _user_text(prompt: str, selection: Selection | None, agent: Agent) -> str:
    if selection is None:
        return prompt
    rel = agent.workspace.relative(selection.path)
    if selection.start_line == 0:
        return f"{prompt}\n\nThe user is looking at {rel}."
    lines = (
        f"line {selection.start_line}"
        if selection.start_line == selection.end_line
        else f"lines {selection.start_line}-{selection.end_line}"
    )
    return f"{prompt}\n\nThe user is looking at {rel}, {lines}:\n```\n{selection.text}\n```"


def _tool_message(call: ToolCall, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": text}


def _display_args(arguments: str) -> Any:
    """The call's arguments for the editor's event stream: parsed when possible, shortened."""
    try:
        value: Any = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments[:500]
    if isinstance(value, dict):
        return {
            k: (v[:500] + "…" if isinstance(v, str) and len(v) > 500 else v)
            for k, v in value.items()
        }
    return value
