"""What is sent, derived from what is stored: the layers strip, drop and compact (DESIGN §7).

The stored history only ever grows. What a request carries is `build_request(history, state)`: the
stored messages seen through a `ContextState`, a handful of numbers (and the latest hand-off note)
that say which old tool results are sent as stubs, which as one-line markers, and which stretch of
the conversation a note replaces. Every rewrite applies to messages by their index, below a
watermark fixed when it was decided, so for a state that does not change, the request built for a
history is a prefix of the request built for any longer one: between two decision points each
request is byte for byte the previous one plus new messages, and the provider's prefix cache hits.

States change only at decision points: `end_of_turn` (strip once past `stripAt`, then drop and
compact past `compactAt`) and `before_call` (the same, only when a single long turn grows past
`compactAt` before it ends). Each change is a `ContextEvent`; its transcript record carries the
whole new state, so a restarted server rebuilds the same requests (`restore_state`).

The layers are strategy objects with one method, `apply(view, target_tokens)`, that return a
rewritten `View` or None; `compose` chains them (drop-then-compact is truncate-then-summarize).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lsp_agent.config import Settings
from lsp_agent.context.compact import Compact, note_message
from lsp_agent.context.tokens import Message, TokenMeter, message_bytes
from lsp_agent.model import Provider

log = logging.getLogger(__name__)

Point = Literal["end_of_turn", "before_call"]
"""Where a decision about the context was taken."""

STRIP_HEADROOM = 0.1
"""Share of the window a strip must leave free below `stripAt`, unless past `compactAt`.

A strip rewrites every message after the previous strip point, so the provider re-reads them
once. Stubs pile up, and once they and the conversation come close to `stripAt`, a strip would
buy only a turn or two before the next one: such a strip is skipped, and the history grows to
`compactAt`, where one batch (strip, then drop down to `stripAt`) makes room for many turns."""

BATCH_HEADROOM = 0.2
"""Share of the window a batch past `compactAt` must leave free below `compactAt`.

When stubs and drop markers can no longer make that much room (the conversation itself has
grown), the batch goes on to compact rather than come back at every turn."""

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

    def to_json(self) -> dict[str, Any]:
        """The state as stored in a `compaction` transcript event."""
        return dataclasses.asdict(self)

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


@dataclass(frozen=True)
class ContextEvent:
    """A decision to send less: record it in the transcript, show it to the editor."""

    strategy: str
    """`strip`, `drop` or `compact`."""
    before: int
    """Estimated tokens of the request before this layer."""
    after: int
    """And after it."""
    state: ContextState
    """The state in effect from now on."""
    point: Point

    def notification(self) -> dict[str, Any]:
        """The fields of the `lspAgent/event` of kind `compaction` (DESIGN §3)."""
        return {"strategy": self.strategy, "before": self.before, "after": self.after}

    def record(self) -> dict[str, Any]:
        """The transcript record; `restore_state` reads the last one back."""
        return {
            "type": "event",
            "kind": EVENT_KIND,
            "strategy": self.strategy,
            "before": self.before,
            "after": self.after,
            "point": self.point,
            "context": self.state.to_json(),
        }


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


def build_request(
    history: Sequence[Message], state: ContextState, reminder: Message | None = None
) -> list[Message]:
    """The messages to send: the stored history seen through `state`, then the reminder.

    Pure and cheap (one pass, no copies of untouched messages: the list holds the stored dicts
    themselves, so callers must not mutate it). Deterministic in `(history, state)`: for a fixed
    state, the result for a history is a prefix of the result for any extension of it.
    """
    first = head_end(history)
    request = list(history[:first])
    start = first
    if state.note is not None:
        request.append(note_message(state.note))
        start = max(state.note_from, first)
    rewritten_below = min(max(state.strip_before, state.drop_before), len(history))
    for index in range(start, rewritten_below):
        request.append(_sent(history[index], index, state))
    request.extend(history[max(start, rewritten_below) :])
    if reminder is not None:
        request.append(reminder)
    return request


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
    if message.get("role") != "tool":
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
    return message if text is content else {**message, "content": text}


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


class Layer(Protocol):
    """A context strategy: rewrite the view to fit `target_tokens`, or say it has nothing to do."""

    name: str

    async def apply(self, view: View, target_tokens: int) -> View | None:
        """A view that is smaller and, when the layer can manage, within `target_tokens`;
        None when the view already fits or the layer cannot make it smaller."""
        ...


@dataclass
class Strip:
    """Layer 2: every tool result older than the protected tail shrinks to a stub, in one batch."""

    stub_chars: int = 300
    name: str = "strip"

    async def apply(self, view: View, target_tokens: int) -> View | None:
        if view.tokens <= target_tokens:
            return None
        state = view.state
        protected = view.protected
        if protected <= state.strip_before and state.stub_chars == self.stub_chars:
            return None
        new = dataclasses.replace(
            state, strip_before=max(state.strip_before, protected), stub_chars=self.stub_chars
        )
        after = view.rewritten(self.name, new)
        return after if after.bytes < view.bytes else None


@dataclass
class Drop:
    """Layer 3: whole tool results, oldest first, become a one-line marker until the view fits."""

    name: str = "drop"

    async def apply(self, view: View, target_tokens: int) -> View | None:
        if view.tokens <= target_tokens:
            return None
        state = view.state
        size = view.bytes
        drop_before = state.drop_before
        first = max(state.drop_before, view.start)
        for index in range(first, view.protected):
            message = view.history[index]
            if message.get("role") != "tool":
                continue
            now = view.sent(index)
            content = message.get("content")
            if not isinstance(content, str) or dropped(content) is content:
                continue
            size -= message_bytes(now) - message_bytes({**message, "content": dropped(content)})
            drop_before = index + 1
            if view.meter.tokens_for(size) <= target_tokens:
                break
        if drop_before == state.drop_before:
            return None
        return view.rewritten(self.name, dataclasses.replace(state, drop_before=drop_before))


class Composed:
    """Layers applied in order, each only while the view is still over the target."""

    def __init__(self, layers: Sequence[Layer], name: str | None = None) -> None:
        self.layers = tuple(layers)
        self.name = name or "+".join(layer.name for layer in self.layers)

    async def apply(self, view: View, target_tokens: int) -> View | None:
        current = view
        for layer in self.layers:
            if current.tokens <= target_tokens:
                break
            result = await layer.apply(current, target_tokens)
            if result is not None:
                current = result
        return None if current is view else current


def compose(*layers: Layer, name: str | None = None) -> Composed:
    """One layer made of several, cheapest first: `compose(Drop(), Compact(...))` truncates, then
    summarizes only when truncating was not enough."""
    return Composed(layers, name)


async def end_of_turn(
    history: Sequence[Message],
    state: ContextState,
    settings: Settings,
    provider: Provider,
    meter: TokenMeter,
    *,
    progress: Callable[[str], None] | None = None,
) -> tuple[ContextState, list[ContextEvent]]:
    """The decision point after a turn: strip past `stripAt`, drop and compact past `compactAt`.

    Past `stripAt`, old tool results become stubs when that leaves `STRIP_HEADROOM` free below
    it. Past `compactAt`, one batch: stubs, then whole results dropped (oldest first) down to
    `stripAt`, then, if that did not leave `BATCH_HEADROOM` free below `compactAt`, a hand-off
    note and the recent messages that fit `compactTo`. Either way the next batch is many turns
    away: the layers rewrite the prefix rarely, never a little at every turn.

    Returns the state for the next requests and one event per layer that rewrote the view (none
    when the context is lean enough: the common case). The meter is rebased to the new view.
    Raises `CompactionError` (a `ProviderError`) when a needed compaction failed; the stored
    history and `state` are then untouched.
    """
    return await _decide(history, state, settings, provider, meter, "end_of_turn", progress)


async def before_call(
    history: Sequence[Message],
    state: ContextState,
    settings: Settings,
    provider: Provider,
    meter: TokenMeter,
    *,
    progress: Callable[[str], None] | None = None,
) -> tuple[ContextState, list[ContextEvent]]:
    """The guard before each model call: nothing unless the next request is past `compactAt`.

    That happens only when one turn grows past `compactAt` before it ends. Then the same layers
    run as at the end of a turn, once: stripping everything older than the tool results the model
    has not seen yet brings the request far below `compactAt`, so the calls that follow share
    their prefix again. Cheap when nothing is needed: it reads the meter, builds nothing.
    """
    if meter.view_bytes == 0 and history:
        meter.rebase(View(history, state, meter).bytes)  # the loop never told the meter the size
    if meter.context_tokens <= int(settings.context_window * settings.compact_at):
        return state, []
    return await _decide(history, state, settings, provider, meter, "before_call", progress)


async def _decide(
    history: Sequence[Message],
    state: ContextState,
    settings: Settings,
    provider: Provider,
    meter: TokenMeter,
    point: Point,
    progress: Callable[[str], None] | None,
) -> tuple[ContextState, list[ContextEvent]]:
    window = settings.context_window
    strip_target = int(window * settings.strip_at)
    compact_target = int(window * settings.compact_at)
    if meter.view_bytes and meter.context_tokens <= strip_target:
        return state, []  # the common case, without a pass over the history
    start = View(history, dataclasses.replace(state, decided_at=len(history)), meter)
    if start.tokens <= strip_target:
        return state, []
    view = start
    forced = start.tokens > compact_target
    stripped = await Strip(settings.stub_chars).apply(view, strip_target)
    roomy = int(strip_target - STRIP_HEADROOM * window)
    if stripped is not None and (forced or stripped.tokens <= roomy):
        view = stripped
    if forced and view.tokens > strip_target:
        # Past compactAt the cache miss is paid anyway: drop down to stripAt, not just under
        # compactAt, so that the next drop is many turns away rather than one.
        view = await Drop().apply(view, strip_target) or view
    roomy_batch = int(compact_target - BATCH_HEADROOM * window)
    if forced and view.tokens > roomy_batch:
        compact = Compact(
            provider, cut_to=int(window * settings.compact_to), window=window, progress=progress
        )
        view = await compact.apply(view, roomy_batch) or view
    if not view.steps:
        return state, []
    meter.rebase(view.bytes)
    events = [
        ContextEvent(step.strategy, step.before, step.after, step.state, point)
        for step in view.steps
    ]
    for event in events:
        log.info(
            "context %s at %s: %d → %d tokens", event.strategy, point, event.before, event.after
        )
    return view.state, events


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
