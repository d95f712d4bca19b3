"""Anthropic's Messages API (`/v1/messages`), streamed, with prompt-cache breakpoints."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from lsp_agent.messages import as_int
from lsp_agent.model import API_KEY_SETTING, wire
from lsp_agent.model.encoding import dumps
from lsp_agent.model.http import HTTPProvider
from lsp_agent.model.stream import Draft, Nonsense, ReplayingSink, StreamBroken, quote

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
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            text = _text_of(content)
            if not out:
                if text:
                    system.append({"type": "text", "text": text})
            else:
                _append(out, "user", _text_blocks(text))
        elif role == "user":
            _append(out, "user", _user_blocks(content))
        elif role == "assistant":
            _append(out, "assistant", _assistant_blocks(message))
        elif role == "tool":
            _append(out, "user", [_tool_result(message)])
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})

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
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "stream": True}
        body.update(to_anthropic(messages, tools))

        async def read(response: wire.Response) -> Draft:
            return await self._read_stream(response, sink)

        return await self._post(
            f"{self._root}/v1/messages", dumps(body), read, with_tools=bool(tools)
        )

    async def _read_stream(self, response: wire.Response, sink: ReplayingSink) -> Draft:
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
