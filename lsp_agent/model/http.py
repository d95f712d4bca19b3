"""What both dialects share: the HTTP client, the retry loop, and which fault is which.

Requests go through an httpx `AsyncClient` (`client.py` sets it up); answers are read raw and
capped by `body.py`. Faults: 408/409/425/429/5xx and connections that break before any byte of
the answer are retried with exponential backoff and jitter, honouring `Retry-After`; a stream
that breaks mid-reply (or arrives empty) is retried once from scratch. httpx itself never sends
a request again, so a model call is repeated only by this policy, after a pause, and said in
the log. Everything else ends the turn with a `ProviderError` whose message is one sentence
that says what to fix (`faults.py` writes them). The API key travels only in its header: never
in a message, a log or a repr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from lsp_agent import __version__
from lsp_agent.messages import Reply, ToolCall, Usage, as_int, cached_tokens, estimate_tokens
from lsp_agent.model import (
    API_KEY_SETTING,
    BASE_URL_SETTING,
    CONTEXT_SETTING,
    MODEL_SETTING,
    ProviderError,
    TextSink,
    body,
    client,
)
from lsp_agent.model.faults import (
    CONTEXT_EXCEEDED,
    LISTED_MODELS,
    MODEL_MISSING,
    RETRYABLE_STATUS,
    TOOLS_UNSUPPORTED,
    Retry,
    Sentences,
    StreamOptionsRefused,
    StreamWithToolsRefused,
    error_info,
    retry_after_seconds,
)
from lsp_agent.model.stream import (
    EXCERPT_BYTES,
    BodySeen,
    Draft,
    Nonsense,
    Pacer,
    ReplayingSink,
    StreamBroken,
    page_title,
    sse_batches,
)

log = logging.getLogger(__name__)

DRAIN_SECONDS = 1.0
"""How long the end of a finished reply's body is waited for before its connection is dropped."""
NOT_RETRIED = (
    httpx.ConnectError,
    httpx.TimeoutException,
    httpx.UnsupportedProtocol,
    httpx.ProxyError,
    httpx.LocalProtocolError,
    httpx.InvalidURL,
    body.BodyError,
)
"""Faults another attempt would meet again: each ends the turn with a sentence at once. (A
refused connection too: nothing was sent, and a server that is not running will not be in a
second.)"""


class HTTPProvider(Sentences):
    """What both providers share: the HTTP client, the retry loop, and the error sentences."""

    name = ""
    api_key_hint = API_KEY_SETTING
    stream_shape = ""
    """What one event of this dialect's stream is, for a sentence about a stream that is not."""
    reply_shape = ""
    """What a reply of this dialect is, for a sentence about an answer that is not one."""
    api_hint = ""
    """Where this dialect's API usually lives, for the sentences about a wrong base URL."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        retries: int = 4,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        max_retry_after: float = 60.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        max_reply_bytes: int = body.MAX_BODY,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        """The endpoint as configured (shown in messages and in `status`)."""
        self.model = model
        # Spaces around a pasted key are not part of it, and HTTP could not carry them.
        self._api_key = (api_key or "").strip(" \t") or None
        self.retries = retries
        """How many times a retryable fault is retried before the turn fails."""
        self.base_delay = base_delay
        """The first backoff pause in seconds; it doubles at each retry, up to `max_delay`."""
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after
        """A longer `Retry-After` fails at once: waiting minutes inside a turn helps nobody."""
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.max_reply_bytes = max_reply_bytes
        """The most one answer may bring, as received and once expanded (`body.py`)."""
        self._route = client.route(self.base_url)
        self._client = client.new_client(
            self._route,
            user_agent=f"lsp-agent/{__version__}",
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: TextSink
    ) -> Reply:
        """Send the request, stream the text to `on_text`, return the whole reply."""
        sink = ReplayingSink(on_text)
        retries = 0
        broken = False
        while True:
            sink.restart()
            try:
                draft = await self._attempt(messages, tools, sink)
            except Retry as fault:
                if not fault.allowed or retries >= self.retries:
                    raise self._gave_up(fault, retries) from None
                delay = self._delay(retries, fault.retry_after)
                if delay > self.max_retry_after:
                    raise self._gave_up(fault, retries, wait=delay) from None
                retries += 1
                log.warning("%s; retry %d of %d in %.1f s", fault, retries, self.retries, delay)
                await asyncio.sleep(delay)
                continue
            except StreamBroken as fault:
                if broken and fault.twice is not None:
                    raise ProviderError(
                        f"the model endpoint at {self.base_url} {fault.twice}: check the "
                        "server's log (did the model fail to load?), then ask again"
                    ) from None
                if broken:
                    raise ProviderError(
                        f"the reply from {self.base_url} broke off twice ({fault}): ask again; "
                        "if it keeps happening, check the server's log"
                    ) from None
                broken = True
                log.warning("the reply broke off (%s); trying once more", fault)
                continue
            return self._reply(draft)

    async def list_models(self) -> list[str]:
        """The model names the endpoint offers (`GET …/models`)."""
        url = self._models_url()
        headers = self._checked(self._headers())
        try:
            async with self._client.stream("GET", url, headers=headers) as response:
                content = await body.read(response, self.max_reply_bytes)
        except (httpx.HTTPError, httpx.InvalidURL, body.BodyError) as error:
            raise self._transport_error(error) from None
        if response.status_code in (401, 403):
            raise self._key_refused(response.status_code, self._excerpt(content))
        if response.status_code == 407 and self._route.proxy is not None:
            raise self._proxy_refused(f"407 ({self._excerpt(content)})", url)
        if response.status_code >= 300:
            raise ProviderError(
                f"{url} answered {response.status_code} "
                f"({self._excerpt(content)}): check {BASE_URL_SETTING}",
                response.status_code,
            )
        try:
            data = json.loads(content)
            return [str(item["id"]) for item in data["data"]]
        except (ValueError, KeyError, TypeError):
            raise ProviderError(
                f"{url} did not answer with a model list: check {BASE_URL_SETTING}",
                response.status_code,
            ) from None

    async def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: ReplayingSink
    ) -> Draft:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _models_url(self) -> str:
        raise NotImplementedError

    def _checked(self, headers: dict[str, str]) -> dict[str, str]:
        """`headers`, once sure the request can be sent at all: a URL or a proxy that cannot be
        used, or a header HTTP cannot carry, is said before anything goes out."""
        route = self._route
        if route.url_problem is not None:
            raise self._invalid_url(route.url_problem)
        if route.proxy_problem is not None:
            raise self._proxy_problem(route.proxy_problem)
        problem = client.header_problem(headers)
        if problem is not None:
            raise self._unsendable(problem)
        return headers

    async def _post(
        self,
        url: str,
        parts: Sequence[bytes],
        read: Callable[[httpx.Response], Awaitable[Draft]],
        *,
        with_tools: bool,
        streamed_with_tools: bool = False,
        stream_options: bool = False,
    ) -> Draft:
        """POST the JSON body given in `parts`, turn HTTP faults into our exceptions, and `read`
        a successful response."""
        size = sum(map(len, parts))
        headers = self._checked(
            {
                **self._headers(),
                "content-type": "application/json",
                "content-length": str(size),
            }
        )
        try:
            async with self._client.stream(
                "POST", url, content=client.content(parts), headers=headers
            ) as response:
                if response.status_code < 300:
                    await self._refuse_web_page(response)
                    draft = await read(response)
                    draft.sent_bytes = size
                    return draft
                content = await body.read(response, self.max_reply_bytes)
        except Nonsense as fault:
            raise self._nonsense(fault, url) from None
        except NOT_RETRIED as error:
            raise self._transport_error(error) from None
        except httpx.TransportError as error:
            # The connection broke before the answer's head was whole (closed, reset, or HTTP's
            # rules broken): the server may have begun on the request, and another is sent
            # only after a pause, by `complete`'s policy.
            raise Retry(None, self._via(type(error).__name__)) from None
        raise await self._status_fault(
            response,
            content,
            url,
            sent_bytes=size,
            with_tools=with_tools,
            streamed_with_tools=streamed_with_tools,
            stream_options=stream_options,
        )

    async def _status_fault(
        self,
        response: httpx.Response,
        content: bytes,
        url: str,
        *,
        sent_bytes: int,
        with_tools: bool,
        streamed_with_tools: bool,
        stream_options: bool,
    ) -> Exception:
        """The exception for an error status: retry, fall back, or a sentence for the user."""
        status = response.status_code
        message, code = error_info(content)
        excerpt = self._excerpt(content)
        lowered = message.lower()
        if status in (401, 403):
            return self._key_refused(status, excerpt)
        if status == 407 and self._route.proxy is not None:  # in front of an http:// endpoint
            return self._proxy_refused(f"407 ({excerpt})", url)
        # "stream" must be the server's word, not part of the model's name.
        said = lowered.replace(self.model.lower(), "") if self.model else lowered
        refusal = status in (400, 422, 500, 501) and "tool" in said and "stream" in said
        if streamed_with_tools and refusal:
            return StreamWithToolsRefused()
        # Before the 404 and 5xx rules: Azure and OpenRouter say it with 404, llama.cpp with 500.
        if with_tools and TOOLS_UNSUPPORTED.search(message):
            return self._tools_refused(status, excerpt, lowered)
        if (
            status == 404
            or code == "model_not_found"
            or (status < 500 and MODEL_MISSING.search(message))
        ):
            return await self._model_missing(status, url, excerpt)
        if stream_options and status in (400, 422) and "stream_options" in lowered:
            return StreamOptionsRefused()
        if status in RETRYABLE_STATUS or status >= 500:
            allowed = response.headers.get("x-should-retry", "").lower() != "false"
            return Retry(status, excerpt, retry_after_seconds(response.headers), allowed=allowed)
        if status == 413:  # what a proxy in front says (nginx accepts 1 MB by default)
            return ProviderError(
                f"the request ({sent_bytes / 1e6:.1f} MB) is larger than {url} accepts "
                f"({status}: {excerpt}): raise the limit of the proxy in front of it (nginx: "
                f"client_max_body_size), or lower {CONTEXT_SETTING} so that less is sent",
                status,
            )
        if code == "context_length_exceeded" or CONTEXT_EXCEEDED.search(message):
            return ProviderError(
                f"the request is longer than the model's context window ({excerpt}): "
                f"lower {CONTEXT_SETTING} to what the model at {self.base_url} accepts",
                status,
            )
        return ProviderError(
            f"the endpoint {url} rejected the request ({status}: {excerpt}); "
            "it may not support this kind of request: check the server's log",
            status,
        )

    async def _model_missing(self, status: int, url: str, excerpt: str) -> ProviderError:
        """Say which model is missing and, when the endpoint lists them, which ones exist."""
        try:
            available: list[str] | None = await self.list_models()
        except ProviderError:
            available = None
        if available is not None and self.model in available and status == 404:
            return ProviderError(
                f"the endpoint {url} answered 404 ({excerpt}): check {BASE_URL_SETTING} "
                "(OpenAI-compatible servers usually end in /v1)",
                status,
            )
        head = f"model '{self.model}' is not available at {self.base_url}: set {MODEL_SETTING}"
        if available is None:
            return ProviderError(
                f"{head} ({status}: {excerpt}; the model list could not be read either, "
                f"so check {BASE_URL_SETTING} too)",
                status,
            )
        if not available:
            return ProviderError(f"{head} (the endpoint lists no models)", status)
        shown = ", ".join(available[:LISTED_MODELS])
        more = len(available) - LISTED_MODELS
        if more > 0:
            shown += f" and {more} more"
        return ProviderError(f"{head} (available: {shown})", status)

    async def _read_events(
        self,
        response: httpx.Response,
        sink: ReplayingSink,
        feed: Callable[[Draft, str, ReplayingSink], None],
    ) -> Draft:
        """Read an event stream into a draft, passing each payload to the dialect's `feed`.

        Raises `StreamBroken` when the stream ends early or empty (worth one more try) and
        `Nonsense` when what came is not this dialect's stream at all.
        """
        draft = Draft()
        pacer = Pacer()
        seen = BodySeen()
        batches = sse_batches(body.pieces(response, self.max_reply_bytes), pacer, seen)
        try:
            async for batch in batches:
                for data in batch:
                    feed(draft, data, sink)
                    if draft.done:
                        break
                    if pacer.due():
                        await pacer.rest()
                await sink.flush(pacer)
                if draft.done:
                    break
        except (httpx.HTTPError, body.BodyError) as error:
            if draft.finish_reason is None:
                raise self._broken(error) from None
        if draft.done:
            await _drain(batches)
        sink.feed(draft.end_text())
        await sink.flush(pacer)
        if draft.events == 0 and seen.size and not draft.done:
            raise Nonsense(
                f"answered 200 with {seen.size:,} bytes that are not an event stream "
                f"({self._excerpt(bytes(seen.head))})"
            )
        if draft.events == 0:
            raise StreamBroken(
                "the stream ended without any data",
                twice="answered twice with an empty stream (200, and no data at all)",
            )
        if not draft.understood:
            events = f"{draft.events:,} event{'s' if draft.events != 1 else ''}"
            raise Nonsense(
                f"streamed {events}, none of them {self.stream_shape} "
                f"(the first: {self._excerpt(draft.first.encode())})"
            )
        if not draft.done and draft.finish_reason is None:
            raise StreamBroken("the stream ended before the reply was complete")
        return draft

    async def _refuse_web_page(self, response: httpx.Response) -> None:
        """Raise `Nonsense` for an HTML page: a login page, a web UI, a proxy's notice."""
        if "html" not in response.headers.get("content-type", "").lower():
            return
        head = b""
        with contextlib.suppress(httpx.HTTPError, body.BodyError):
            async with contextlib.aclosing(body.pieces(response, self.max_reply_bytes)) as page:
                async for piece in page:
                    head += piece
                    if len(head) >= EXCERPT_BYTES * 16:
                        break
        title = page_title(head)
        named = f" titled '{title}'" if title else ""
        raise Nonsense(f"answered {response.status_code} with a web page{named}", web_page=True)

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        backoff = min(self.max_delay, self.base_delay * 2.0**retry)
        return backoff * random.uniform(0.5, 1.0)

    def _broken(self, error: Exception) -> Exception:
        """A fault while reading a successful response: a stream that broke off is worth
        another try; one that waited too long, grew past any reply or cannot be decoded is
        not."""
        if isinstance(error, (httpx.TimeoutException, body.BodyError)):
            return self._transport_error(error)
        return StreamBroken(f"{type(error).__name__}: {error}")

    def _reply(self, draft: Draft) -> Reply:
        text = "".join(draft.text)
        calls = draft.tool_calls()
        if draft.surrogates.replaced:
            log.warning(
                "the reply from %s carried %d lone UTF-16 surrogate(s) (half a character, which "
                "no UTF-8 text can hold); each became U+FFFD",
                self.base_url,
                draft.surrogates.replaced,
            )
        usage = self._usage(draft.usage, draft.sent_bytes, text, calls)
        return Reply(text, calls, usage, draft.finish_reason)

    def _usage(
        self,
        usage: Mapping[str, Any] | None,
        sent_bytes: int,
        text: str,
        calls: tuple[ToolCall, ...],
    ) -> Usage:
        usage = usage or {}
        prompt = as_int(usage.get("prompt_tokens"))
        completion = as_int(usage.get("completion_tokens"))
        estimated = prompt is None or completion is None
        if prompt is None:
            prompt = estimate_tokens(sent_bytes)
        if completion is None:
            # Sizes, not one concatenated copy: the text may be megabytes.
            completion = estimate_tokens(
                _utf8_size(text) + sum(_utf8_size(call.name + call.arguments) for call in calls)
            )
        return Usage(prompt, completion, cached_tokens(usage), estimated)


async def _drain(batches: AsyncIterator[list[str]]) -> None:
    """Read what follows the end of a reply (the end of the HTTP body, usually nothing else),
    so that the connection goes back to the pool: a connection left half-read is closed, and
    the next request would open a new one. A server that keeps talking is cut off."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, body.BodyError):
        async with asyncio.timeout(DRAIN_SECONDS):  # no task of its own, as wait_for makes
            async for _ in batches:
                pass


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
