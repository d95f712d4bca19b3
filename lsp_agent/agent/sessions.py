"""The sessions of one workspace: made, resumed from their transcripts, run, cancelled.

`Agent` owns the sessions of one workspace and starts their turns (`agent/turn.py`). A turn runs
as its own asyncio task, so that a cancel (from any of the editor's three paths) closes the model
stream or the running tool at once, and the turn still ends with a result and a transcript that
says what happened. `build_agent` assembles an agent the same way for every adapter.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_agent.agent.codebase import asked as asked_codebase
from lsp_agent.agent.conversation import Selection, Session, TurnResult, cost, used
from lsp_agent.agent.endpoint import KeyCheckedProvider, KeyGate
from lsp_agent.agent.history import conversation
from lsp_agent.agent.instructions import Instructions, fingerprint, read_instructions
from lsp_agent.agent.prompt import system_prompt
from lsp_agent.agent.rewind import KIND as REWIND
from lsp_agent.agent.rewind import (
    compacted_away,
    in_effect,
    message_turns,
    prompt_of,
    rewound_turns,
)
from lsp_agent.agent.turn import Turn
from lsp_agent.agent.undo import plan_undo, undoable_turns
from lsp_agent.config import Settings, require_model
from lsp_agent.context.reminder import FileChangeSource
from lsp_agent.context.tokens import TokenMeter, request_bytes
from lsp_agent.context.view import ContextState, build_request, restore_state
from lsp_agent.errors import UserError
from lsp_agent.mcp.hub import McpHub
from lsp_agent.messages import Usage, estimate_tokens, frozen
from lsp_agent.model import Provider, make_provider
from lsp_agent.port import Document, EditorPort, FileChange
from lsp_agent.safety.endpoints import FILE_NAME as ENDPOINTS_FILE
from lsp_agent.safety.endpoints import Approvals
from lsp_agent.safety.sandbox import Sandbox
from lsp_agent.session.store import SessionStore
from lsp_agent.session.transcript import Transcript
from lsp_agent.tools.belt import NEVER_LOCKED, TOOL_SCHEMAS, Toolbox, editor_view
from lsp_agent.tools.propose import Planned
from lsp_agent.tools.results import EditCounts
from lsp_agent.tools.skills import SkillLocks, discover, prompt_section
from lsp_agent.tools.stats import EditStats
from lsp_agent.tools.todo import Plan
from lsp_agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from lsp_agent.changes.tracker import ChangeTracker


@dataclass(frozen=True)
class _Stored:
    """A stored session as read from disk, before it is rebuilt on the event loop."""

    transcript: Transcript
    history: list[dict[str, Any]]
    records: list[dict[str, Any]]
    instructions: Instructions
    state: ContextState
    warning: str | None


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
        self.key_gate = KeyGate(Approvals(store.state_root / ENDPOINTS_FILE), port)
        """Where the API key may go: asked once per endpoint it was not set for."""
        self.sandbox = sandbox if sandbox is not None else Sandbox(workspace.root)
        """Where every session's commands run (the probe runs on first use)."""
        self.auto_approve = frozenset(auto_approve)
        """Tools whose permission questions are answered Allow (the CLI's --yes flags)."""
        self._own_tracker = tracker is None
        """Whether the tracker is this agent's to stop."""
        if tracker is None:
            from lsp_agent.changes.tracker import ChangeTracker

            # Nobody watches for this agent (the terminal's one-turn run, tests): a tracker
            # without watcher compares once a turn, started on first use.
            tracker = ChangeTracker(workspace.root, observer="none", log_line=port.log)
        self.tracker: ChangeTracker = tracker
        """The workspace's change tracker (the server's, or one of its own without watcher)."""
        try:
            home: Path | None = Path.home()
        except RuntimeError:  # no home directory to speak of (HOME unset, unknown user)
            home = None
        self.home = home
        """The user's home: `~/.agents/` holds their AGENTS.md, skills and MCP servers."""
        self.mcp = McpHub(
            workspace.root,
            lambda: self.settings,
            home=home,
            state=store.directory,
            log=port.log,
            warn=port.warn,
        )
        """The workspace's MCP servers, started for the sessions that need them."""

    @property
    def provider(self) -> Provider:
        """The model endpoint, made on first use from the current settings."""
        if self._provider is None:
            made = self._provider_factory(self.settings)
            self._provider = KeyCheckedProvider(made, self.key_gate, self.settings)
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
        await self.mcp.aclose()
        if self._own_tracker:
            await self.tracker.stop()

    def new_session(self) -> Session:
        """Start a conversation with a fresh transcript and a system prompt fixed for its life."""
        transcript = self.store.create()
        self._redact(transcript)
        instructions = read_instructions(self.workspace.root, self.home)
        for refusal in instructions.refusals:
            self.port.warn(refusal)
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
        session.append(system)
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
        return self._stored(transcript)

    def _stored(self, transcript: Transcript) -> _Stored:
        """A transcript read back: the history and the state the session continues from."""
        # Its rewinds leave out the turns they went back over (`agent/rewind.py`).
        records = in_effect(transcript.records())
        history: list[dict[str, Any]] = list(map(frozen, transcript.messages(records)))
        instructions = _instructions_of(records, self.workspace.root, self.home)
        if not history or history[0].get("role") != "system":
            instructions = read_instructions(self.workspace.root, self.home)
            prompt = system_prompt(self.workspace.root, instructions.prompt_section())
            history.insert(0, frozen({"role": "system", "content": prompt}))
        state, warning = restore_state(records, history)
        return _Stored(transcript, history, records, instructions, state, warning)

    def _resume(self, stored: _Stored, previous: Session | None = None) -> Session:
        """A session rebuilt from what `_read_stored` read, registered with the agent.
        `previous`: the same session rebuilt in this process (a rewind): what the transcript
        does not hold carries over — its `<file_changes>` snapshot, the notes the model has not
        heard yet, the tool list fixed at its first turn."""
        transcript, history = stored.transcript, stored.history
        session_id = transcript.session_id
        if stored.warning is not None:
            self.port.log(f"session {session_id}: {stored.warning}")
        toolbox = self._toolbox(session_id)
        if previous is not None:
            toolbox.mcp = previous.toolbox.mcp
        toolbox.plan = Plan.from_history(history)
        if toolbox.skills is not None:
            toolbox.skills.relock_from(history)  # skills loaded before stay loaded
        meter = _meter()
        meter.rebase(request_bytes(build_request(history, stored.state)))
        session = Session(
            transcript,
            history,
            toolbox,
            previous.changes if previous is not None else self._changes(session_id),
            meter,
            stored.state,
            turns=transcript.turns,
            rewound=len(rewound_turns(stored.records)),
            usage=used(stored.records),
        )
        session.instructions = stored.instructions
        if previous is not None:
            session.notes = previous.notes
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
        codebase: bool = False,
    ) -> Session:
        """Start a turn on a session; raises `UserError` when it cannot start. `codebase`, or
        `#codebase` in the prompt: the prompt's terms are searched in the workspace first."""
        require_model(self.settings)
        session = self.session(session_id)
        if session.running:
            raise UserError(
                f"session {session.id} is already running a turn: wait for it to end, "
                "or cancel it with lspAgent.cancel"
            )
        # `ask`: an answer without changes; edits (none are offered) would be reviewed.
        review = (mode or self.settings.mode) in ("review", "ask")
        searched = codebase or asked_codebase(prompt)
        turn = Turn(
            self, session, prompt, selection, review=review, ask=mode == "ask", codebase=searched
        )
        session.task = asyncio.create_task(turn.run())
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
        codebase: bool = False,
    ) -> TurnResult:
        """Run one turn and return how it ended."""
        return await self.wait(self.start(prompt, session_id, selection, mode, codebase))

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
        listed = []
        for s in self.sessions.values():
            usage: dict[str, float] = {
                "inputTokens": s.usage.prompt_tokens,
                "cachedInputTokens": s.usage.cached_tokens or 0,
                "outputTokens": s.usage.completion_tokens,
            }
            spent = cost(s.usage, self.settings.prices)
            if spent is not None:
                usage["cost"] = spent
            listed.append(
                {
                    "session": s.id,
                    "running": s.running,
                    **s.meter.status(),
                    "contextWindow": self.settings.context_window,
                    "usage": usage,
                    "turns": s.turns,
                }
            )
        return listed

    async def history(self, session_id: str) -> list[dict[str, Any]]:
        """The session's conversation as displayable items, read from its transcript."""
        transcript = (await self._loaded(session_id)).transcript
        items = conversation(await asyncio.to_thread(transcript.records))
        for item in items:
            if item["type"] == "usage":
                used = Usage(
                    item["inputTokens"], item["outputTokens"], item["cachedTokens"], estimated=False
                )
                spent = cost(used, self.settings.prices)
                if spent is not None:
                    item["cost"] = spent
        return items

    async def undo_turn(
        self,
        session_id: str,
        turn: int | None = None,
        mode: str | None = None,
        rewind: bool = False,
        conversation: bool = False,
    ) -> dict[str, Any]:
        """Propose one edit that restores what a turn's accepted edits changed (the session's
        last such turn by default), merged onto what changed since; the model hears of it.
        `rewind`: the turn and every later one, so the files are as before its prompt.
        `conversation` (with `turn`): the files as `rewind`, and the conversation continues from
        before the turn's prompt — once the files were restored, or when there was nothing to
        restore (a rejected review leaves the conversation as it was)."""
        session = await self._loaded(session_id)
        if session.running:
            raise UserError(
                f"session {session.id} is running a turn: wait for it to end, or cancel it"
            )
        records = await asyncio.to_thread(session.transcript.records)
        turns = undoable_turns(records)
        if conversation:
            assert turn is not None
            _check_rewindable(session, records, turn)
            chosen = [t for t in turns if t >= turn]
            if not chosen:  # no edits to restore: only the conversation goes back
                answer = {"turn": turn, "files": [], "turns": [], "proposed": False}
                answer |= {"applied": False, "refused": []}
                return await self._rewind(session, records, turn, answer)
            answer = await self._restore_files(
                session, records, turn, chosen, mode, True, conversation=True
            )
            if answer["proposed"] and not answer["applied"]:
                reason = "the files' review was rejected: the conversation stays as it was"
                return {**answer, "conversation": False, "reason": reason}
            if session.running:  # the user started a turn while the files were reviewed
                reason = "a turn started during the files' review: the conversation stays as it was"
                return {**answer, "conversation": False, "reason": reason}
            return await self._rewind(session, records, turn, answer)
        if turn is None and not turns:
            raise UserError(f"nothing to undo: no turn of session {session.id} has accepted edits")
        if turn is None:
            turn = turns[-1]
        chosen = [t for t in turns if t >= turn] if rewind else [turn] if turn in turns else []
        if not chosen:
            listed = ", ".join(map(str, turns)) or "none"
            since = " or after it" if rewind else ""
            raise UserError(
                f"turn {turn}{since} has no accepted edits to undo (turns with edits: {listed})"
            )
        return await self._restore_files(session, records, turn, chosen, mode, rewind)

    async def _restore_files(
        self,
        session: Session,
        records: list[dict[str, Any]],
        turn: int,
        chosen: list[int],
        mode: str | None,
        rewind: bool,
        *,
        conversation: bool = False,
    ) -> dict[str, Any]:
        """Propose the edit restoring the files of the `chosen` turns; the undo's result.
        `conversation`: the conversation goes back too, so the model's note names no turn."""
        proposer = session.toolbox.edits.proposer
        current: dict[str, Document | None] = {}
        for record in records:
            if record.get("kind") == "applied" and record.get("turn") in chosen:
                rel = str(record.get("path"))
                if rel not in current:
                    path = self.workspace.resolve(rel, for_write=True)
                    current[rel] = await proposer.current(path)
        plan = plan_undo(records, chosen, lambda rel: _text(current.get(rel)))
        refused = [{"path": r.path, "why": r.why} for r in plan.refused]
        answer: dict[str, Any] = {"turn": turn, "files": [f.path for f in plan.files]}
        if rewind:
            answer["turns"] = chosen
        if not plan.files:
            return {**answer, "proposed": False, "applied": False, "refused": refused}
        planned = []
        for undo in plan.files:
            document = current.get(undo.path)
            change = FileChange(
                self.workspace.resolve(undo.path, for_write=True),
                undo.current,
                undo.restored,
                document.version if document is not None else None,
                document.bom if document is not None else False,
            )
            planned.append(Planned(undo.path, change))
        names = ", ".join(answer["files"])
        what = f"turns {', '.join(map(str, chosen))}" if len(chosen) > 1 else f"turn {turn}"
        result = await proposer.propose(
            planned,
            description=f"undo {what}",
            done=f"undone: {what} ({names})",
            summary=f"undid {what}",
            review=(mode or self.settings.mode) == "review",
            counts=EditCounts(),
        )
        if result.ok:
            for item in planned:
                session.toolbox.reads.forget(item.change.path, f"the user undid turn {turn}")
            session.transcript.append(
                {
                    "type": "event",
                    "kind": "undo",
                    "turn": session.turns,
                    "undid": turn,
                    "files": answer["files"],
                    **({"turns": chosen} if rewind else {}),
                }
            )
            before = (
                f"before turn {turn} (the user rewound the files to before that prompt, undoing "
                f"{what})"
                if rewind
                else "before it"
            )
            session.notes.append(
                # The model will not have heard of the turns a conversation rewind goes back over.
                f"The user went back to an earlier point of this conversation and restored the "
                f"files to it: {names} are as they were then, with the user's later changes "
                "kept. Read them again before editing them."
                if conversation
                else f"The user undid {what}: {names} are back to what they were {before}, with "
                "the user's later changes kept. Read them again before editing them."
            )
        return {**answer, "proposed": True, "applied": result.ok, "refused": refused}

    async def _rewind(
        self,
        session: Session,
        records: list[dict[str, Any]],
        turn: int,
        answer: dict[str, Any],
    ) -> dict[str, Any]:
        """Continue the session's conversation from before `turn`'s prompt: record the rewind,
        then rebuild the session from its transcript as a restart would (`_stored`)."""
        rewound = sorted(
            t for t in range(turn, session.turns + 1) if t not in rewound_turns(records)
        )
        prompt = prompt_of(records, turn) or ""
        if answer["refused"]:
            listed = ", ".join(item["path"] for item in answer["refused"])
            session.notes.append(
                "The user went back to an earlier point of this conversation; these files still "
                f"hold changes made after it (the user changed them since): {listed}. Read them "
                "again before editing them."
            )
        session.transcript.append(
            {
                "type": "event",
                "kind": REWIND,
                "turn": session.turns,
                "to": turn,
                "turns": rewound,
                "prompt": prompt,
            }
        )
        stored = await asyncio.to_thread(self._stored, session.transcript)
        self._resume(stored, previous=session)
        return {**answer, "conversation": True, "rewound": rewound, "prompt": prompt}

    async def _loaded(self, session_id: str) -> Session:
        await self.load(session_id)
        return self.session(session_id)

    def _toolbox(self, session_id: str) -> Toolbox:
        """A session's toolbox, with the skills found now (once per session)."""
        found = discover(self.workspace.root, self.home, self.port.log)
        return Toolbox(
            self.workspace,
            self.port,
            settings=lambda: self.settings,
            sandbox=self.sandbox,
            auto_approve=self.auto_approve,
            skills=SkillLocks(found, never_locked=NEVER_LOCKED) if found else None,
            tracker=self.tracker,
            tracker_key=session_id,
            mcp=self.mcp,
        )

    def _changes(self, session_id: str) -> FileChangeSource:
        from lsp_agent.changes.session import SessionChanges

        return SessionChanges(self.tracker, session_id)

    def _redact(self, transcript: Transcript) -> None:
        if self.settings.api_key:
            transcript.redact(self.settings.api_key)


def _check_rewindable(session: Session, records: list[dict[str, Any]], turn: int) -> None:
    """Refuse, with a sentence, a rewind of the conversation to before `turn` it cannot do."""
    if turn > session.turns:
        raise UserError(
            f"session {session.id} has {session.turns} turn(s): there is no turn {turn} to "
            "rewind to"
        )
    if turn in rewound_turns(records):
        raise UserError(f"turn {turn} was already rewound: the conversation no longer holds it")
    why = compacted_away(message_turns(in_effect(records)), session.context, turn)
    if why is not None:
        raise UserError(why)


def _text(document: Document | None) -> str | None:
    return document.text if document is not None else None


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


def build_agent(
    settings: Settings,
    root: Path,
    port: EditorPort,
    *,
    tracker: ChangeTracker | None = None,
    auto_approve: Collection[str] = (),
    state_dir: Path | None = None,
) -> Agent:
    """The agent of the workspace at `root`, as every adapter assembles it."""
    return Agent(
        settings,
        Workspace(root, read_only=settings.read_only_paths),
        port,
        SessionStore(root, base_dir=state_dir),
        provider_for,
        auto_approve=auto_approve,
        tracker=tracker,
    )


def warm_up() -> None:
    """What the first request to the model would otherwise wait for, done ahead of it: the
    server calls this in a thread once it has started."""
    from lsp_agent.model import client

    importlib.import_module("lsp_agent.model.openai")
    importlib.import_module("lsp_agent.model.anthropic")
    client.warm_up()


def provider_for(settings: Settings) -> Provider:
    """The model endpoint the settings name."""
    return make_provider(
        settings.provider, settings.base_url, settings.model or "", settings.api_key
    )
