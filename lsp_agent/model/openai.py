"""Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, Ollama, vLLM, llama.cpp, …)."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import httpx

from lsp_agent.model import body
from lsp_agent.model.encoding import RequestEncoder, dumps, json_parts
from lsp_agent.model.faults import StreamOptionsRefused, StreamWithToolsRefused
from lsp_agent.model.http import HTTPProvider
from lsp_agent.model.stream import (
    Draft,
    Nonsense,
    Pacer,
    ReplayingSink,
    StreamBroken,
    feed_call,
    quote,
)

log = logging.getLogger(__name__)

INCLUDE_USAGE = dumps({"include_usage": True})


class OpenAIProvider(HTTPProvider):
    """Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, Ollama, vLLM, llama.cpp, …)."""

    name = "openai"
    stream_shape = "a chat-completion chunk with `choices`"
    reply_shape = "a chat completion"
    api_hint = "OpenAI-compatible APIs usually end in /v1"

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, **options: Any
    ) -> None:
        super().__init__(base_url, model, api_key, **options)
        self.stream_with_tools = True
        """False once the server refused to stream a request with tools; later ones are not."""
        self.stream_options = True
        """False once the server refused `stream_options`; usage is then estimated."""
        self._encoder = RequestEncoder()
        """Each message's bytes, kept while the conversation keeps sending it."""
        self._tools: tuple[list[dict[str, Any]], bytes] = ([], b"[]")
        """The tools last sent and their bytes: the same list at nearly every call."""
        self._model_json = dumps(model)

    def _encoded_tools(self, tools: list[dict[str, Any]]) -> bytes:
        last, encoded = self._tools
        if tools is not last and tools != last:
            encoded = dumps(tools)
        self._tools = (tools, encoded)
        return encoded

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _models_url(self) -> str:
        return f"{self.base_url}/models"

    async def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: ReplayingSink
    ) -> Draft:
        while True:
            stream = self.stream_with_tools or not tools
            encoded = await self._encoder.messages(messages)
            body: list[tuple[str, bytes | list[bytes]]] = [
                ("model", self._model_json),
                ("messages", encoded),
            ]
            if tools:
                body.append(("tools", self._encoded_tools(tools)))
            body.append(("stream", b"true" if stream else b"false"))
            options = stream and self.stream_options
            if options:
                body.append(("stream_options", INCLUDE_USAGE))
            try:
                return await self._post(
                    f"{self.base_url}/chat/completions",
                    json_parts(body),
                    functools.partial(self._read, sink=sink, stream=stream),
                    with_tools=bool(tools),
                    streamed_with_tools=stream and bool(tools),
                    stream_options=options,
                )
            except StreamWithToolsRefused:
                log.info("%s cannot stream with tools; not streaming those requests", self.base_url)
                self.stream_with_tools = False
            except StreamOptionsRefused:
                log.info("%s rejects stream_options; usage will be estimated", self.base_url)
                self.stream_options = False

    async def _read(self, response: httpx.Response, *, sink: ReplayingSink, stream: bool) -> Draft:
        # A few servers ignore `stream: true` and answer with one JSON completion.
        if stream and "json" not in response.headers.get("content-type", ""):
            return await self._read_events(response, sink, self._feed)
        return await self._read_json(response, sink)

    def _feed(self, draft: Draft, data: str, sink: ReplayingSink) -> None:
        """One payload of the stream: a chunk, or `[DONE]`."""
        if data == "[DONE]":
            draft.done = True
            return
        draft.events += 1
        if not draft.first:
            draft.first = data[:200]
        try:
            chunk = _decode(data)
        except ValueError:
            log.warning("skipping a stream line that is not JSON: %.80s", data)
            return
        if not isinstance(chunk, dict):
            return
        if chunk.get("error"):
            excerpt = self._excerpt(json.dumps(chunk).encode())
            raise StreamBroken(f"the server reported an error mid-reply: {excerpt}")
        if isinstance(chunk.get("usage"), dict):
            draft.usage = chunk["usage"]
            draft.understood += 1
        choices = chunk.get("choices")
        if choices is None:
            return
        if not isinstance(choices, list):
            raise Nonsense(f"sent a chunk whose `choices` is {quote(choices)}, not a list")
        draft.understood += 1
        for choice in choices:
            if not isinstance(choice, dict):
                raise Nonsense(f"sent a choice that is {quote(choice)}, not an object")
            if choice.get("index", 0) == 0:
                self._feed_choice(draft, choice, sink)

    def _feed_choice(self, draft: Draft, choice: dict[str, Any], sink: ReplayingSink) -> None:
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise Nonsense(f"sent a chunk whose `delta` is {quote(delta)}, not an object")
        content = _text(delta.get("content"))
        if content:
            sink.feed(draft.add_text(content))
        calls = delta.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise Nonsense(f"sent `tool_calls` that are {quote(calls)}, not a list")
        for call in calls or []:
            feed_call(draft, call)
        if choice.get("finish_reason"):
            draft.finish_reason = str(choice["finish_reason"])

    async def _read_json(self, response: httpx.Response, sink: ReplayingSink) -> Draft:
        try:
            content = await body.read(response, self.max_reply_bytes)
        except (httpx.HTTPError, body.BodyError) as error:
            raise self._broken(error) from None
        try:
            data = json.loads(content)
        except ValueError:
            raise Nonsense(
                f"answered 200 with something that is not JSON ({self._excerpt(content)})"
            ) from None
        choices = data.get("choices") if isinstance(data, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(choice, dict):
            said = "an error" if isinstance(data, dict) and data.get("error") else "JSON"
            raise Nonsense(
                f"answered 200 with {said} that is not a chat completion ({self._excerpt(content)})"
            )
        draft = Draft(finish_reason=choice.get("finish_reason"), done=True)
        if isinstance(data.get("usage"), dict):
            draft.usage = data["usage"]
        text = _text(message.get("content"))
        if text:
            sink.feed(draft.add_text(text))
        sink.feed(draft.end_text())
        await sink.flush(Pacer())
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise Nonsense(f"sent `tool_calls` that are {quote(calls)}, not a list")
        for index, call in enumerate(calls or []):
            feed_call(draft, {**call, "index": index} if isinstance(call, dict) else call)
        return draft


def _decode(data: str) -> Any:
    """A payload's JSON value (`raw_decode` skips `json.loads`' whitespace checks: this runs
    once for every delta of a reply)."""
    try:
        return _DECODER.raw_decode(data)[0]
    except ValueError:
        return json.loads(data)  # leading whitespace, or not JSON (ValueError again)


_DECODER = json.JSONDecoder()


def _text(content: Any) -> str:
    """The text of a message's `content`: a string, or the text parts of a list (a few servers
    send parts); `Nonsense` for anything else."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "".join(
            str(part.get("text", "")) for part in content if part.get("type") in ("text", None)
        )
    raise Nonsense(f"sent `content` that is {quote(content)}, not text")
