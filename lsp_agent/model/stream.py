"""Reading a reply: SSE lines, the reply being assembled, and the text passed on as it arrives.

Replayed text: when a retried stream starts with the text the user has already seen, only what
comes after it is passed to `on_text`; when it says something else, the new text is passed in full,
so the editor may show the broken start followed by the new reply (the `Reply` holds only the new).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lsp_agent.messages import ToolCall, as_int
from lsp_agent.model import TextSink


class StreamBroken(Exception):
    """The reply stopped half-way; the request is worth one more try from scratch."""


class ReplayingSink:
    """Passes streamed text to `on_text`, without repeating what a retried attempt replays."""

    def __init__(self, on_text: TextSink) -> None:
        self._on_text = on_text
        self._seen = ""
        """The text the user has seen of this reply, as the attempt that showed it had it."""
        self._parts: list[str] = []
        self._length = 0
        self._replaying = False
        self._diverged = False

    def restart(self) -> None:
        """A new attempt begins."""
        text = "".join(self._parts)
        if self._diverged or len(text) > len(self._seen):
            self._seen = text
        self._parts, self._length = [], 0
        self._replaying, self._diverged = bool(self._seen), False

    def feed(self, delta: str) -> None:
        """One text delta of the current attempt."""
        if not delta:
            return
        start = self._length
        self._parts.append(delta)
        self._length += len(delta)
        if not self._replaying:
            self._on_text(delta)
            return
        overlap = self._seen[start : start + len(delta)]
        if not delta.startswith(overlap):
            self._replaying, self._diverged = False, True
            self._on_text("".join(self._parts))
        elif self._length >= len(self._seen):
            self._replaying = False
            if rest := delta[len(overlap) :]:
                self._on_text(rest)


@dataclass
class CallDraft:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class Draft:
    """A reply being assembled from a stream."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, CallDraft] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    done: bool = False

    def call(self, index: int) -> CallDraft:
        if index not in self.calls:
            self.calls[index] = CallDraft(id="", name="")
        return self.calls[index]

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for position, index in enumerate(sorted(self.calls)):
            draft = self.calls[index]
            calls.append(
                ToolCall(
                    id=draft.id or f"call_{position}",
                    name=draft.name,
                    arguments="".join(draft.arguments),
                )
            )
        return tuple(calls)


def feed_call(draft: Draft, delta: Any) -> None:
    """One tool-call delta: the first of a call carries id and name, the rest argument text."""
    if not isinstance(delta, dict):
        return
    index = as_int(delta.get("index"))
    call_id = delta.get("id")
    if index is None:
        known = [i for i, call in draft.calls.items() if call_id and call.id == call_id]
        if known:
            index = known[0]
        elif call_id or not draft.calls:
            index = len(draft.calls)
        else:
            index = max(draft.calls)
    call = draft.call(index)
    if isinstance(call_id, str) and call_id and not call.id:
        call.id = call_id
    function = delta.get("function") or {}
    name = function.get("name")
    if isinstance(name, str) and name and name != call.name:
        # A name arrives whole in its first delta; a few servers split it, some repeat it.
        call.name += name
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call.arguments.append(arguments)
    elif arguments is not None:
        call.arguments.append(json.dumps(arguments))


def sse_data(line: str) -> str | None:
    """The payload of an SSE `data:` line; None for other fields, comments and blank lines."""
    if not line.startswith("data:"):
        return None
    data = line[5:]
    return data[1:] if data.startswith(" ") else data
