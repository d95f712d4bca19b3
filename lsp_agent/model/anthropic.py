"""Anthropic's Messages API (`/v1/messages`), streamed, with prompt-cache breakpoints."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import httpx

from lsp_agent.messages import Message, as_int
from lsp_agent.model import API_KEY_SETTING
from lsp_agent.model.encoding import (
    CONVERSATIONS,
    JOIN_AFTER,
    Recent,
    Seen,
    dumps,
    encode_object,
    frozen_from,
    json_parts,
    kept,
)
from lsp_agent.model.http import HTTPProvider
from lsp_agent.model.stream import (
    Draft,
    Nonsense,
    Pacer,
    ReplayingSink,
    StreamBroken,
    quote,
)

log = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
CACHE_BREAKPOINT: dict[str, str] = {"type": "ephemeral"}


def to_anthropic(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The `system`, `messages` and `tools` of an Anthropic request for OpenAI-format messages.

    Leading system messages become the `system` parameter with a cache breakpoint; assistant
    tool calls become `tool_use` blocks and tool messages `tool_result` blocks; consecutive
    messages of one role are merged (so tool results and the reminder after them form one user
    message). The last two content blocks carry breakpoints too: the last is the late-injected
    reminder, the one before it ends the stored history, the prefix the next request shares.
    """
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks_of(message, opened=bool(out))
        if role == "system":
            system += blocks
        elif role is not None:
            _append(out, role, blocks)
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [dict(_CONTINUED)]})

    if system:
        system[-1]["cache_control"] = dict(CACHE_BREAKPOINT)
    blocks = [block for message in out for block in message["content"]]
    for block in blocks[-2:]:
        block["cache_control"] = dict(CACHE_BREAKPOINT)

    request: dict[str, Any] = {"messages": out}
    if system:
        request["system"] = system
    if tools:
        request["tools"] = [_anthropic_tool(tool) for tool in tools]
    return request


_CONTINUED = {"type": "text", "text": "(continued)"}
"""The text of the user message put first when the history starts with the assistant's."""


def _blocks_of(message: Message, *, opened: bool) -> tuple[str | None, list[dict[str, Any]]]:
    """Where an OpenAI-format message goes in an Anthropic request ("system", or the role of
    the message it joins; None for a role Anthropic has no place for) and its content blocks.
    `opened` tells whether a message came before: a system message after one is the user's."""
    role = message.get("role")
    content = message.get("content")
    if role in ("system", "developer"):
        text = _text_of(content)
        if not opened:
            return "system", [{"type": "text", "text": text}] if text else []
        return "user", _text_blocks(text)
    if role == "user":
        return "user", _user_blocks(content)
    if role == "assistant":
        return "assistant", _assistant_blocks(message)
    if role == "tool":
        return "user", [_tool_result(message)]
    return None, []


class AnthropicEncoder:
    """The `messages` and `system` members of Anthropic requests as sent, each stored message
    converted and encoded once.

    `to_anthropic` converts a whole history: at a 1M-token history that is 23 ms per call with
    old results stubbed and 59 ms sent whole, on the event loop, so a long session grew O(n²).
    This keeps, per conversation (the object of its first message, as `RequestEncoder` does),
    the encoded content blocks of the messages it converted, grouped into the API's messages
    (consecutive messages of one role merged), those groups that can no longer change joined.
    A request that is the previous one with its last message (the reminder) replaced converts
    only its new messages; one whose history the layers rewrote is grouped again, reusing the
    blocks of every message it still holds. The last message is always converted apart from
    what is kept: it is the reminder, which the next request replaces.

    The bytes are `dumps` of what `to_anthropic` gives (tests hold them to it): the breakpoints
    go on the system prompt and the last two blocks, so the history's blocks are encoded
    without one and the tail's are marked as they are sent.
    """

    def __init__(self, conversations: int = CONVERSATIONS) -> None:
        self.conversations: Recent[_Grouped] = Recent(conversations)
        self.converted = 0
        """Messages converted so far (the rest were reused): what the tests read."""

    async def members(
        self, messages: Sequence[Message], pacer: Pacer | None = None
    ) -> list[tuple[str, bytes | list[bytes]]]:
        """The request's `messages` member, in parts, then `system` when there is one."""
        pacer = pacer or Pacer()
        if not messages:
            return [("messages", b"[]")]
        old = self.conversations.take(messages)
        same = kept(old, messages) if old is not None else 0
        if old is not None and same >= old.covered and len(messages) > old.covered:
            state = old  # the previous request, its last message replaced
            del state.contents[state.covered :]
            state.messages = list(messages)
        else:
            state = _Grouped(messages)
        places = {} if state is old or old is None else old.places(old.covered)
        for message in messages[state.covered : -1]:
            await state.add(message, self._record(message, state, old, places), pacer)
            if pacer.due():
                await pacer.rest()
        state.covered = len(messages) - 1
        last = messages[-1]
        record = self._record(last, state, old, places)
        if record is None:
            record = await _converted(last, bool(state.groups), pacer)
        state.contents.append(last.get("content"))
        state.frozen_count = frozen_from(
            messages, min(old.frozen_count, same) if old is not None else 0
        )
        members = state.members(record)
        state.join()
        self.conversations.keep(messages, state)
        return members

    def _record(
        self,
        message: Message,
        state: _Grouped,
        old: _Grouped | None,
        places: dict[int, int],
    ) -> _Record | None:
        """The blocks `old` made of `message`, if it holds it unchanged with as much before it;
        None when it must be converted (counted in `converted`)."""
        place = places.get(id(message))
        if old is not None and place is not None and old.same(place, message):
            record = old.records[place]
            if record[2] == bool(state.groups):
                return record
        self.converted += 1
        return None


_Record = tuple[str | None, list[bytes], bool]
"""What a message became: where it goes (see `_blocks_of`), its encoded content blocks, and
whether a message came before it (a system message's place depends on that)."""


class _Grouped(Seen):
    """What a conversation's last request converted: all its messages but the last."""

    def __init__(self, messages: Sequence[Message]) -> None:
        super().__init__(messages)
        self.covered = 0
        """How many of `messages` the groups hold (all but the last, after a request)."""
        self.records: list[_Record] = []
        """Per message held, what it became."""
        self.system: list[bytes] = []
        """The `system` member's blocks."""
        self.groups: list[tuple[str, list[bytes]]] = []
        """The API's messages: a role and its blocks. Only the last one can still grow."""
        self.joined = b""
        """The first `joined_count` groups' bytes, each followed by its comma."""
        self.joined_count = 0

    async def add(self, message: Message, record: _Record | None, pacer: Pacer) -> None:
        """Convert `message` (or take what it became before) into the groups."""
        if record is None:
            record = await _converted(message, bool(self.groups), pacer)
        self.records.append(record)
        self.contents.append(message.get("content"))
        role, blocks, _ = record
        if role == "system":
            self.system += blocks
        elif role is not None and blocks:
            if self.groups and self.groups[-1][0] == role:
                self.groups[-1][1].extend(blocks)
            else:
                self.groups.append((role, list(blocks)))

    def members(self, last: _Record) -> list[tuple[str, bytes | list[bytes]]]:
        """The `messages` and `system` members with `last` after the groups."""
        tail = [(role, list(blocks)) for role, blocks in self.groups[self.joined_count :]]
        system = list(self.system)
        role, blocks, _ = last
        if role == "system":
            system += blocks
        elif role is not None and blocks:
            if tail and tail[-1][0] == role:
                tail[-1][1].extend(blocks)
            else:
                tail.append((role, list(blocks)))
        first = self.groups[0][0] if self.joined_count else (tail[0][0] if tail else "user")
        parts = [b"["]
        if first != "user":
            if self.joined_count:
                parts += [*_group_parts("user", [_CONTINUED_BYTES]), b","]
            else:
                tail.insert(0, ("user", [_CONTINUED_BYTES]))
        parts.append(self.joined)
        _mark_last_two(tail)
        for group in tail:
            parts += _group_parts(*group)
            parts.append(b",")
        parts[-1] = b"]"
        members: list[tuple[str, bytes | list[bytes]]] = [("messages", parts)]
        if system:
            system[-1] = _marked(system[-1])
            members.append(("system", b"[" + b",".join(system) + b"]"))
        return members

    def join(self) -> None:
        """Join the groups that trail the joined run by `JOIN_AFTER`, all but the last two
        (the breakpoints of the next request may fall in them)."""
        end = len(self.groups) - 2
        if end - self.joined_count > JOIN_AFTER:
            parts = [self.joined]
            for group in self.groups[self.joined_count : end]:
                parts += _group_parts(*group)
                parts.append(b",")
            self.joined = b"".join(parts)
            self.joined_count = end


async def _converted(message: Message, opened: bool, pacer: Pacer) -> _Record:
    role, blocks = _blocks_of(message, opened=opened)
    encoded = [await encode_object(block, pacer, message.get("role")) for block in blocks]
    return role, encoded, opened


def _group_parts(role: str, blocks: list[bytes]) -> list[bytes]:
    """An API message's bytes, in parts: a large block is not copied into a string with it."""
    parts = [_ROLE_OPENERS.get(role) or b'{"role":' + dumps(role) + b',"content":[']
    for block in blocks:
        parts += (block, b",")
    parts[-1] = b"]}"
    return parts


def _mark_last_two(groups: list[tuple[str, list[bytes]]]) -> None:
    """Put the breakpoint on the last two blocks, as `to_anthropic` does."""
    marked = 0
    for _, blocks in reversed(groups):
        for index in range(len(blocks) - 1, -1, -1):
            if marked == 2:
                return
            blocks[index] = _marked(blocks[index])
            marked += 1


def _marked(block: bytes) -> bytes:
    """An encoded block (a JSON object) with the breakpoint as its last member."""
    return block[:-1] + _BREAKPOINT_MEMBER


_BREAKPOINT_MEMBER = b',"cache_control":' + dumps(CACHE_BREAKPOINT) + b"}"
_CONTINUED_BYTES = dumps(_CONTINUED)
_ROLE_OPENERS = {
    role: b'{"role":' + dumps(role) + b',"content":[' for role in ("user", "assistant")
}


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Append `blocks` to `out` as a message of `role`, merged into the last one if it has
    that role (the API wants the roles to alternate)."""
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's text and its tool calls as `tool_use` blocks."""
    blocks = _text_blocks(_text_of(message.get("content")))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id", ""),
                "name": function.get("name", ""),
                "input": _json_object(function.get("arguments")),
            }
        )
    return blocks


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    """A tool message as a `tool_result` block."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", "")}
    if text := _text_of(message.get("content")):
        result["content"] = text
    return result


class AnthropicProvider(HTTPProvider):
    """Anthropic's Messages API (`/v1/messages`), streamed, with prompt-cache breakpoints."""

    name = "anthropic"
    api_key_hint = f"{API_KEY_SETTING} (or ANTHROPIC_API_KEY)"
    stream_shape = "a Messages API event"
    reply_shape = "an Anthropic Messages reply"
    api_hint = "Anthropic's is https://api.anthropic.com"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        max_tokens: int = 8192,
        **options: Any,
    ) -> None:
        super().__init__(base_url, model, api_key, **options)
        root = self.base_url
        self._root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.max_tokens = max_tokens
        """Anthropic requires a cap on the reply's length."""
        self._encoder = AnthropicEncoder()
        self._tools: tuple[list[dict[str, Any]], bytes] = ([], b"[]")

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _models_url(self) -> str:
        return f"{self._root}/v1/models?limit=1000"

    async def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: ReplayingSink
    ) -> Draft:
        body: list[tuple[str, bytes | list[bytes]]] = [
            ("model", dumps(self.model)),
            ("max_tokens", dumps(self.max_tokens)),
            ("stream", b"true"),
            *await self._encoder.members(messages),
        ]
        if tools:
            body.append(("tools", self._encoded_tools(tools)))

        async def read(response: httpx.Response) -> Draft:
            return await self._read_stream(response, sink)

        return await self._post(
            f"{self._root}/v1/messages", json_parts(body), read, with_tools=bool(tools)
        )

    def _encoded_tools(self, tools: list[dict[str, Any]]) -> bytes:
        last, encoded = self._tools
        if tools is not last and tools != last:
            encoded = dumps([_anthropic_tool(tool) for tool in tools])
        self._tools = (tools, encoded)
        return encoded

    async def _read_stream(self, response: httpx.Response, sink: ReplayingSink) -> Draft:
        draft = await self._read_events(response, sink, self._feed)
        usage = draft.usage or {}
        draft.usage = dict(usage)
        if "input_tokens" in usage:
            # Anthropic's input_tokens leaves out the cached part; our prompt_tokens is the whole.
            draft.usage["prompt_tokens"] = sum(
                usage.get(key, 0)
                for key in (
                    "input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                )
            )
        if "output_tokens" in usage:
            draft.usage["completion_tokens"] = usage["output_tokens"]
        for call in draft.calls.values():
            if not "".join(call.arguments).strip():
                call.arguments[:] = ["{}"]
        return draft

    def _feed(self, draft: Draft, data: str, sink: ReplayingSink) -> None:
        """One event of the stream; usage figures are gathered in `draft.usage`."""
        draft.events += 1
        if not draft.first:
            draft.first = data[:200]
        try:
            event = json.loads(data)
        except ValueError:
            log.warning("skipping a stream line that is not JSON: %.80s", data)
            return
        if not isinstance(event, dict) or event.get("type") not in _EVENTS:
            return
        draft.understood += 1
        if draft.usage is None:
            draft.usage = {}
        kind = event["type"]
        if kind == "message_start":
            draft.usage.update(_numbers(_object(event.get("message")).get("usage")))
        elif kind == "content_block_start":
            _block_start(draft, event, sink)
        elif kind == "content_block_delta":
            _block_delta(draft, event, sink)
        elif kind == "message_delta":
            reason = _object(event.get("delta"), "delta").get("stop_reason")
            if reason:
                draft.finish_reason = _STOP_REASONS.get(reason, reason)
            draft.usage.update(_numbers(event.get("usage")))
        elif kind == "message_stop":
            draft.done = True
        elif kind == "error":
            excerpt = self._excerpt(json.dumps(event).encode())
            raise StreamBroken(f"the server reported an error mid-reply: {excerpt}")


_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)
"""The event types of a Messages stream."""


def _block_start(draft: Draft, event: dict[str, Any], sink: ReplayingSink) -> None:
    """A content block begins: text to stream, or a tool call with its id and name."""
    block = _object(event.get("content_block"), "content_block")
    if block.get("type") == "text" and block.get("text"):
        sink.feed(draft.add_text(str(block["text"])))
    elif block.get("type") == "tool_use":
        call = draft.call(_index(event))
        call.id, call.name = str(block.get("id", "")), str(block.get("name", ""))
        if block.get("input"):
            call.arguments.append(json.dumps(block["input"]))


def _block_delta(draft: Draft, event: dict[str, Any], sink: ReplayingSink) -> None:
    """More of a content block: text to stream, or a piece of a tool call's arguments."""
    delta = _object(event.get("delta"), "delta")
    if delta.get("type") == "text_delta" and delta.get("text"):
        sink.feed(draft.add_text(str(delta["text"])))
    elif delta.get("type") == "input_json_delta":
        draft.call(_index(event)).arguments.append(str(delta.get("partial_json", "")))


def _object(value: Any, name: str | None = None) -> dict[str, Any]:
    """An event's member that must be an object: {} when absent; `Nonsense` when it is not."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Nonsense(
            f"sent an event whose `{name or 'message'}` is {quote(value)}, not an object"
        )
    return value


def _index(event: dict[str, Any]) -> int:
    """The content block an event is about; `Nonsense` when it is not a whole number."""
    index = event.get("index", 0)
    if as_int(index) is None or index < 0:
        raise Nonsense(
            f"sent a content-block event whose index is {quote(index)}, not a whole number"
        )
    return int(index)


_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or tool
    converted: dict[str, Any] = {
        "name": function.get("name", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        converted["description"] = function["description"]
    return converted


def _text_of(content: Any) -> str:
    """The text of an OpenAI message content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _text_blocks(text: str) -> list[dict[str, Any]]:
    """A text block, or none: Anthropic refuses empty and whitespace-only text blocks."""
    return [{"type": "text", "text": text}] if text.strip() else []


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return _text_blocks(_text_of(content))
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.extend(_text_blocks(str(part.get("text", ""))))
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            match = re.match(r"data:([^;]+);base64,(.*)", url, re.S)
            if match:
                source = {"type": "base64", "media_type": match[1], "data": match[2]}
            else:
                source = {"type": "url", "url": url}
            blocks.append({"type": "image", "source": source})
    return blocks


def _json_object(arguments: Any) -> dict[str, Any]:
    """Tool-call arguments as an object; malformed JSON becomes {} (the model was told already)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _numbers(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    return {key: value for key, value in usage.items() if as_int(value) is not None}
