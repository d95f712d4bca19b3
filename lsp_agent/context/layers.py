"""The context layers and when they run: strip, drop and compact, at decision points.

Layers are strategy objects with one method, `apply(view, target_tokens)`, that return a
rewritten `View` or None: `Strip` (old tool results become stubs), `Drop` (whole results become a
one-line marker, oldest first) and `compact.Compact` (a hand-off note written by the model). They
run only at decision points: `end_of_turn` (strip once past `stripAt`, then drop and compact past
`compactAt`) and `before_call` (the same, only when a single long turn grows past `compactAt`
before it ends). Each change is a `ContextEvent`: recorded in the transcript, shown to the editor.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lsp_agent.config import Settings
from lsp_agent.context.compact import Compact
from lsp_agent.context.tokens import Message, TokenMeter, message_bytes
from lsp_agent.context.view import EVENT_KIND, ContextState, View, dropped
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
        """The fields of the `lspAgent/event` of kind `compaction` (docs/protocol.md, Events)."""
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


@dataclass
class Strip:
    """Layer 2: every tool result older than the protected tail shrinks to a stub, and every
    long answer to its head (`context/answers.py`), in one batch."""

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
