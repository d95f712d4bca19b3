"""Model endpoints: OpenAI-compatible chat completions and Anthropic Messages, streamed over httpx.

The core speaks OpenAI chat-format messages everywhere; a provider sends them, streams the reply's
text to `on_text` as it arrives, assembles tool calls, and returns a `Reply` with token usage (read
from the server, or estimated when the server does not say).

Faults (DESIGN §5): 408/409/429/5xx and connections that break before any byte are retried
with exponential backoff and jitter, honouring `Retry-After`; a stream that breaks mid-reply is
retried once from scratch. Everything else ends the turn with a `ProviderError` whose message is one
sentence that says what to fix. The API key travels only in its header: never in a message, a log
or a repr.

Replayed text: when a retried stream starts with the text the user has already seen, only what
comes after it is passed to `on_text`; when it says something else, the new text is passed in full,
so the editor may show the broken start followed by the new reply (the `Reply` holds only the new).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from lsp_agent.errors import UserError

log = logging.getLogger(__name__)

BASE_URL_SETTING = "lspAgent.baseUrl or LSP_AGENT_BASE_URL"
API_KEY_SETTING = "lspAgent.apiKey or LSP_AGENT_API_KEY"
MODEL_SETTING = "lspAgent.model or LSP_AGENT_MODEL"
PROVIDER_SETTING = "lspAgent.provider or LSP_AGENT_PROVIDER"
CONTEXT_SETTING = "lspAgent.contextWindow or CONTEXT_WINDOW"
ANTHROPIC_VERSION = "2023-06-01"
CACHE_BREAKPOINT: dict[str, str] = {"type": "ephemeral"}

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_EXCERPT_CHARS = 200
_LISTED_MODELS = 20
_MODEL_MISSING = re.compile(r"model\b.*\b(not found|does not exist|not exist|unknown)", re.I | re.S)
_CONTEXT_EXCEEDED = re.compile(
    r"context[ _](length|window)|maximum context|prompt is too long|too many tokens", re.I
)
_TOOLS_UNSUPPORTED = re.compile(
    r"(does not|doesn't|do not|cannot|can't) support (tools|tool[ _-]?(use|calls?|calling)"
    r"|function[ _-]?call(s|ing)?)"
    r"|\b(tools|tool[ _-]?(use|calls?|calling)|function[ _-]?calling)( param(eter)?)? (is|are) "
    r"not supported"
    r"|unrecognized request argument supplied: tools"
    r"|tools param requires --jinja"
    r"|tool choice requires --enable-auto-tool-choice"
    r"|no endpoints found that support tool use",
    re.I,
)
"""How servers say the model cannot take `tools`: Ollama (`… does not support tools`), OpenAI
(`tools is not supported in this model`), Azure (`Unrecognized request argument supplied: tools`),
llama.cpp (`tools param requires --jinja flag`), vLLM (`"auto" tool choice requires
--enable-auto-tool-choice …`), OpenRouter (`No endpoints found that support tool use`)."""
TOOL_MODELS = "qwen2.5-coder:7b or llama3.1"
"""Well-known local models that call tools reliably (Ollama names), suggested to the user."""


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


class ProviderError(UserError):
    """The model endpoint failed; the turn ends and the user reads `message`."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        """One sentence that says what went wrong and what to fix (which URL, which setting)."""
        self.status = status
        """The HTTP status the endpoint answered, or None when it never answered."""


TextSink = Callable[[str], None]
"""Receives each text delta of the reply as it arrives."""


class Provider(Protocol):
    """A model endpoint the agent loop can call."""

    name: str
    """`openai` or `anthropic`."""
    model: str
    base_url: str

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: TextSink
    ) -> Reply:
        """Send the request, stream the text to `on_text`, return the whole reply."""
        ...

    async def list_models(self) -> list[str]:
        """The model names the endpoint offers."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP client."""
        ...


def estimate_tokens(text_or_bytes_len: str | bytes | int) -> int:
    """Tokens in a text (or a number of UTF-8 bytes): bytes ÷ 3.5, rounded up."""
    if isinstance(text_or_bytes_len, str):
        size = len(text_or_bytes_len.encode())
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
    if isinstance(details, Mapping) and (value := _int(details.get("cached_tokens"))) is not None:
        return value
    for key in ("cache_read_input_tokens", "prompt_cache_hit_tokens"):
        if (value := _int(usage.get(key))) is not None:
            return value
    return None


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """How long the server asks us to wait: `retry-after-ms`, or `Retry-After` seconds or date."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


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

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            text = _text_of(content)
            if not out:
                if text:
                    system.append({"type": "text", "text": text})
            else:
                add("user", _text_blocks(text))
        elif role == "user":
            add("user", _user_blocks(content))
        elif role == "assistant":
            blocks = _text_blocks(_text_of(content))
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
            add("assistant", blocks)
        elif role == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
            }
            if text := _text_of(content):
                result["content"] = text
            add("user", [result])
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


def make_provider(
    provider: str,
    base_url: str,
    model: str,
    api_key: str | None,
    *,
    retries: int = 4,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    max_retry_after: float = 60.0,
    connect_timeout: float = 10.0,
    read_timeout: float = 300.0,
    max_tokens: int = 8192,
) -> Provider:
    """The provider named by the `provider` setting (`openai` or `anthropic`)."""
    options: dict[str, Any] = {
        "retries": retries,
        "base_delay": base_delay,
        "max_delay": max_delay,
        "max_retry_after": max_retry_after,
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
    }
    kind = provider.strip().lower()
    if kind == "openai":
        return OpenAIProvider(base_url, model, api_key, **options)
    if kind == "anthropic":
        return AnthropicProvider(base_url, model, api_key, max_tokens=max_tokens, **options)
    raise ProviderError(
        f"unknown provider '{provider}': set {PROVIDER_SETTING} to openai or anthropic"
    )


class _Retry(Exception):
    """A fault worth another attempt after a pause."""

    def __init__(
        self,
        status: int | None,
        excerpt: str,
        retry_after: float | None = None,
        *,
        allowed: bool = True,
    ) -> None:
        super().__init__(f"{status or 'connection broke'}: {excerpt}")
        self.status = status
        """The HTTP status, or None when the connection broke before any reply."""
        self.excerpt = excerpt
        self.retry_after = retry_after
        self.allowed = allowed
        """False when the server said `x-should-retry: false`."""


class _StreamBroken(Exception):
    """The reply stopped half-way; the request is worth one more try from scratch."""


class _StreamWithToolsRefused(Exception):
    """The server cannot stream when tools are present (llama-cpp-python, older llama.cpp)."""


class _StreamOptionsRefused(Exception):
    """The server rejects `stream_options` (some older OpenAI-compatible servers)."""


class _ReplayingSink:
    """Passes streamed text to `on_text`, without repeating what a retried attempt replays."""

    def __init__(self, on_text: TextSink) -> None:
        self._on_text = on_text
        self._seen = ""
        """The text the user has seen of this reply, as the attempt that showed it had it."""
        self._parts: list[str] = []
        self._length = 0
        self._replaying = False
        self._diverged = False

    def restart(self) -> None:
        """A new attempt begins."""
        text = "".join(self._parts)
        if self._diverged or len(text) > len(self._seen):
            self._seen = text
        self._parts, self._length = [], 0
        self._replaying, self._diverged = bool(self._seen), False

    def feed(self, delta: str) -> None:
        """One text delta of the current attempt."""
        if not delta:
            return
        start = self._length
        self._parts.append(delta)
        self._length += len(delta)
        if not self._replaying:
            self._on_text(delta)
            return
        overlap = self._seen[start : start + len(delta)]
        if not delta.startswith(overlap):
            self._replaying, self._diverged = False, True
            self._on_text("".join(self._parts))
        elif self._length >= len(self._seen):
            self._replaying = False
            if rest := delta[len(overlap) :]:
                self._on_text(rest)


@dataclass
class _CallDraft:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Draft:
    """A reply being assembled from a stream."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _CallDraft] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    done: bool = False

    def call(self, index: int) -> _CallDraft:
        if index not in self.calls:
            self.calls[index] = _CallDraft(id="", name="")
        return self.calls[index]

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for position, index in enumerate(sorted(self.calls)):
            draft = self.calls[index]
            calls.append(
                ToolCall(
                    id=draft.id or f"call_{position}",
                    name=draft.name,
                    arguments="".join(draft.arguments),
                )
            )
        return tuple(calls)


class _HTTPProvider:
    """What both providers share: the HTTP client, the retry loop, and the error sentences."""

    name = ""
    api_key_hint = API_KEY_SETTING

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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        """The endpoint as configured (shown in messages and in `status`)."""
        self.model = model
        self._api_key = api_key or None
        self.retries = retries
        """How many times a retryable fault is retried before the turn fails."""
        self.base_delay = base_delay
        """The first backoff pause in seconds; it doubles at each retry, up to `max_delay`."""
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after
        """A longer `Retry-After` fails at once: waiting minutes inside a turn helps nobody."""
        self.read_timeout = read_timeout
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=connect_timeout, read=read_timeout, write=60.0, pool=connect_timeout
            )
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
        sink = _ReplayingSink(on_text)
        retries = 0
        broken = False
        while True:
            sink.restart()
            try:
                draft = await self._attempt(messages, tools, sink)
            except _Retry as fault:
                if not fault.allowed or retries >= self.retries:
                    raise self._gave_up(fault, retries) from None
                delay = self._delay(retries, fault.retry_after)
                if delay > self.max_retry_after:
                    raise self._gave_up(fault, retries, wait=delay) from None
                retries += 1
                log.warning("%s; retry %d of %d in %.1f s", fault, retries, self.retries, delay)
                await asyncio.sleep(delay)
                continue
            except _StreamBroken as fault:
                if broken:
                    raise ProviderError(
                        f"the reply from {self.base_url} broke off twice ({fault}): ask again; "
                        "if it keeps happening, check the server's log"
                    ) from None
                broken = True
                log.warning("the reply broke off (%s); trying once more", fault)
                continue
            return self._reply(draft, messages, tools)

    async def list_models(self) -> list[str]:
        """The model names the endpoint offers (`GET …/models`)."""
        url = self._models_url()
        try:
            response = await self._client.get(url, headers=self._headers())
        except httpx.HTTPError as error:
            raise self._transport_error(error) from None
        except httpx.InvalidURL as error:
            raise self._invalid_url(error) from None
        if response.status_code in (401, 403):
            raise self._key_refused(response.status_code, self._excerpt(response.content))
        if response.status_code >= 300:
            raise ProviderError(
                f"{url} answered {response.status_code} "
                f"({self._excerpt(response.content)}): check {BASE_URL_SETTING}",
                response.status_code,
            )
        try:
            data = response.json()
            return [str(item["id"]) for item in data["data"]]
        except (ValueError, KeyError, TypeError):
            raise ProviderError(
                f"{url} did not answer with a model list: check {BASE_URL_SETTING}",
                response.status_code,
            ) from None

    async def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: _ReplayingSink
    ) -> _Draft:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _models_url(self) -> str:
        raise NotImplementedError

    async def _post(
        self,
        url: str,
        body: dict[str, Any],
        read: Callable[[httpx.Response], Awaitable[_Draft]],
        *,
        streamed_with_tools: bool = False,
        stream_options: bool = False,
    ) -> _Draft:
        """POST `body`, turn HTTP faults into our exceptions, and `read` a successful response."""
        with_tools = bool(body.get("tools"))
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {**self._headers(), "content-type": "application/json"}
        try:
            async with self._client.stream(
                "POST", url, content=content, headers=headers
            ) as response:
                if response.status_code < 300:
                    return await read(response)
                await response.aread()
        except httpx.InvalidURL as error:
            raise self._invalid_url(error) from None
        except (httpx.ConnectError, httpx.TimeoutException, httpx.UnsupportedProtocol) as error:
            raise self._transport_error(error) from None
        except httpx.TransportError as error:
            raise _Retry(None, type(error).__name__) from None
        raise await self._status_fault(
            response,
            url,
            with_tools=with_tools,
            streamed_with_tools=streamed_with_tools,
            stream_options=stream_options,
        )

    async def _status_fault(
        self,
        response: httpx.Response,
        url: str,
        *,
        with_tools: bool,
        streamed_with_tools: bool,
        stream_options: bool,
    ) -> Exception:
        """The exception for an error status: retry, fall back, or a sentence for the user."""
        status = response.status_code
        message, code = _error_info(response.content)
        excerpt = self._excerpt(response.content)
        lowered = message.lower()
        if status in (401, 403):
            return self._key_refused(status, excerpt)
        # "stream" must be the server's word, not part of the model's name.
        said = lowered.replace(self.model.lower(), "") if self.model else lowered
        refusal = status in (400, 422, 500, 501) and "tool" in said and "stream" in said
        if streamed_with_tools and refusal:
            return _StreamWithToolsRefused()
        # Before the 404 and 5xx rules: Azure and OpenRouter say it with 404, llama.cpp with 500.
        if with_tools and _TOOLS_UNSUPPORTED.search(message):
            return self._tools_refused(status, excerpt, lowered)
        if (
            status == 404
            or code == "model_not_found"
            or (status < 500 and _MODEL_MISSING.search(message))
        ):
            return await self._model_missing(status, url, excerpt)
        if stream_options and status in (400, 422) and "stream_options" in lowered:
            return _StreamOptionsRefused()
        if status in _RETRYABLE_STATUS or status >= 500:
            allowed = response.headers.get("x-should-retry", "").lower() != "false"
            return _Retry(status, excerpt, retry_after_seconds(response.headers), allowed=allowed)
        if code == "context_length_exceeded" or _CONTEXT_EXCEEDED.search(message):
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
        except (ProviderError, httpx.HTTPError, httpx.InvalidURL):
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
        shown = ", ".join(available[:_LISTED_MODELS])
        more = len(available) - _LISTED_MODELS
        if more > 0:
            shown += f" and {more} more"
        return ProviderError(f"{head} (available: {shown})", status)

    def _gave_up(self, fault: _Retry, retries: int, wait: float | None = None) -> ProviderError:
        """The sentence for a retryable fault that is not retried (any more)."""
        after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
        if fault.status is None:
            sentence = (
                f"the connection to {self.base_url} broke before any reply{after} "
                f"({fault.excerpt}): is the server crashing? check its log"
            )
        elif fault.status == 429:
            sentence = (
                f"the endpoint {self.base_url} is rate limiting requests{after} "
                f"(429: {fault.excerpt}): wait a little and ask again"
            )
        else:
            sentence = (
                f"the model endpoint at {self.base_url} failed with {fault.status}{after} "
                f"({fault.excerpt}): check the server's log or ask again"
            )
        if wait is not None:
            sentence = f"{sentence} (it asks to wait {wait:.0f} s first)"
        return ProviderError(sentence, fault.status)

    def _tools_refused(self, status: int, excerpt: str, lowered: str) -> ProviderError:
        """The sentence for an endpoint that will not take `tools` for this model."""
        head = (
            f"model '{self.model}' at {self.base_url} cannot call tools ({status}: {excerpt}), "
            "and lsp-agent reads and edits files only through tool calls"
        )
        other = f"set {MODEL_SETTING} to a model that can call tools"
        if "--jinja" in lowered:
            fix = (
                "restart llama-server with --jinja (it then uses the model's own chat template, "
                f"which knows its tool-call format), or {other}, such as {TOOL_MODELS}"
            )
        elif "--enable-auto-tool-choice" in lowered:
            fix = (
                "restart vLLM with --enable-auto-tool-choice and the --tool-call-parser that fits "
                f"the model (hermes for Qwen2.5, llama3_json for Llama 3.1), or {other}"
            )
        elif "ollama" in lowered or ":11434" in self.base_url:
            fix = (
                f"pull one that can, such as {TOOL_MODELS} (ollama pull qwen2.5-coder:7b), and "
                f"set {MODEL_SETTING} to it"
            )
        else:
            fix = f"{other} (on Ollama, for example {TOOL_MODELS})"
        return ProviderError(f"{head}: {fix}", status)

    def _key_refused(self, status: int, excerpt: str) -> ProviderError:
        if self._api_key is None:
            return ProviderError(
                f"the endpoint {self.base_url} wants an API key ({status}: {excerpt}): "
                f"set {self.api_key_hint}",
                status,
            )
        return ProviderError(
            f"the endpoint {self.base_url} refused the API key ({status}: {excerpt}): "
            f"set {self.api_key_hint}",
            status,
        )

    def _transport_error(self, error: Exception) -> ProviderError:
        if isinstance(error, httpx.UnsupportedProtocol):
            return self._invalid_url(error)
        if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
            return ProviderError(
                f"cannot reach the model endpoint at {self.base_url}: is the server running? "
                f"Set {BASE_URL_SETTING}"
            )
        if isinstance(error, httpx.TimeoutException):
            return ProviderError(
                f"the model endpoint at {self.base_url} sent nothing for {self.read_timeout:.0f} s "
                f"({type(error).__name__}): is the server overloaded? check its log"
            )
        return ProviderError(
            f"the connection to {self.base_url} failed ({type(error).__name__}): "
            f"check {BASE_URL_SETTING} and the server's log"
        )

    def _invalid_url(self, error: Exception) -> ProviderError:
        return ProviderError(
            f"the model endpoint URL '{self.base_url}' is not valid ({error}): set "
            f"{BASE_URL_SETTING} to a URL like http://localhost:11434/v1"
        )

    def _excerpt(self, content: bytes) -> str:
        """A short, key-free excerpt of what the server said."""
        message, _ = _error_info(content)
        text = " ".join(message.split()) or "no details"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        if len(text) > _EXCERPT_CHARS:
            text = text[: _EXCERPT_CHARS - 1] + "…"
        return text

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        backoff = min(self.max_delay, self.base_delay * 2.0**retry)
        return backoff * random.uniform(0.5, 1.0)

    def _broken(self, error: httpx.HTTPError) -> Exception:
        """A fault while reading a successful response."""
        if isinstance(error, httpx.TimeoutException):
            return self._transport_error(error)
        return _StreamBroken(f"{type(error).__name__}: {error}")

    def _reply(
        self, draft: _Draft, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Reply:
        text = "".join(draft.text)
        calls = draft.tool_calls()
        return Reply(
            text, calls, self._usage(draft.usage, messages, tools, text, calls), draft.finish_reason
        )

    def _usage(
        self,
        usage: Mapping[str, Any] | None,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        text: str,
        calls: tuple[ToolCall, ...],
    ) -> Usage:
        usage = usage or {}
        prompt = _int(usage.get("prompt_tokens"))
        completion = _int(usage.get("completion_tokens"))
        estimated = prompt is None or completion is None
        if prompt is None:
            size = len(_dumps(messages)) + (len(_dumps(tools)) if tools else 0)
            prompt = estimate_tokens(size)
        if completion is None:
            completion = estimate_tokens(
                text + "".join(call.name + call.arguments for call in calls)
            )
        return Usage(prompt, completion, cached_tokens(usage), estimated)


class OpenAIProvider(_HTTPProvider):
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
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: _ReplayingSink
    ) -> _Draft:
        while True:
            stream = self.stream_with_tools or not tools
            body: dict[str, Any] = {"model": self.model, "messages": _outgoing(messages)}
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
            except _StreamWithToolsRefused:
                log.info("%s cannot stream with tools; not streaming those requests", self.base_url)
                self.stream_with_tools = False
            except _StreamOptionsRefused:
                log.info("%s rejects stream_options; usage will be estimated", self.base_url)
                self.stream_options = False

    async def _read(
        self, response: httpx.Response, *, sink: _ReplayingSink, stream: bool
    ) -> _Draft:
        # A few servers ignore `stream: true` and answer with one JSON completion.
        if stream and "json" not in response.headers.get("content-type", ""):
            return await self._read_stream(response, sink)
        return await self._read_json(response, sink)

    async def _read_stream(self, response: httpx.Response, sink: _ReplayingSink) -> _Draft:
        draft = _Draft()
        try:
            async for line in response.aiter_lines():
                data = _sse_data(line)
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
            raise _StreamBroken("the stream ended before the reply was complete")
        return draft

    def _feed(self, draft: _Draft, chunk: dict[str, Any], sink: _ReplayingSink) -> None:
        if chunk.get("error"):
            excerpt = self._excerpt(json.dumps(chunk).encode())
            raise _StreamBroken(f"the server reported an error mid-reply: {excerpt}")
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
                _feed_call(draft, call)
            if choice.get("finish_reason"):
                draft.finish_reason = choice["finish_reason"]

    async def _read_json(self, response: httpx.Response, sink: _ReplayingSink) -> _Draft:
        try:
            content = await response.aread()
        except httpx.HTTPError as error:
            raise self._broken(error) from None
        try:
            data = json.loads(content)
            choice = data["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _StreamBroken(
                f"the answer was not a chat completion: {self._excerpt(content)}"
            ) from None
        draft = _Draft(finish_reason=choice.get("finish_reason"), done=True)
        if isinstance(data.get("usage"), dict):
            draft.usage = data["usage"]
        text = message.get("content")
        if isinstance(text, str) and text:
            draft.text.append(text)
            sink.feed(text)
        for index, call in enumerate(message.get("tool_calls") or []):
            _feed_call(draft, {**call, "index": index})
        return draft


class AnthropicProvider(_HTTPProvider):
    """Anthropic's Messages API (`/v1/messages`), streamed, with prompt-cache breakpoints."""

    name = "anthropic"
    api_key_hint = f"{API_KEY_SETTING} (or ANTHROPIC_API_KEY)"

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
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sink: _ReplayingSink
    ) -> _Draft:
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "stream": True}
        body.update(to_anthropic(messages, tools))

        async def read(response: httpx.Response) -> _Draft:
            return await self._read_stream(response, sink)

        return await self._post(f"{self._root}/v1/messages", body, read)

    async def _read_stream(self, response: httpx.Response, sink: _ReplayingSink) -> _Draft:
        draft = _Draft()
        usage: dict[str, Any] = {}
        try:
            async for line in response.aiter_lines():
                data = _sse_data(line)
                if data is None:
                    continue
                try:
                    event = json.loads(data)
                except ValueError:
                    log.warning("skipping a stream line that is not JSON: %.80s", data)
                    continue
                if not isinstance(event, dict):
                    continue
                self._feed(draft, usage, event, sink)
                if draft.done:
                    break
        except httpx.HTTPError as error:
            if draft.finish_reason is None:
                raise self._broken(error) from None
        if not draft.done and draft.finish_reason is None:
            raise _StreamBroken("the stream ended before the reply was complete")
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

    def _feed(
        self, draft: _Draft, usage: dict[str, Any], event: dict[str, Any], sink: _ReplayingSink
    ) -> None:
        kind = event.get("type")
        if kind == "message_start":
            usage.update(_numbers((event.get("message") or {}).get("usage")))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "text" and block.get("text"):
                draft.text.append(block["text"])
                sink.feed(block["text"])
            elif block.get("type") == "tool_use":
                call = draft.call(_int(event.get("index")) or 0)
                call.id, call.name = str(block.get("id", "")), str(block.get("name", ""))
                if block.get("input"):
                    call.arguments.append(json.dumps(block["input"]))
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                draft.text.append(delta["text"])
                sink.feed(delta["text"])
            elif delta.get("type") == "input_json_delta":
                draft.call(_int(event.get("index")) or 0).arguments.append(
                    str(delta.get("partial_json", ""))
                )
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                draft.finish_reason = _STOP_REASONS.get(reason, reason)
            usage.update(_numbers(event.get("usage")))
        elif kind == "message_stop":
            draft.done = True
        elif kind == "error":
            excerpt = self._excerpt(json.dumps(event).encode())
            raise _StreamBroken(f"the server reported an error mid-reply: {excerpt}")


_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _feed_call(draft: _Draft, delta: Any) -> None:
    """One tool-call delta: the first of a call carries id and name, the rest argument text."""
    if not isinstance(delta, dict):
        return
    index = _int(delta.get("index"))
    call_id = delta.get("id")
    if index is None:
        known = [i for i, call in draft.calls.items() if call_id and call.id == call_id]
        if known:
            index = known[0]
        elif call_id or not draft.calls:
            index = len(draft.calls)
        else:
            index = max(draft.calls)
    call = draft.call(index)
    if isinstance(call_id, str) and call_id and not call.id:
        call.id = call_id
    function = delta.get("function") or {}
    name = function.get("name")
    if isinstance(name, str) and name and name != call.name:
        # A name arrives whole in its first delta; a few servers split it, some repeat it.
        call.name += name
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call.arguments.append(arguments)
    elif arguments is not None:
        call.arguments.append(json.dumps(arguments))


def _outgoing(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as sent: an assistant's null content becomes "" (llama-cpp-python 500s)."""
    return [
        {**message, "content": ""}
        if message.get("role") == "assistant" and message.get("content") is None
        else message
        for message in messages
    ]


def _sse_data(line: str) -> str | None:
    """The payload of an SSE `data:` line; None for other fields, comments and blank lines."""
    if not line.startswith("data:"):
        return None
    data = line[5:]
    return data[1:] if data.startswith(" ") else data


def _error_info(content: bytes) -> tuple[str, str | None]:
    """The message and code of an error body in the shapes servers use (OpenAI, Ollama, FastAPI)."""
    text = content.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip(), None
    if not isinstance(data, dict):
        return text.strip(), None
    error = data.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        return (
            str(message) if message is not None else text.strip(),
            str(code) if code is not None else None,
        )
    if isinstance(error, str):
        return error, None
    for key in ("message", "detail"):
        if isinstance(data.get(key), str):
            return str(data[key]), None
    return text.strip(), None


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
    return {key: value for key, value in usage.items() if _int(value) is not None}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
