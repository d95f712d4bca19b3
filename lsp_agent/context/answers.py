"""The model's own messages in the context: no single reply may fill the window.

A model can answer with megabytes (a runaway loop, a file pasted back whole) or call a tool with
megabytes of arguments. Stored whole in the history, such a reply would make every later request
of its session too large for the window, for ever (a reply is among the last two messages, which
no layer may rewrite, at the very moment it would have to be). So a reply is capped when it is
stored in the history, as a tool result is on arrival: an answer's text keeps its head and tail
with a note of what was cut, a tool call's arguments over the cap are replaced by a short JSON
object saying so. The transcript keeps the reply whole (the user saw it whole), and a resumed
session caps it again, the same way. At a strip, old answers longer than `STUB_CHARS` keep their
head only, as old tool results do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lsp_agent.messages import FrozenMessage, frozen

CAP_CHARS = 32_000
"""An answer's text, or one tool call's arguments, longer than this is capped in the history."""

HEAD_SHARE = 0.75
"""Of a capped answer, the share of `CAP_CHARS` kept from its start (the rest from its end)."""

STUB_CHARS = 2_000
"""At a strip, an old answer longer than this keeps its first `STUB_CHARS` characters."""

_CUT = (
    "\n\n[… {cut:,} of {total:,} characters of this answer cut here to fit the context window; "
    "the user saw it whole …]\n\n"
)
_STUBBED = "\n[answer trimmed: {cut:,} of {total:,} characters cut to save context]"


def capped(message: FrozenMessage) -> FrozenMessage:
    """`message` as the history keeps it: an assistant message over the cap, capped; any other
    message, itself (the same object)."""
    if message.get("role") != "assistant":
        return message
    content = message.get("content")
    changes: dict[str, Any] = {}
    if isinstance(content, str) and len(content) > CAP_CHARS:
        head = int(CAP_CHARS * HEAD_SHARE)
        tail = CAP_CHARS - head
        cut = len(content) - head - tail
        changes["content"] = (
            content[:head] + _CUT.format(cut=cut, total=len(content)) + content[-tail:]
        )
    calls = message.get("tool_calls")
    if isinstance(calls, list) and any(_oversized(call) for call in calls):
        changes["tool_calls"] = [_capped_call(call) for call in calls]
    if not changes:
        return message
    return frozen({**message, **changes})


def stubbed(message: dict[str, Any]) -> dict[str, Any]:
    """An old assistant message at a strip: a long answer keeps its head and a marker."""
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= STUB_CHARS + len(_STUBBED) + 64:
        return message
    text = content[:STUB_CHARS] + _STUBBED.format(cut=len(content) - STUB_CHARS, total=len(content))
    return FrozenMessage(message, content=text)


def _oversized(call: Any) -> bool:
    function = call.get("function") if isinstance(call, Mapping) else None
    arguments = function.get("arguments") if isinstance(function, Mapping) else None
    return isinstance(arguments, str) and len(arguments) > CAP_CHARS


def _capped_call(call: Any) -> Any:
    """A tool call whose arguments are over the cap, with a short JSON object in their place
    (a request must carry JSON there), saying what was cut."""
    if not _oversized(call):
        return call
    function = call["function"]
    arguments = function["arguments"]
    note = json.dumps(
        {
            "note": (
                f"the {len(arguments):,} characters of these arguments were cut to fit the "
                "context window"
            ),
            "start": arguments[:200],
        }
    )
    return {**call, "function": {**function, "arguments": note}}
