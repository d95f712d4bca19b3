"""One turn: the user's message, then model call → tool calls → results → … → the answer.

`Turn.run()` repeats `step()` — call the model, run the tools it asked for — until the model
answers without calling a tool. Every way out of the loop is an exception caught in one place
(`run`): `TurnEnded` carries a status (`completed`, `failed`, `max_turns`), a cancel arrives as
`CancelledError`, a broken endpoint as `ProviderError`, a bug of ours as anything else. Each ends
the same way: the transcript says how the turn ended, the editor gets a `status` event, the `ask`
gets a `TurnResult`. What belongs to the turn (its number, its edit counts, review or auto, the
text streamed so far, the tool calls not yet answered) lives here and is handed to the tools.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from lsp_agent.agent import codebase
from lsp_agent.agent.conversation import Selection, Session, TurnResult, added, cost
from lsp_agent.agent.history import RESULT_CHARS
from lsp_agent.agent.instructions import ChangeWatch
from lsp_agent.config import Settings
from lsp_agent.context.layers import ContextEvent, before_call, end_of_turn
from lsp_agent.context.reminder import reminder_message
from lsp_agent.context.view import build_request
from lsp_agent.errors import ToolError
from lsp_agent.messages import Reply, ToolCall, Usage, estimate_tokens
from lsp_agent.model import TOOL_MODELS, Provider, ProviderError
from lsp_agent.port import EditorPort
from lsp_agent.tools.belt import TurnState
from lsp_agent.tools.results import EditCounts, Landed, ToolResult
from lsp_agent.tools.textcalls import looks_like_tool_call, text_tool_call
from lsp_agent.tools.todo import render_plan
from lsp_agent.tools.workspace import Workspace


class TurnHost(Protocol):
    """What a turn uses of the agent that runs it (`sessions.Agent`); read at each step, since
    the editor's settings may change meanwhile."""

    settings: Settings
    port: EditorPort
    workspace: Workspace
    home: Path | None

    @property
    def provider(self) -> Provider: ...


COMPLETED = "completed"
CANCELLED = "cancelled"
FAILED = "failed"
MAX_TURNS = "max_turns"

BIG_MESSAGE_CHARS = 256_000
"""A reply longer than this is stored off the event loop."""

STREAMED_CHARS = 200_000
"""The most text of one reply sent to the editor as `text` events; a runaway reply of megabytes
would otherwise fill the editor's pipe (and hold the server's writes) for all of them. The
transcript, `lspAgent.history` and the ask result's note keep the rest."""

MALFORMED_REASONS = frozenset({"bad_call", "bad_arguments"})
"""The `ToolError` reasons of a call the model got wrong in form, not in substance."""

MALFORMED_REPLIES_ALLOWED = 3
"""Replies in a row made only of malformed tool calls that the model is told about and may
correct; the next one ends the turn with a sentence for the user."""

ASK_MODE_NOTE = (
    "The user asked this in ask mode: answer it, reading and searching as you need, without "
    "editing files or running commands (those tools are not offered in this turn)."
)
"""Told at each model call of a turn in mode `ask`."""

IMITATIONS_ALLOWED = 1
"""Replies that imitate a tool call in text (and are not one) the model is corrected for in a
turn; the next one ends the turn with the capability message."""

IMITATION_CORRECTION = (
    "[lsp-agent] Your last reply looks like a tool call written as text, and it could not be "
    "run (unknown tool, wrong arguments, or more than one call). Call tools through the tool "
    "calling interface with arguments that match their schema; do not write calls as text."
)
"""What the model is told after a broken imitation of a tool call."""


class TurnEnded(Exception):
    """Leaving the loop: how the turn ended and, when it did not complete, why."""

    def __init__(self, status: str, error: str | None = None, answer: str | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.error = error
        self.answer = answer
        """The answer to give instead of the model's last text (max_turns says why it stopped)."""


class Turn:
    """One `ask` on one session."""

    def __init__(
        self,
        agent: TurnHost,
        session: Session,
        prompt: str,
        selection: Selection | None,
        *,
        review: bool,
        ask: bool = False,
        codebase: bool = False,
    ) -> None:
        self.agent = agent
        self.session = session
        self.prompt = prompt
        self.selection = selection
        self.codebase = codebase
        """The user added `#codebase`: the workspace is searched for the prompt's terms first."""
        session.turns += 1
        self.number = session.turns
        """1-based, counted over the session's life."""
        self.tools = TurnState(review, EditCounts(), self.emit, read_only=ask)
        """What the tools get from this turn: review or auto (or ask: no changes), the edit
        counts, the events."""
        self.answer = ""
        """The model's last text: the answer when the turn ends."""
        self.streamed: list[str] = []
        """Text chunks of the reply being streamed (what a cancel keeps)."""
        self.pending: list[ToolCall] = []
        """Tool calls of the last reply not yet answered in the history."""
        self.imitations = 0
        """Replies so far that imitated a tool call in text."""
        self.malformed = 0
        """Replies in a row whose every tool call was malformed (no name, an unknown tool,
        arguments that are not a JSON object of the tool's shape)."""
        self._asked: dict[str, str] = {}
        """The text of each open question, by id."""
        self._instructions = ChangeWatch(session.instructions, agent.workspace.root, agent.home)
        """Whether an AGENTS.md changed since the session started (told in the reminder)."""

    def emit(self, kind: str, **fields: Any) -> None:
        """One step of the turn, for the editor (`lspAgent/event`)."""
        event = {"session": self.session.id, "turn": self.number, "kind": kind, **fields}
        self.agent.port.emit(event)
        if kind == "question":
            self._record_question(fields)

    def _record_question(self, fields: dict[str, Any]) -> None:
        """Questions go to the transcript when they close, with the text that was asked."""
        if fields.get("state") == "open":
            self._asked[str(fields.get("id"))] = str(fields.get("text", ""))
            return
        text = self._asked.pop(str(fields.get("id")), "")
        self.session.transcript.append(
            {"type": "event", "kind": "question", "turn": self.number, **fields, "text": text}
        )

    async def run(self) -> TurnResult:
        """Run the turn to its end; never raises (a cancel, too, ends with a result)."""
        session = self.session
        status, error = COMPLETED, None
        try:
            self._announce()
            text = self._user_text()
            if self.codebase:
                text += "\n\n" + await self._search_codebase()
            message = {"role": "user", "content": text}
            self._check_fits(message)
            session.append(message)
            # The session's first turn starts its MCP servers and fixes its tool list.
            session.notes.extend(await session.toolbox.prepare(self.emit))
            for _ in range(self.agent.settings.max_turns):
                await self.step()
            await self._decide(end_of_turn)
            note = (
                f"stopped after {self.agent.settings.max_turns} model calls (maxTurns); "
                "ask again to continue"
            )
            raise TurnEnded(MAX_TURNS, note, self.answer or note)
        except TurnEnded as ended:
            status, error = ended.status, ended.error
            if ended.answer is not None:
                self.answer = ended.answer
        except asyncio.CancelledError:
            self._close_pending("cancelled by the user before this tool finished")
            partial = "".join(self.streamed)
            session.transcript.append(
                {"type": "event", "kind": "cancelled", "turn": self.number, "partial": partial}
            )
            status, self.answer = CANCELLED, partial or self.answer
        except ProviderError as failure:
            self._close_pending("not run: the model endpoint failed")
            status, error = FAILED, failure.message
        except Exception as bug:  # a bug of ours: the user gets a sentence, the log the trace
            self.agent.port.log("".join(traceback.format_exception(bug)))
            self._close_pending("not run: lsp-agent hit an internal error")
            status, error = FAILED, f"internal error in lsp-agent: {bug!r}; see the log"
        finally:
            session.toolbox.end_turn()
        return await self._finish(status, error)

    async def step(self) -> None:
        """Call the model once and run the tools it asks for; `TurnEnded` when it is done."""
        self.streamed.clear()
        await self._decide(before_call)
        reply = await self._call_model()
        session = self.session
        schemas = session.toolbox.schemas(self.tools.read_only)
        if not reply.tool_calls and reply.text:
            reply = self._text_call(reply, schemas)
        self.pending = list(reply.tool_calls)
        message = reply.message()
        if len(reply.text) > BIG_MESSAGE_CHARS:
            # Encoding and writing megabytes would hold the loop: the editor waits meanwhile.
            await asyncio.to_thread(session.append, message)
        else:
            session.append(message)
        if reply.text:
            self.answer = reply.text
        if not reply.tool_calls and _imitates_a_call(reply.text, schemas):
            self.imitations += 1
            if self.imitations > IMITATIONS_ALLOWED:
                await self._decide(end_of_turn)
                raise TurnEnded(FAILED, self._cannot_call_tools())
            session.append({"role": "user", "content": IMITATION_CORRECTION})
            return
        if not reply.tool_calls:
            await self._decide(end_of_turn)
            raise TurnEnded(COMPLETED)
        malformed = True
        while self.pending:
            result = await self._run_tool(self.pending[0])
            malformed = malformed and result.reason in MALFORMED_REASONS
            self.pending.pop(0)
        self.malformed = self.malformed + 1 if malformed else 0
        if self.malformed > MALFORMED_REPLIES_ALLOWED:
            await self._decide(end_of_turn)
            raise TurnEnded(FAILED, self._malformed_calls())

    async def _call_model(self) -> Reply:
        session, agent = self.session, self.agent
        view = build_request(session.history, session.context)
        if session.toolbox.skills is not None:
            # A skill whose load_skill call a layer dropped or compacted locks again.
            session.toolbox.skills.relock_from(view)
        note = await self._instructions.note()
        notes = [*session.notes, *([note] if note else [])]
        session.notes.clear()  # told once
        if self.tools.read_only:
            notes.append(ASK_MODE_NOTE)  # at every call of the turn: the tools say it too
        reminder = await reminder_message(
            agent.workspace.root,
            plan=render_plan(session.plan.items),
            file_changes=await session.changes.changes(),
            notes=notes,
        )

        shown = 0

        def on_text(chunk: str) -> None:
            nonlocal shown
            self.streamed.append(chunk)
            if shown < STREAMED_CHARS:
                self.emit("text", text=chunk[: STREAMED_CHARS - shown])
            shown += len(chunk)

        schemas = session.toolbox.schemas(self.tools.read_only)
        reply = await agent.provider.complete([*view, reminder], schemas, on_text)
        if shown > STREAMED_CHARS:
            self.emit(
                "text",
                text=f"\n\n[lsp-agent: {shown - STREAMED_CHARS} more characters "
                "of this reply are in the session's transcript]",
            )
        self._measure(reply.usage)
        return reply

    async def _run_tool(self, call: ToolCall) -> ToolResult:
        """Run one tool call and store its result; a crash of ours becomes a result the model
        can work around."""
        self.emit("tool", name=call.name, args=_display_args(call.arguments))
        try:
            result = await self.session.toolbox.run(call.name, call.arguments, self.tools)
        except asyncio.CancelledError:
            raise
        except Exception as bug:
            self.agent.port.log("".join(traceback.format_exception(bug)))
            text = (
                f"error: the {call.name} tool crashed ({type(bug).__name__}: {bug}). "
                "This is a bug in lsp-agent, not in your call; try another way."
            )
            result = ToolResult(text=text, ok=False, summary=text[:200], reason="crash")
        if result.permission is not None:
            self.emit("permission", **result.permission)
        # The text the model got, as `lspAgent.history` gives it: a chat shows the same details
        # live and after a restart (an edit's per-hunk outcome, a command's output).
        hunks = [fact.to_json() for fact in result.hunks]
        self.emit(
            "toolResult",
            name=call.name,
            ok=result.ok,
            summary=result.summary,
            result=result.text[:RESULT_CHARS],
            **({"hunks": hunks} if hunks else {}),
        )
        partly = dict(result.outcomes)
        for path, applied in result.edits:
            # `outcome`: an applied edit that did not land as proposed, in a few words.
            outcome = {"outcome": partly[path]} if path in partly else {}
            self.emit("edit", uri=path.as_uri(), applied=applied, **outcome)
        transcript = self.session.transcript
        transcript.append(
            {
                "type": "event",
                "kind": "tool",
                "turn": self.number,
                "id": call.id,
                "name": call.name,
                "ok": result.ok,
                "summary": result.summary,
                "permission": result.permission,
                **({"hunks": hunks} if hunks else {}),
            }
        )
        for landed in result.landed:
            transcript.append(_applied_record(self.number, self.agent.workspace, landed))
        self.session.append(_tool_message(call, result.text))
        return result

    async def _decide(self, point: Callable[..., Any]) -> None:
        """A context decision point (before a call, at the end of the turn)."""
        session, agent = self.session, self.agent

        def compacting(_: str) -> None:
            # Only `$/progress` shows a compaction starting; its figures come when it is done.
            self.emit("compaction", strategy="compact", phase="started")

        session.context, events = await point(
            session.history,
            session.context,
            agent.settings,
            agent.provider,
            session.meter,
            progress=compacting,
        )
        self._record(events)

    def _record(self, events: list[ContextEvent]) -> None:
        """Keep each context decision in the transcript (resume rebuilds the state from the
        last one) and show it to the editor."""
        for event in events:
            self.session.transcript.append(event.record())
            self.emit("compaction", **event.notification())

    def _check_fits(self, message: dict[str, Any]) -> None:
        """Refuse a prompt (with its selection) too large for the model's window before it is
        stored: once stored, every later request of the session would carry it."""
        settings = self.agent.settings
        room = int(settings.context_window * settings.compact_at)
        used = self.session.meter.context_tokens
        needed = estimate_tokens(json.dumps(message))
        if used + needed > room:
            raise TurnEnded(
                FAILED,
                f"the question is about {needed} tokens (with the selection) and the model's "
                f"window leaves room for {max(room - used, 0)} (lspAgent.contextWindow = "
                f"{settings.context_window}): ask about less text, or select a smaller part. "
                "Nothing was stored: the session goes on as it was.",
            )

    def _announce(self) -> None:
        """The turn's first event: what it answers, and whether it continues a conversation."""
        # The turns the model still has: those a rewind took back are not continued.
        earlier = self.number - 1 - self.session.rewound
        message = ""
        if earlier:
            message = (
                f"continuing session {self.session.id} ({earlier} earlier "
                f"turn{'s' if earlier != 1 else ''}); start a new session for a fresh one"
            )
        asking = {"mode": "ask"} if self.tools.read_only else {}
        self.emit(
            "start",
            prompt=self.prompt,
            continuing=bool(earlier),
            turns=earlier,
            message=message,
            **asking,
        )
        selection = self.selection
        self.session.transcript.append(
            {
                "type": "event",
                "kind": "prompt",
                "turn": self.number,
                "prompt": self.prompt,
                **asking,
                "selection": {
                    "path": self.agent.workspace.relative(selection.path),
                    "startLine": selection.start_line,
                    "endLine": selection.end_line,
                }
                if selection is not None
                else None,
            }
        )

    def _measure(self, usage: Usage) -> None:
        session, settings = self.session, self.agent.settings
        session.meter.measured(usage)
        session.transcript.append(
            {
                "type": "event",
                "kind": "usage",
                "turn": self.number,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cached_tokens": usage.cached_tokens,
                "estimated": usage.estimated,
            }
        )
        session.usage = added(session.usage, usage)
        spent = cost(usage, settings.prices)
        self.emit(
            "usage",
            inputTokens=usage.prompt_tokens,
            cachedTokens=usage.cached_tokens or 0,
            outputTokens=usage.completion_tokens,
            contextTokens=session.meter.context_tokens,
            contextWindow=settings.context_window,
            **({"cost": spent} if spent is not None else {}),
        )

    def _close_pending(self, why: str) -> None:
        """Answer tool calls that will never run, so the stored history stays valid."""
        for call in self.pending:
            self.session.append(_tool_message(call, f"error: {why}"))
        self.pending.clear()

    async def _finish(self, status: str, error: str | None) -> TurnResult:
        session = self.session
        # The snapshot comes before the status event: editors take that event as the end.
        await session.snapshot(self.agent.port.log)
        session.transcript.append(
            {"type": "turn", "turn": self.number, "status": status, "error": error}
        )
        self.emit("status", status=status, **({"error": error} if error else {}))
        return TurnResult(session.id, status, self.answer, self.tools.counts, error)

    async def _search_codebase(self) -> str:
        """`#codebase`: the prompt's terms searched in the workspace, shown to the editor as a
        search and kept in the transcript; the text for the user message."""
        terms = codebase.terms(self.prompt)
        self.emit("tool", name="search", args={"codebase": True, "terms": terms})
        try:
            found = await codebase.search(self.agent.workspace, self.prompt)
            text, summary, ok = found.text, found.summary, True
        except ToolError as error:
            text = f"The user added #codebase, but searching the workspace failed: {error}"
            summary, ok = str(error)[:200], False
        self.emit("toolResult", name="search", ok=ok, summary=summary, result=text[:RESULT_CHARS])
        self.session.transcript.append(
            {
                "type": "event",
                "kind": "codebase",
                "turn": self.number,
                "terms": terms,
                "ok": ok,
                "summary": summary,
                "result": text[:RESULT_CHARS],
            }
        )
        return text

    def _user_text(self) -> str:
        selection = self.selection
        if selection is None:
            return self.prompt
        rel = self.agent.workspace.relative(selection.path)
        if selection.start_line == 0:
            return f"{self.prompt}\n\nThe user is looking at {rel}."
        lines = (
            f"line {selection.start_line}"
            if selection.start_line == selection.end_line
            else f"lines {selection.start_line}-{selection.end_line}"
        )
        return (
            f"{self.prompt}\n\nThe user is looking at {rel}, {lines}:\n```\n{selection.text}\n```"
        )

    def _text_call(self, reply: Reply, schemas: list[dict[str, Any]]) -> Reply:
        """A reply that is exactly one tool call written as text (small local models do that)
        becomes that call; the transcript keeps the text it came from."""
        session = self.session
        call_id = f"text_call_{session.id[-8:]}_{len(session.history)}"
        call = text_tool_call(reply.text, schemas, call_id=call_id)
        if call is None:
            return reply
        session.transcript.append(
            {
                "type": "event",
                "kind": "text_tool_call",
                "turn": self.number,
                "name": call.name,
                "text": reply.text,
            }
        )
        return replace(reply, text="", tool_calls=(call,))

    def _malformed_calls(self) -> str:
        model = self.agent.settings.model or "the model"
        return (
            f"{model} sent {self.malformed} replies in a row whose tool calls could not be run "
            "(no tool name, an unknown tool, or arguments that are not the tool's JSON object); "
            "the turn stops here. Ask again, or use a model that calls tools reliably "
            "(lspAgent.model)."
        )

    def _cannot_call_tools(self) -> str:
        model = self.agent.settings.model or "the model"
        return (
            f"{model} cannot call tools: it wrote {self.imitations} tool calls as text that "
            f"could not be run. Use a model with tool calling, e.g. {TOOL_MODELS} on Ollama, or "
            "start llama.cpp's llama-server with --jinja, and set lspAgent.model."
        )


def _imitates_a_call(text: str, schemas: list[dict[str, Any]]) -> bool:
    names = [schema["function"]["name"] for schema in schemas]
    return bool(text) and looks_like_tool_call(text, names)


KEPT_TEXT_CHARS = 2_000_000
"""A file whose texts (before and after an edit) are longer is not kept for undoing the turn."""


def _applied_record(turn: int, workspace: Workspace, landed: Landed) -> dict[str, Any]:
    """The transcript event of one file an accepted edit changed (what `undoTurn` reads)."""
    record: dict[str, Any] = {
        "type": "event",
        "kind": "applied",
        "turn": turn,
        "path": workspace.relative(landed.path),
    }
    size = len(landed.before or "") + len(landed.after or "")
    if size > KEPT_TEXT_CHARS:
        record["kept"] = False
    else:
        record.update(before=landed.before, after=landed.after)
    return record


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
