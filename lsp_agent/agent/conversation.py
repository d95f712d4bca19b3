"""A conversation in memory: its history, transcript and tools, the turn running on it, and
what a turn is asked with and answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_agent.agent.instructions import Instructions
from lsp_agent.context.answers import capped
from lsp_agent.context.reminder import FileChangeSource
from lsp_agent.context.tokens import TokenMeter
from lsp_agent.context.view import ContextState
from lsp_agent.messages import Usage, frozen
from lsp_agent.session.transcript import Transcript
from lsp_agent.tools.belt import Toolbox
from lsp_agent.tools.results import EditCounts
from lsp_agent.tools.todo import Plan


@dataclass(frozen=True)
class Selection:
    """What the user was looking at when they asked: a file and a range of lines."""

    path: Path
    start_line: int = 0
    """1-based, inclusive; 0 when the user pointed at the whole file."""
    end_line: int = 0
    text: str = ""


@dataclass
class TurnResult:
    """The answer to `lspAgent.ask`."""

    session: str
    status: str
    answer: str
    edits: EditCounts
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `lspAgent.ask` result shape (docs/protocol.md, Commands)."""
        result: dict[str, Any] = {
            "session": self.session,
            "status": self.status,
            "answer": _shown(self.answer),
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
    rewound: int = 0
    """How many of them a rewind took back: the model no longer sees them."""
    task: asyncio.Task[TurnResult] | None = None
    """The running turn, if any: one at a time per session."""
    notes: list[str] = field(default_factory=list)
    """What the next request's reminder tells the model once (the user undid a turn, …)."""
    usage: Usage = field(default_factory=lambda: Usage(0, 0, 0, estimated=False))
    """Tokens the session's model calls used so far: input, output and cached input."""
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

    def __post_init__(self) -> None:
        self.history[:] = (capped(frozen(message)) for message in self.history)

    def append(self, message: dict[str, Any]) -> None:
        """Store a message: in the history (what is sent derives from it) and the transcript.
        The history keeps a frozen copy: what the caller does with its dict afterwards changes
        nothing that is sent."""
        message = frozen(message)
        kept = capped(message)  # a reply of megabytes is capped in the history, kept whole here
        self.history.append(kept)
        self.meter.added(kept)
        self.transcript.append({"type": "message", "turn": self.turns, "message": message})

    async def snapshot(self, log: Callable[[str], None]) -> None:
        """Remember the tree as the turn leaves it, for the next turn's `<file_changes>`."""
        try:
            await self.changes.snapshot()
        except Exception as error:  # a missing git must not turn a finished turn into a crash
            log(f"file-change snapshot failed: {error!r}")


def added(total: Usage, usage: Usage) -> Usage:
    """`total` with one more model call's `usage` counted in."""
    return Usage(
        total.prompt_tokens + usage.prompt_tokens,
        total.completion_tokens + usage.completion_tokens,
        (total.cached_tokens or 0) + (usage.cached_tokens or 0),
        estimated=total.estimated or usage.estimated,
    )


def used(records: Iterable[Mapping[str, Any]]) -> Usage:
    """What a session's model calls used, summed from its transcript's `usage` records: the
    `Session.usage` of a session resumed after a restart."""
    total = Usage(0, 0, 0, estimated=False)
    for record in records:
        if record.get("type") != "event" or record.get("kind") != "usage":
            continue
        keys = ("prompt_tokens", "completion_tokens", "cached_tokens")
        prompt, completion, cached = (
            value if isinstance(value := record.get(key), int) else 0 for key in keys
        )
        total = added(total, Usage(prompt, completion, cached, bool(record.get("estimated"))))
    return total


def cost(usage: Usage, prices: Mapping[str, float]) -> float | None:
    """What `usage` cost at `prices` (dollars per million tokens); None without prices."""
    if not prices:
        return None
    cached = usage.cached_tokens or 0
    cached_price = prices.get("cachedInput", prices["input"])
    dollars = (
        (usage.prompt_tokens - cached) * prices["input"]
        + cached * cached_price
        + usage.completion_tokens * prices["output"]
    )
    return round(dollars / 1_000_000, 6)


ANSWER_RESULT_CHARS = 200_000
"""The longest answer an `ask` result carries; the events and the transcript have all of it."""


def _shown(answer: str) -> str:
    """The answer for the `ask` result: whole, or its start when a runaway model wrote pages
    (one multi-megabyte JSON answer would hold the editor's pipe, and the server, meanwhile)."""
    if len(answer) <= ANSWER_RESULT_CHARS:
        return answer
    cut = len(answer) - ANSWER_RESULT_CHARS
    return (
        answer[:ANSWER_RESULT_CHARS]
        + f"\n\n[lsp-agent: {cut} more characters of this answer are in the session's transcript]"
    )
