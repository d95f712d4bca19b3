"""Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, Ollama, vLLM, llama.cpp, …)."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import httpx

from lsp_agent.model.encoding import outgoing
from lsp_agent.model.http import HTTPProvider, StreamOptionsRefused, StreamWithToolsRefused
from lsp_agent.model.stream import Draft, ReplayingSink, StreamBroken, feed_call, sse_data

log = logging.getLogger(__name__)


class OpenAIProvider(HTTPProvider):
    """Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, Ollama, vLLM, llama.cpp, …)."""

    name = "openai"

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, **options: Any
    ) -> None:
        super().__init__(base_url, model, api_key, **options)
        self.stream_with_tools = True
        """False once the server refused to stream a request with tools; later ones are not."""
        self.stream_options = True
        """False once the server refused `stream_options`; usage is then estimated."""

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _models_url(self) -> str:
        return f"{self.base_url}/models"

    async def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: ReplayingSink
    ) -> Draft:
        while True:
            stream = self.stream_with_tools or not tools
            body: dict[str, Any] = {"model": self.model, "messages": outgoing(messages)}
            if tools:
                body["tools"] = tools
            body["stream"] = stream
            options = stream and self.stream_options
            if options:
                body["stream_options"] = {"include_usage": True}
            try:
                return await self._post(
                    f"{self.base_url}/chat/completions",
                    body,
                    functools.partial(self._read, sink=sink, stream=stream),
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
            return await self._read_stream(response, sink)
        return await self._read_json(response, sink)

    async def _read_stream(self, response: httpx.Response, sink: ReplayingSink) -> Draft:
        draft = Draft()
        try:
            async for line in response.aiter_lines():
                data = sse_data(line)
                if data is None:
                    continue
                if data == "[DONE]":
                    draft.done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    log.warning("skipping a stream line that is not JSON: %.80s", data)
                    continue
                if isinstance(chunk, dict):
                    self._feed(draft, chunk, sink)
        except httpx.HTTPError as error:
            if draft.finish_reason is None:
                raise self._broken(error) from None
        if not draft.done and draft.finish_reason is None:
            raise StreamBroken("the stream ended before the reply was complete")
        return draft

    def _feed(self, draft: Draft, chunk: dict[str, Any], sink: ReplayingSink) -> None:
        if chunk.get("error"):
            excerpt = self._excerpt(json.dumps(chunk).encode())
            raise StreamBroken(f"the server reported an error mid-reply: {excerpt}")
        if isinstance(chunk.get("usage"), dict):
            draft.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                draft.text.append(content)
                sink.feed(content)
            for call in delta.get("tool_calls") or []:
                feed_call(draft, call)
            if choice.get("finish_reason"):
                draft.finish_reason = choice["finish_reason"]

    async def _read_json(self, response: httpx.Response, sink: ReplayingSink) -> Draft:
        try:
            content = await response.aread()
        except httpx.HTTPError as error:
            raise self._broken(error) from None
        try:
            data = json.loads(content)
            choice = data["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise StreamBroken(
                f"the answer was not a chat completion: {self._excerpt(content)}"
            ) from None
        draft = Draft(finish_reason=choice.get("finish_reason"), done=True)
        if isinstance(data.get("usage"), dict):
            draft.usage = data["usage"]
        text = message.get("content")
        if isinstance(text, str) and text:
            draft.text.append(text)
            sink.feed(text)
        for index, call in enumerate(message.get("tool_calls") or []):
            feed_call(draft, {**call, "index": index})
        return draft
