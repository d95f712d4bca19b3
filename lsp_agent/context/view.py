"""What is sent, derived from what is stored: a history seen through the layers' decisions.

The stored history only ever grows. What a request carries is `build_request(history, state)`: the
stored messages seen through a `ContextState`, a handful of numbers (and the latest hand-off note)
that say which old tool results are sent as stubs, which as one-line markers, and which stretch of
the conversation a note replaces. Every rewrite applies to messages by their index, below a
watermark fixed when it was decided, so for a state that does not change, the request built for a
history is a prefix of the request built for any longer one: between two decision points each
request is byte for byte the previous one plus new messages, and the provider's prefix cache hits.

States change only at the decision points of `layers.py`; each change is recorded in the
transcript with the whole new state, so a restarted server rebuilds the same requests
(`restore_state`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lsp_agent.context.answers import stubbed
from lsp_agent.context.tokens import Message, TokenMeter, message_bytes
from lsp_agent.messages import FrozenMessage

log = logging.getLogger(__name__)


EVENT_KIND = "compaction"
"""The `kind` of the transcript event and of the `lspAgent/event` notification."""

_TRIMMED = (
    "[output trimmed: {cut} of {total} chars cut to save context; "
    "run the tool again if you need the rest]"
)
_DROPPED = (
    "[output dropped to fit the context window ({total} chars); run the tool again if needed]"
)
_UNTRUSTED_END = "</untrusted>"
_MIN_SAVING = 64


@dataclass(frozen=True)
class ContextState:
    """The rewrites decided so far: what is sent for each stored message."""

    strip_before: int = 0
    """Tool results stored at an index below this are sent as stubs of `stub_chars` chars."""
    stub_chars: int = 300
    """Characters a stub keeps (the `stubChars` setting when the last strip was decided)."""
    drop_before: int = 0
    """Tool results stored at an index below this are sent as a one-line marker."""
    note: str | None = None
    """The latest hand-off note, sent after the first user message; None before a compaction."""
    note_from: int = 0
    """With a note: the first stored index sent after it (the note replaces what lies between)."""
    decided_at: int = 0
    """Length of the history when this state was decided (checked when a session resumes)."""
    rewrites: dict[int, tuple[Message, Message]] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """What this state sends for a rewritten stored message, by its index (with the stored
    message it was made from): the same object at every request, so the request encoder reuses
    its bytes by identity instead of making and matching hundreds of stubs per call. Not part of
    the state: a new state starts it empty."""
    built: list[Any] = dataclasses.field(
        default_factory=lambda: [0, [], []], init=False, compare=False, repr=False
    )
    """The last run of rewritten messages a request was built with: where it starts, the stored
    messages, and what was sent for them. A request over the same stored messages (compared in
    one C-level pass) takes it whole instead of looking up each one."""

    def to_json(self) -> dict[str, Any]:
        """The state as stored in a `compaction` transcript event."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContextState:
        """The state of a transcript event; ValueError when it is not one."""
        try:
            state = cls(
                strip_before=_natural(data.get("strip_before", 0)),
                stub_chars=_natural(data.get("stub_chars", 300)),
                drop_before=_natural(data.get("drop_before", 0)),
                note=_optional_text(data.get("note")),
                note_from=_natural(data.get("note_from", 0)),
                decided_at=_natural(data.get("decided_at", 0)),
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"not a context state: {error}") from None
        return state


@dataclass(frozen=True)
class Step:
    """One layer's rewrite: its name, the estimate before and after, and the resulting state."""

    strategy: str
    before: int
    after: int
    state: ContextState


def head_end(history: Sequence[Message]) -> int:
    """How many leading messages are always sent as stored: the system prompt(s), then the
    first user message when it comes right after them."""
    index = 0
    while index < len(history) and history[index].get("role") in ("system", "developer"):
        index += 1
    if index < len(history) and history[index].get("role") == "user":
        index += 1
    return index


def protected_start(history: Sequence[Message]) -> int:
    """The first index of the tail no layer may touch: the last two messages, widened back to
    the assistant message whose tool results they are, so a call and its results stay whole."""
    index = max(len(history) - 2, 0)
    while index > 0 and history[index].get("role") == "tool":
        index -= 1
    return index


_NOTE_HEAD = (
    "<handoff_note>\n"
    "Earlier messages of this session were replaced by this hand-off note to save context. "
    "The user's first request is above it; the most recent messages follow it.\n\n"
)
_NOTE_TAIL = "\n</handoff_note>"


@functools.lru_cache(maxsize=4)
def note_message(note: str) -> FrozenMessage:
    """The user message that carries a hand-off note, sent after the user's first request: the
    same object for the same note, so that the request encoder matches the messages after it
    without a lookup."""
    return FrozenMessage(role="user", content=_NOTE_HEAD + note + _NOTE_TAIL)


def build_request(
    history: Sequence[Message], state: ContextState, reminder: Message | None = None
) -> list[Message]:
    """The messages to send: the stored history seen through `state`, then the reminder.

    Cheap (one pass, no copies: the list holds the stored dicts themselves and, for rewritten
    ones, what `state` made for them the first time, so callers must not mutate it).
    Deterministic in `(history, state)`: for a fixed state, the result for a history is a
    prefix of the result for any extension of it.
    """
    first = head_end(history)
    request = list(history[:first])
    start = first
    if state.note is not None:
        request.append(note_message(state.note))
        start = max(state.note_from, first)
    rewritten_below = min(max(state.strip_before, state.drop_before), len(history))
    if start < rewritten_below:
        request += _rewritten(history[start:rewritten_below], start, state)
    request.extend(history[max(start, rewritten_below) :])
    if reminder is not None:
        request.append(reminder)
    return request


def _rewritten(stored: Sequence[Message], start: int, state: ContextState) -> list[Message]:
    """What is sent for the stored messages from index `start` on, all below the rewritten
    mark: the last run built when they are the same objects, else each one's rewrite."""
    built = state.built
    # Identical items compare without a look inside; equal ones (a resumed session's messages
    # read again) are taken as the same, once: the run then holds the new objects.
    if built[0] == start and built[1] == stored:
        built[1] = stored
        sent: list[Message] = built[2]
        return sent
    rewrites = state.rewrites
    sent = []
    for index, message in enumerate(stored, start):
        made = rewrites.get(index)
        if made is None or made[0] is not message:
            made = rewrites[index] = (message, _sent(message, index, state))
        sent.append(made[1])
    built[:] = [start, stored, sent]
    return sent


def stub(content: str, keep: int) -> str:
    """A tool result cut to its first `keep` chars and a marker; unchanged unless that saves at
    least `_MIN_SAVING` chars (a rewrite that saves nothing would only cost a cache miss).

    A result wrapped in `<untrusted>` keeps its closing tag, so the marker (ours) stays outside
    the untrusted text.
    """
    body, closing = content, ""
    stripped = content.rstrip()
    if stripped.endswith(_UNTRUSTED_END):
        body, closing = stripped[: -len(_UNTRUSTED_END)], "\n" + _UNTRUSTED_END
    cut = len(body) - keep
    if cut <= 0:
        return content
    text = body[:keep] + closing + "\n" + _TRIMMED.format(cut=cut, total=len(content))
    return text if len(text) + _MIN_SAVING <= len(content) else content


def dropped(content: str) -> str:
    """A tool result replaced by one line; unchanged unless that saves `_MIN_SAVING` chars."""
    text = _DROPPED.format(total=len(content))
    return text if len(text) + _MIN_SAVING <= len(content) else content


def _sent(message: Message, index: int, state: ContextState) -> Message:
    """What is sent for the stored message at `index`."""
    role = message.get("role")
    if role == "assistant":
        return stubbed(message) if index < state.strip_before else message
    if role != "tool":
        return message
    content = message.get("content")
    if not isinstance(content, str):
        return message
    if index < state.drop_before:
        text = dropped(content)
    elif index < state.strip_before:
        text = stub(content, state.stub_chars)
    else:
        return message
    return message if text is content else FrozenMessage(message, content=text)


class View:
    """A stored history seen through a state: the request it gives, and that request's size."""

    def __init__(
        self,
        history: Sequence[Message],
        state: ContextState,
        meter: TokenMeter,
        steps: tuple[Step, ...] = (),
    ) -> None:
        self.history = history
        """The stored messages, never modified."""
        self.state = state
        self.meter = meter
        """Turns sizes into token estimates (measured prompt + bytes ÷ 3.5 since)."""
        self.steps = steps
        """The rewrites that led from the first view to this one, oldest first."""
        self._messages: list[Message] | None = None
        self._bytes: int | None = None

    @property
    def messages(self) -> list[Message]:
        """`build_request(history, state)`, without a reminder."""
        if self._messages is None:
            self._messages = build_request(self.history, self.state)
        return self._messages

    @property
    def bytes(self) -> int:
        if self._bytes is None:
            self._bytes = sum(message_bytes(message) for message in self.messages)
        return self._bytes

    @property
    def tokens(self) -> int:
        """Estimated tokens of a request made of this view (and a reminder)."""
        return self.meter.tokens_for(self.bytes)

    @property
    def head_end(self) -> int:
        return head_end(self.history)

    @property
    def protected(self) -> int:
        """First stored index no layer may rewrite."""
        return protected_start(self.history)

    @property
    def start(self) -> int:
        """First stored index sent after the head (and the note, if any)."""
        first = self.head_end
        return max(self.state.note_from, first) if self.state.note is not None else first

    def sent(self, index: int) -> Message:
        """What this view sends for the stored message at `index`."""
        return _sent(self.history[index], index, self.state)

    def rewritten(self, strategy: str, state: ContextState) -> View:
        """The view under a new state, remembering the step that led to it."""
        after = View(self.history, state, self.meter, self.steps)
        step = Step(strategy, self.tokens, after.tokens, state)
        after.steps = (*self.steps, step)
        return after


def restore_state(
    records: Iterable[Mapping[str, Any]], history: Sequence[Message]
) -> tuple[ContextState, str | None]:
    """The state of a resumed session: the last `compaction` event of its transcript.

    Returns the state and None, or an empty state and a sentence saying why the recorded one
    could not be used (it does not fit the history read back); sending the whole history then is
    safe, and the next decision point shrinks it again.
    """
    found: Mapping[str, Any] | None = None
    for record in records:
        if record.get("type") == "event" and record.get("kind") == EVENT_KIND:
            context = record.get("context")
            if isinstance(context, Mapping):
                found = context
    if found is None:
        return ContextState(), None
    try:
        state = ContextState.from_json(found)
    except ValueError as error:
        return ContextState(), f"ignored the recorded context state: {error}"
    problem = _misfit(state, history)
    if problem is not None:
        return ContextState(), f"ignored the recorded context state: {problem}"
    return state, None


def _misfit(state: ContextState, history: Sequence[Message]) -> str | None:
    """Why `state` cannot have been decided on this history, or None."""
    if state.decided_at > len(history):
        return f"it was decided on {state.decided_at} messages, only {len(history)} were read back"
    if state.note is not None:
        first = head_end(history)
        if state.note_from < first or state.note_from > len(history):
            return "its hand-off note does not start where the history allows"
        if state.note_from < len(history) and history[state.note_from].get("role") == "tool":
            return "its hand-off note would leave a tool result without its call"
    return None


def _natural(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number ≥ 0, got {value!r}")
    return value


def _optional_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected text or null, got {type(value).__name__}")
