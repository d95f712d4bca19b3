"""Request bodies as they go on the wire, each stored message encoded once.

A long session sends the same messages again on every call: re-encoding a million tokens of
history to JSON cost about 22 ms a call, so a session grew O(n²). `RequestEncoder` keeps each
message's bytes and joins them, so a call costs the new messages plus one join.

The cache is keyed on the message object, which the stored history never mutates: the context
layers make new dicts for what they rewrite, and a new dict is a new entry. Each entry keeps its
message alive (so its `id` cannot be reused while cached) and the object of its `content`, which
is checked on every hit as a cheap guard against a mutation that would break that rule. Entries
belong to a conversation (the object of the request's first message, the session's system
prompt) and hold exactly the messages of that conversation's last request: a message that
leaves the request leaves the cache. A few conversations are kept, the least recent dropped.

The bytes are those of `json.dumps(body, ensure_ascii=False, separators=(",", ":"))`, so a
request is a byte-identical prefix of the next one wherever the messages are (prompt caching).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from lsp_agent.messages import Message, clean_value

log = logging.getLogger(__name__)

CONVERSATIONS = 8
"""Conversations whose messages stay encoded: sessions running side by side, compactions."""

_Entry = tuple[Message, Any, bytes]
"""A message, the object of its `content` when it was encoded, and its bytes as sent."""


class RequestEncoder:
    """Encodes the messages of requests, reusing the bytes of messages sent before."""

    def __init__(self, conversations: int = CONVERSATIONS) -> None:
        self.conversations = conversations
        """How many conversations keep their encoded messages."""
        self.encoded = 0
        """Messages encoded so far (the rest were reused): what the tests and benchmarks read."""
        self._cache: OrderedDict[int, tuple[Message, dict[int, _Entry]]] = OrderedDict()
        """Per conversation (keyed by its first message): its first message, kept alive, and
        the entries of its last request by message id."""

    def messages(self, messages: Sequence[Message]) -> bytes:
        """The JSON array of `messages`, as sent."""
        if not messages:
            return b"[]"
        first = messages[0]
        _, old = self._cache.pop(id(first), (first, {}))
        new: dict[int, _Entry] = {}
        parts = []
        for message in messages:
            entry = old.get(id(message))
            if entry is None or entry[0] is not message or message.get("content") is not entry[1]:
                entry = (message, message.get("content"), self._encode(message))
            new[id(message)] = entry
            parts.append(entry[2])
        self._cache[id(first)] = (first, new)
        while len(self._cache) > self.conversations:
            self._cache.popitem(last=False)
        return b"[" + b",".join(parts) + b"]"

    def _encode(self, message: Message) -> bytes:
        self.encoded += 1
        sent = outgoing(message)
        try:
            return dumps(sent)
        except UnicodeEncodeError:
            # A lone surrogate from a source that did not repair it: sent repaired, never refused,
            # so that one bad message cannot make every later request of the session fail.
            cleaned, lone = clean_value(sent)
            log.warning(
                "a %s message held %d lone surrogate(s); sent as U+FFFD", sent.get("role"), lone
            )
            return dumps(cleaned)


def outgoing(message: Message) -> Message:
    """The message as sent: an assistant's null content becomes "" (llama-cpp-python 500s)."""
    if message.get("role") == "assistant" and message.get("content") is None:
        return {**message, "content": ""}
    return message


def json_object(members: Iterable[tuple[str, bytes]]) -> bytes:
    """A JSON object from its members' names and encoded values, in order."""
    return b"{" + b",".join(dumps(name) + b":" + value for name, value in members) + b"}"


def dumps(value: Any) -> bytes:
    """`value` as it goes on the wire: compact JSON in UTF-8, non-ASCII characters as they are."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
