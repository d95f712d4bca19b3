"""Chat messages as the core speaks them: tool calls, replies, token counts, and clean text.

Everything here is plain data with no I/O, so that the context layers and the tools can use the
types without loading the HTTP machinery of `lsp_agent.model`. Messages are OpenAI chat-format
dicts; a provider translates them for its endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

Message = dict[str, Any]
"""An OpenAI chat message, as the history stores it. Stored messages are never mutated: what a
layer rewrites is a new dict (the request encoder relies on it)."""


class FrozenMessage(dict[str, Any]):
    """A message that cannot be changed in place: how the history stores each message, and how
    the context layers make the stubs they send for them.

    The request encoder sends a message's bytes again for as long as it is the same object
    (`model/encoding.py`); for other messages it checks on every call that the content is still
    the same object, which at a thousand cold messages costs more than the rest of the call.
    A frozen message needs no such check: its members cannot be set, deleted or replaced (the
    values themselves are strings, or lists nobody edits). Everything that reads dicts reads it.
    """

    __slots__ = ()

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a stored message cannot be changed: make a new one ({**message, ...})")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[FrozenMessage], tuple[dict[str, Any]]]:
        # copy.copy and pickle rebuild a dict member by member, which this one refuses.
        return (type(self), (dict(self),))


def frozen(message: Mapping[str, Any]) -> FrozenMessage:
    """`message` as a `FrozenMessage` (itself when it is one)."""
    return message if type(message) is FrozenMessage else FrozenMessage(message)


NAMELESS_TOOL = "tool_name_missing"
"""The name a tool call that came without one is stored under: a request may not carry a call
without a name (the endpoint would refuse every later request of the session), and the model is
told of it as that call's result (`tools/belt.py`), like any other call it got wrong."""

REPLACEMENT = "\ufffd"
"""What a lone UTF-16 surrogate becomes: the Unicode replacement character."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model sent it."""

    id: str
    name: str
    arguments: str
    """The raw JSON text; the agent loop validates it and tells the model when it is malformed."""

    def to_openai(self) -> dict[str, Any]:
        """The call in an assistant message's `tool_calls`."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Usage:
    """Token counts of one model call."""

    prompt_tokens: int
    """The whole prompt, cached part included."""
    completion_tokens: int
    cached_tokens: int | None
    """Prompt tokens served from the server's prefix cache; None when the server does not say."""
    estimated: bool
    """True when the server reported no usage and the counts are bytes ÷ 3.5."""


@dataclass(frozen=True)
class Reply:
    """What the model answered to one request."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    """OpenAI's vocabulary: `stop`, `tool_calls`, `length`, … (Anthropic's reasons are mapped)."""

    def message(self) -> dict[str, Any]:
        """The assistant message to store: content is "" (never null) when there are tool calls."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message


def estimate_tokens(text_or_bytes_len: str | bytes | int) -> int:
    """Tokens in a text (or a number of UTF-8 bytes): bytes ÷ 3.5, rounded up."""
    if isinstance(text_or_bytes_len, str):
        size = len(text_or_bytes_len.encode("utf-8", "surrogatepass"))
    elif isinstance(text_or_bytes_len, bytes):
        size = len(text_or_bytes_len)
    else:
        size = text_or_bytes_len
    return (2 * max(size, 0) + 6) // 7


def cached_tokens(usage: Mapping[str, Any]) -> int | None:
    """Cached prompt tokens in any of the three usage shapes, or None when the server says nothing.

    OpenAI `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`, DeepSeek
    `prompt_cache_hit_tokens`.
    """
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and (value := as_int(details.get("cached_tokens"))) is not None:
        return value
    for key in ("cache_read_input_tokens", "prompt_cache_hit_tokens"):
        if (value := as_int(usage.get(key))) is not None:
            return value
    return None


def as_int(value: Any) -> int | None:
    """`value` when it is a JSON integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def clean_text(text: str) -> tuple[str, int]:
    """`text` with its UTF-16 surrogates resolved, and how many lone ones were replaced.

    A surrogate pair that arrived as two code points (an emoji escape split across two pieces
    and joined as text) becomes its character; a lone surrogate, which no UTF-8 encoder accepts,
    becomes U+FFFD. Text without surrogates is returned as is (the common case costs one scan).
    """
    if _SURROGATE.search(text) is None:
        return text, 0
    joined = _PAIR.sub(lambda pair: _join_pair(pair[0]), text)
    lone = len(_SURROGATE.findall(joined))
    return (_SURROGATE.sub(REPLACEMENT, joined) if lone else joined), lone


def clean_value(value: Any) -> tuple[Any, int]:
    """A JSON value with `clean_text` applied to every string in it (keys included), and how
    many lone surrogates were replaced. Values that need no repair are returned as they are."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        replaced = 0
        items = []
        changed = False
        for key, item in value.items():
            new_key, lone_key = clean_text(key) if isinstance(key, str) else (key, 0)
            new_item, lone_item = clean_value(item)
            replaced += lone_key + lone_item
            changed = changed or new_key is not key or new_item is not item
            items.append((new_key, new_item))
        return (dict(items) if changed else value), replaced
    if isinstance(value, list):
        cleaned = [clean_value(item) for item in value]
        replaced = sum(lone for _, lone in cleaned)
        if all(new is old for (new, _), old in zip(cleaned, value, strict=True)):
            return value, replaced
        return [new for new, _ in cleaned], replaced
    return value, 0


def _join_pair(pair: str) -> str:
    return pair.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
