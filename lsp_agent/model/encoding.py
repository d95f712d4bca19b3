"""Request bodies as they go on the wire, each stored message encoded once.

A long session sends the same messages again on every call: re-encoding a million tokens of
history to JSON cost about 22 ms a call, so a session grew O(n²). `RequestEncoder` keeps each
message's bytes and joins them, so a call costs the new messages plus one join.

The cache is keyed on the message object, which the stored history never mutates: the context
layers make new dicts for what they rewrite, and a new dict is a new entry. The cache keeps each
message alive (so its `id` cannot be reused while cached) and the object of its `content`, which
is checked on every hit as a cheap guard against a mutation that would break that rule. Entries
belong to a conversation (the object of the request's first message, the session's system
prompt) and hold exactly the messages of that conversation's last request: a message that
leaves the request leaves the cache. A few conversations are kept, the least recent dropped.

The common request is the previous one with the reminder replaced by new messages: its messages
are the same objects, in the same places, up to the new ones, and are matched by identity
without a lookup. A request whose middle was rewritten (a new decision of the layers gives its
stubs as new dicts) is matched message by message, a stub by its text.

The bytes are those of `json.dumps(body, ensure_ascii=False, separators=(",", ":"))`, so a
request is a byte-identical prefix of the next one wherever the messages are (prompt caching).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import operator
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from lsp_agent.messages import FrozenMessage, Message, clean_value
from lsp_agent.model.stream import Pacer

log = logging.getLogger(__name__)

CONVERSATIONS = 8
"""Conversations whose messages stay encoded: sessions running side by side, compactions."""
JOIN_AFTER = 32
"""How many messages may follow the joined run of a conversation's bytes before it is joined
again (see `_Conversation.parts`)."""
SLICE_CHARS = 1 << 18
"""A string member longer than this is encoded in slices of this many characters."""
LARGE_PART = 64 * 1024
"""A part of a body this long or longer is sent as it is, not joined with its neighbours (see
`json_parts`)."""

_TextKey = tuple[tuple[str, Any], ...]
_S = TypeVar("_S", bound="Seen")


class Recent(Generic[_S]):
    """What each conversation's last request left (keyed by the object of its first message,
    the session's system prompt), the `size` most recently used kept."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[int, _S] = OrderedDict()

    def take(self, messages: Sequence[Message]) -> _S | None:
        """The conversation of `messages`, out of the cache until `keep` puts it back."""
        return self._kept.pop(id(messages[0]), None)

    def keep(self, messages: Sequence[Message], seen: _S) -> None:
        self._kept[id(messages[0])] = seen
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)


class Seen:
    """The messages of a conversation's last request, as `kept` compares the next one with."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = list(messages)
        """The request's messages, kept alive: their `id`s key nothing else while cached."""
        self.contents: list[Any] = []
        """The object each message's `content` was when it was encoded (the mutation guard)."""
        self.frozen_count = 0
        """How many of the first `messages` are frozen (see `kept`)."""

    def same(self, index: int, message: Message) -> bool:
        """Whether `message` is the one this request had at `index`, unchanged."""
        return self.messages[index] is message and message.get("content") is self.contents[index]

    def places(self, end: int | None = None) -> dict[int, int]:
        """Where each of the first `end` messages stood, by its `id`."""
        return {id(message): index for index, message in enumerate(self.messages[:end])}


class _Conversation(Seen):
    """What a conversation's last request encoded, message by message."""

    def __init__(self, messages: Sequence[Message]) -> None:
        super().__init__(messages)
        self.encoded: list[bytes] = []
        """Each message's bytes as sent."""
        self.by_text: dict[_TextKey, bytes] = {}
        """Rewritten messages made only of text, by their members (see `_text_key`)."""
        self.joined = b"["
        """The opening bracket and the first `joined_count` messages' bytes, each followed by
        its comma, as one string: the parts of the next body start with it."""
        self.joined_count = 0

    def parts(self) -> list[bytes]:
        """The JSON array of the messages, in parts: the joined run, then one part per message
        after it. The run is joined again once it trails by `JOIN_AFTER` messages, all but the
        last (the reminder, which the next request replaces): a thousand parts cost more to
        list than the copy of their bytes, once, that joining them costs."""
        encoded = self.encoded
        # The joined run is still this request's start: a conversation is kept as it is only
        # when its previous request's messages, but the last, begin this one (`messages`).
        start = self.joined_count
        if not start < len(encoded):
            start, self.joined, self.joined_count = 0, b"[", 0
        tail = itertools.chain.from_iterable(
            zip(itertools.islice(encoded, start, None), _COMMAS, strict=False)
        )
        parts = [self.joined, *tail]
        if len(encoded) - start > JOIN_AFTER:
            self.joined = b"".join(parts[:-2])
            self.joined_count = len(encoded) - 1
        parts[-1] = b"]"
        return parts


class RequestEncoder:
    """Encodes the messages of requests, reusing the bytes of messages sent before."""

    def __init__(self, conversations: int = CONVERSATIONS) -> None:
        self.conversations: Recent[_Conversation] = Recent(conversations)
        """The conversations that keep their encoded messages."""
        self.encoded = 0
        """Messages encoded so far (the rest were reused): what the tests and benchmarks read."""

    async def messages(
        self, messages: Sequence[Message], pacer: Pacer | None = None
    ) -> list[bytes]:
        """The JSON array of `messages`, as sent, in parts (for `json_object` to join once).

        The work is done in slices (`pacer`): a resumed session's first request encodes
        megabytes, and a 20 MB message is encoded a quarter of a megabyte at a time.
        """
        pacer = pacer or Pacer()
        if not messages:
            return [b"[]"]
        old = self.conversations.take(messages) or _Conversation(())
        same = kept(old, messages)
        rewritten = same < len(old.messages) - 1  # more than the old reminder was replaced
        if rewritten:
            new = _Conversation(messages)
            new.contents = old.contents[:same]
            new.encoded = old.encoded[:same]
            places = old.places()
        else:
            # The previous request with its reminder replaced: its lists are cut where the new
            # messages start rather than copied (at a thousand messages a copy touches more
            # memory than the new messages need).
            new, places = old, {}
            new.messages = list(messages)
            del new.contents[same:], new.encoded[same:]
        for message in messages[same:]:
            place = places.get(id(message))
            if place is not None and old.same(place, message):
                encoded = old.encoded[place]
            elif rewritten:
                encoded = await self._rewritten(message, old, new, pacer)
            else:
                encoded = await self._encode(message, pacer)
            new.contents.append(message.get("content"))
            new.encoded.append(encoded)
            if pacer.due():
                await pacer.rest()
        new.frozen_count = frozen_from(messages, min(old.frozen_count, same))
        self.conversations.keep(messages, new)
        return new.parts()

    async def _rewritten(
        self, message: Message, old: _Conversation, new: _Conversation, pacer: Pacer
    ) -> bytes:
        """The bytes of a message met in a rewritten request: a stub the layers made again
        from the same text is found by that text (a few hundred characters to hash instead of
        a message to encode)."""
        key = _text_key(message)
        if key is None:
            return await self._encode(message, pacer)
        encoded = old.by_text.get(key)
        if encoded is None:
            encoded = await self._encode(message, pacer)
        new.by_text[key] = encoded
        return encoded

    async def _encode(self, message: Message, pacer: Pacer) -> bytes:
        self.encoded += 1
        return await encode_object(outgoing(message), pacer, message.get("role"))


async def encode_object(value: dict[str, Any], pacer: Pacer, role: Any) -> bytes:
    """The bytes of one object of a request (a message, a content block), a huge string member
    encoded in slices (`pacer`); a lone surrogate is sent as U+FFFD, never refused, so that one
    bad message from a source that did not repair it cannot make every later request of the
    session fail (`role` names the message in the log)."""
    try:
        if any(isinstance(v, str) and len(v) > SLICE_CHARS for v in value.values()):
            return await _sliced(value, pacer)
        return dumps(value)
    except UnicodeEncodeError:
        cleaned, lone = clean_value(value)
        log.warning("a %s message held %d lone surrogate(s), sent as U+FFFD", role, lone)
        return dumps(cleaned)


async def _sliced(message: Message, pacer: Pacer) -> bytes:
    """A message with a huge string member, that string encoded `SLICE_CHARS` at a time (JSON
    escapes each character on its own, so the slices join into the whole's bytes)."""
    members = []
    for name, value in message.items():
        if not (isinstance(value, str) and len(value) > SLICE_CHARS):
            members.append((name, dumps(value)))
            continue
        pieces = [b'"']
        for start in range(0, len(value), SLICE_CHARS):
            piece = value[start : start + SLICE_CHARS]
            # An ASCII piece encodes the same either way, twice as fast with ensure_ascii.
            encoded = json.dumps(piece).encode() if piece.isascii() else dumps(piece)
            pieces.append(encoded[1:-1])
            if pacer.due():
                await pacer.rest()
        pieces.append(b'"')
        members.append((name, b"".join(pieces)))
    return json_object(members)


def kept(old: Seen, messages: Sequence[Message]) -> int:
    """How many leading `messages` are those `old` had in the same places, unchanged.

    A thousand-message history is checked at every call, so the check is one C-level pass over
    the messages' identities, which stops at the first difference only when there is one (the
    common request has none). Frozen messages (the history's, the layers' stubs) cannot change,
    and the same object stays frozen, so the contents of those `old` knew frozen are not read
    again; the others' are checked against the objects they held when encoded.
    """
    same = min(len(messages), len(old.messages))
    # No slice of `messages`: a list of a thousand messages made at every call is what a
    # collection of the young objects meets, and it reads every message's header to do so.
    # The last one is looked at on its own: it is the old reminder, which a new request has
    # replaced, and the pass over the others stops nowhere.
    if all(map(operator.is_, messages, itertools.islice(old.messages, max(same - 1, 0)))):
        if same and messages[same - 1] is not old.messages[same - 1]:
            same -= 1
    else:
        same = list(map(operator.is_, messages, old.messages)).index(False)
    checked = min(old.frozen_count, same)
    if checked == same:
        return same
    contents = map(_CONTENT, itertools.islice(messages, checked, same))
    with contextlib.suppress(ValueError):
        return checked + list(
            map(operator.is_, contents, itertools.islice(old.contents, checked, same))
        ).index(False)
    return same


def frozen_from(messages: Sequence[Message], start: int) -> int:
    """How many leading `messages` are frozen, knowing the first `start` are (the loop runs
    over the new messages of a call: the run ends at the reminder, which is not)."""
    for index in range(start, len(messages)):
        if type(messages[index]) is not FrozenMessage:
            return index
    return len(messages)


_CONTENT = operator.methodcaller("get", "content")
_COMMAS = itertools.repeat(b",")


def _text_key(message: Message) -> _TextKey | None:
    """A message's members when all are text (a tool result, a prompt, a stub), else None."""
    items = tuple(message.items())
    if all(type(value) is str for _, value in items):
        return items
    return None


def outgoing(message: Message) -> Message:
    """The message as sent: an assistant's null content becomes "" (llama-cpp-python 500s)."""
    if message.get("role") == "assistant" and message.get("content") is None:
        return {**message, "content": ""}
    return message


def json_object(members: Iterable[tuple[str, bytes | list[bytes]]]) -> bytes:
    """A JSON object from its members' names and encoded values (bytes, or parts of bytes), in
    order, joined in one copy: a body of megabytes is not copied once per level."""
    return b"".join(_object_parts(members))


def json_parts(members: Iterable[tuple[str, bytes | list[bytes]]]) -> list[bytes]:
    """The JSON object of `json_object` as the parts it is sent in: each part of `LARGE_PART`
    bytes or more as it is, the small ones between them joined. The history's joined run is
    such a part: a request body of megabytes goes to the socket from where its bytes already
    are, instead of being copied into one string at every call first."""
    parts: list[bytes] = []
    small: list[bytes] = []
    for part in _object_parts(members):
        if len(part) < LARGE_PART:
            small.append(part)
            continue
        if small:
            parts.append(b"".join(small))
            small = []
        parts.append(part)
    if small:
        parts.append(b"".join(small))
    return parts


def _object_parts(members: Iterable[tuple[str, bytes | list[bytes]]]) -> list[bytes]:
    parts = [b"{"]
    for name, value in members:
        parts.append(_member_name(name))
        if isinstance(value, bytes):
            parts.append(value)
        else:
            parts += value
        parts.append(b",")
    if len(parts) == 1:
        return [b"{}"]
    parts[-1] = b"}"
    return parts


@functools.lru_cache(maxsize=64)
def _member_name(name: str) -> bytes:
    """`"name":`, encoded once: a body's member names are the same few at every call."""
    return dumps(name) + b":"


def dumps(value: Any) -> bytes:
    """`value` as it goes on the wire: compact JSON in UTF-8, non-ASCII characters as they are."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
