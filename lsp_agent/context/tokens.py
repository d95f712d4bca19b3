"""Token accounting: the last measured prompt plus an estimate of what changed since.

The provider's `usage.prompt_tokens` is the only exact figure we ever get, and only for a request
already sent. A `TokenMeter` keeps that figure together with the size in bytes of the messages it
measured (the stored view, without the reminder), then follows the size of the view as messages
are added or layers rewrite it. The next request's tokens are the measured figure plus the bytes
added since ÷ 3.5 (rounded up): the tool schemas and the reminder, which are in every request,
stay inside the measured part, so they need no estimate of their own.

Sizes are counted per message (its compact JSON in UTF-8); what joins the messages in the request
body is a constant few bytes per message and cancels out between two measurements.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from lsp_agent.messages import Message as Message  # the context layers import it from here
from lsp_agent.messages import Usage, estimate_tokens


def message_bytes(message: Mapping[str, Any]) -> int:
    """The size of one message as sent: its JSON in UTF-8.

    Exactly `len(json.dumps(message, ensure_ascii=False).encode())`, counted without building
    that text: a 20 MB answer is measured in a few milliseconds instead of a tenth of a second
    on the event loop, and a lone surrogate counts three bytes instead of raising.
    """
    return json_size(message)


def json_size(value: Any) -> int:
    """The size in UTF-8 of `json.dumps(value, ensure_ascii=False)` (default separators)."""
    if isinstance(value, str):
        return _string_size(value)
    if isinstance(value, Mapping):
        if not value:
            return 2
        # "{" + items joined by ", " + "}", each item `key: value`.
        return 2 * len(value) + sum(
            _string_size(str(key)) + 2 + json_size(item) for key, item in value.items()
        )
    if isinstance(value, (list, tuple)):
        if not value:
            return 2
        return 2 * len(value) + sum(json_size(item) for item in value)
    return len(json.dumps(value))


def _string_size(text: str) -> int:
    """The size of a JSON string: its UTF-8 bytes, the two quotes, and what escaping adds."""
    raw = text.encode("utf-8", "surrogatepass")
    # What is left once every byte that needs no escape is deleted: one pass in C.
    special = raw.translate(None, _PLAIN_BYTES)
    if not special:
        return len(raw) + 2
    short = sum(special.count(byte) for byte in _SHORT_ESCAPES)
    # `\n`, `\"` and the like add one character; other control characters become `\u00XX`.
    return len(raw) + 2 + len(special) + 4 * (len(special) - short)


_NEEDS_ESCAPE = bytes(range(0x20)) + b'"\\'
_PLAIN_BYTES = bytes(byte for byte in range(256) if byte not in _NEEDS_ESCAPE)
_SHORT_ESCAPES = tuple(bytes([byte]) for byte in b'"\\\n\r\t\b\f')


def request_bytes(messages: Iterable[Mapping[str, Any]]) -> int:
    """The size of a list of messages: the sum of `message_bytes`."""
    return sum(message_bytes(message) for message in messages)


def tokens_between(size_from: int, size_to: int) -> int:
    """Estimated tokens gained (positive) or lost (negative) going from one byte size to another.

    bytes ÷ 3.5 rounded up, away from zero for a loss too (`estimate_tokens` of the difference).
    """
    delta = size_to - size_from
    return estimate_tokens(delta) if delta >= 0 else -estimate_tokens(-delta)


class TokenMeter:
    """Tokens of the next request: the last measured prompt plus an estimate of the rest.

    One meter per session. The loop tells it what it measured (`measured`), what it stored
    (`added`), and the context layers tell it when they rewrite the view (`rebase`).
    """

    def __init__(self, overhead_tokens: int = 0) -> None:
        self.overhead_tokens = overhead_tokens
        """Tokens every request carries besides its messages (tool schemas, reminder), used only
        before the first measurement: afterwards they are part of the measured figure."""
        self.prompt_tokens: int | None = None
        """`usage.prompt_tokens` of the last model call; None before the first one."""
        self.completion_tokens: int | None = None
        self.cached_tokens: int | None = None
        """Prompt tokens of the last call the provider served from its prefix cache."""
        self.estimated = False
        """True when the last usage was itself an estimate (the server reported none)."""
        self.view_bytes = 0
        """Bytes of the messages the next request will carry (without the reminder)."""
        self._measured_bytes = 0

    def measured(self, usage: Usage, request_bytes: int | None = None) -> None:
        """Take the provider's usage for the request just sent.

        `request_bytes` is the size of the messages of that request without the reminder
        (`request_bytes(view)`); by default the size the meter has been following, which is the
        same number when every stored message went through `added` and every rewrite through
        `rebase`.
        """
        if request_bytes is not None:
            self.view_bytes = request_bytes
        self.prompt_tokens = usage.prompt_tokens
        self.completion_tokens = usage.completion_tokens
        self.cached_tokens = usage.cached_tokens
        self.estimated = usage.estimated
        self._measured_bytes = self.view_bytes

    def added(self, message: Mapping[str, Any]) -> None:
        """A message was stored: the next request carries it too."""
        self.view_bytes += message_bytes(message)

    def rebase(self, view_bytes: int) -> None:
        """The view was rewritten (strip, drop, compact, resume): this is its new size."""
        self.view_bytes = view_bytes

    @property
    def context_tokens(self) -> int:
        """Estimated tokens of the next request."""
        return self.tokens_for(self.view_bytes)

    @property
    def cached_share(self) -> float | None:
        """Share of the last request's prompt served from the cache; None when unknown."""
        if self.cached_tokens is None or not self.prompt_tokens:
            return None
        return min(self.cached_tokens / self.prompt_tokens, 1.0)

    def tokens_for(self, view_bytes: int) -> int:
        """Estimated tokens of a request whose messages (reminder aside) take `view_bytes`.

        Growth is estimated at 3.5 bytes a token. A view that shrank is never estimated below
        its share of the measured prompt: with a tokenizer sparser than 3.5 bytes a token, a
        large rewrite would otherwise take off more tokens than it removed.
        """
        if self.prompt_tokens is None:
            return estimate_tokens(view_bytes) + self.overhead_tokens
        tokens = self.prompt_tokens + tokens_between(self._measured_bytes, view_bytes)
        if view_bytes < self._measured_bytes:
            share = -(-view_bytes * self.prompt_tokens // self._measured_bytes)
            tokens = max(tokens, share)
        return tokens

    def estimate(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Estimated tokens of a request carrying `messages` (and a reminder like the last)."""
        return self.tokens_for(request_bytes(messages))

    def status(self) -> dict[str, Any]:
        """The figures `lspAgent.status` shows for a session."""
        return {
            "contextTokens": self.context_tokens,
            "promptTokens": self.prompt_tokens,
            "cachedTokens": self.cached_tokens,
            "cachedShare": self.cached_share,
        }
