"""Rewinding a conversation to before one of its prompts, without losing a line of it.

The transcript keeps everything: a rewind is one more record (`rewind`, `to`: the turn whose
prompt it went back to). What a session continues from is the transcript seen through its
rewinds (`in_effect`): the messages of the rewound turns left out, and the context decisions
taken on them (a strip, a drop, a compaction decided once those messages were in the history)
left out too, so that what is sent next is what would have been sent had those turns never
happened. Resuming a session and rewinding one in memory both rebuild it from that view
(`Agent._read_stored`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lsp_agent.context.view import EVENT_KIND as COMPACTION
from lsp_agent.context.view import ContextState

KIND = "rewind"
"""The `kind` of the transcript event and of the `lspAgent.history` item."""


def is_rewind(record: Mapping[str, Any]) -> bool:
    return (
        record.get("type") == "event"
        and record.get("kind") == KIND
        and isinstance(record.get("to"), int)
    )


def in_effect(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records a session continues from: each rewind leaves out the messages of the turns
    it went back over, and every context decision taken on a history that held one of them.
    Everything else (edit outcomes, usage, undo events, the rewinds themselves) stays."""
    kept: list[dict[str, Any]] = []
    for record in records:
        if is_rewind(record):
            kept = _without_turns_from(kept, int(record["to"]))
        kept.append(record)
    return kept


def _without_turns_from(records: list[dict[str, Any]], to: int) -> list[dict[str, Any]]:
    messages = [r for r in records if r.get("type") == "message"]
    cut = next((i for i, r in enumerate(messages) if _turn(r) >= to), len(messages))
    return [
        record
        for record in records
        if not (record.get("type") == "message" and _turn(record) >= to)
        and not (_is_compaction(record) and _decided_at(record) > cut)
    ]


def rewound_turns(records: Iterable[Mapping[str, Any]]) -> set[int]:
    """The turns some rewind went back over (their messages are no longer sent)."""
    prompted: list[int] = []
    rewound: set[int] = set()
    for record in records:
        if record.get("type") == "event" and record.get("kind") == "prompt":
            prompted.append(_turn(record))
        elif record.get("type") == "message" and record.get("role") == "user":
            turn = _turn(record)
            if turn not in prompted:  # a transcript from before prompts were recorded
                prompted.append(turn)
        elif is_rewind(record):
            rewound.update(t for t in prompted if t >= int(record["to"]))
    return rewound


def prompt_of(records: Sequence[Mapping[str, Any]], turn: int) -> str | None:
    """The prompt the user sent at `turn`, as they wrote it (without the selection's text)."""
    for record in records:
        prompt = record.get("prompt")
        if _is_event(record, "prompt") and _turn(record) == turn and isinstance(prompt, str):
            return prompt
    for record in records:  # a transcript from before prompts were recorded
        message = record.get("message")
        if record.get("type") == "message" and _turn(record) == turn:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(message, Mapping) and message.get("role") == "user":
                return content if isinstance(content, str) else None
    return None


def message_turns(records: Iterable[Mapping[str, Any]]) -> list[int]:
    """The turn of each stored message, in order: indexes as the history's."""
    return [_turn(r) for r in records if r.get("type") == "message"]


def compacted_away(turns: Sequence[int], state: ContextState, turn: int) -> str | None:
    """Why the conversation cannot go back to before `turn`'s prompt, or None when it can.

    `turns` is the turn of each message of the history in effect (`message_turns`). A
    turn whose prompt a hand-off note replaced cannot be rewound to: the model has only the
    note's summary of the conversation around it, and going back would mean sending again
    everything the note replaced. Turn 1 always can (nothing is left before it)."""
    if turn <= 1 or state.note is None:
        return None
    start = next((i for i, t in enumerate(turns) if t >= turn), len(turns))
    if start >= state.note_from:
        return None
    firsts: dict[int, int] = {}
    for index, each in enumerate(turns):
        firsts.setdefault(each, index)
    whole = sorted(t for t, first in firsts.items() if t > 0 and first >= state.note_from)
    can = "turn 1 (the start)" + (
        f" or turns {whole[0]} to {whole[-1]}"
        if len(whole) > 1
        else f" or turn {whole[0]}"
        if whole
        else ""
    )
    return (
        f"turn {turn} was compacted into a summary to fit the context window, so the "
        f"conversation cannot be rewound to before it; it can be rewound to before {can}"
    )


def _turn(record: Mapping[str, Any]) -> int:
    turn = record.get("turn", 0)
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else 0


def _is_event(record: Mapping[str, Any], kind: str) -> bool:
    return record.get("type") == "event" and record.get("kind") == kind


def _is_compaction(record: Mapping[str, Any]) -> bool:
    return _is_event(record, COMPACTION)


def _decided_at(record: Mapping[str, Any]) -> int:
    context = record.get("context")
    value = context.get("decided_at") if isinstance(context, Mapping) else None
    return value if isinstance(value, int) else 0
