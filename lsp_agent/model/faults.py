"""What the user reads when the endpoint fails: one sentence that says what happened and what
to check, naming the URL and the setting, and never the API key.

Also which faults are worth another try (`Retry`), and how long the server asks us to wait.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from email.utils import parsedate_to_datetime

import httpx

from lsp_agent.model import (
    BASE_URL_SETTING,
    MODEL_SETTING,
    PROVIDER_SETTING,
    TOOL_MODELS,
    ProviderError,
    body,
    client,
)
from lsp_agent.model.stream import Nonsense, page_title

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
EXCERPT_CHARS = 200
LISTED_MODELS = 20
MODEL_MISSING = re.compile(r"model\b.*\b(not found|does not exist|not exist|unknown)", re.I | re.S)
CONTEXT_EXCEEDED = re.compile(
    r"context[ _](length|window)|maximum context|prompt is too long|too many tokens", re.I
)
TOOLS_UNSUPPORTED = re.compile(
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


class Retry(Exception):
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


class StreamWithToolsRefused(Exception):
    """The server cannot stream when tools are present (llama-cpp-python, older llama.cpp)."""


class StreamOptionsRefused(Exception):
    """The server rejects `stream_options` (some older OpenAI-compatible servers)."""


class Sentences:
    """The sentences of a provider: mixed into it, they read its URL, model and key hint."""

    base_url: str
    model: str
    read_timeout: float
    connect_timeout: float
    _api_key: str | None
    _route: client.Route
    api_key_hint: str
    reply_shape: str
    api_hint: str

    def _gave_up(self, fault: Retry, retries: int, wait: float | None = None) -> ProviderError:
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
        """The sentence for a request that failed before an answer, or whose answer cannot be
        read as one: what happened, where, and what to check."""
        if isinstance(error, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
            return self._invalid_url(str(error))
        if isinstance(error, httpx.ProxyError):
            # httpcore says the proxy's answer to the CONNECT, e.g. "407 Proxy Authentication
            # Required".
            return self._proxy_refused(str(error), f"a tunnel to {self._route.address}")
        if isinstance(error, httpx.LocalProtocolError):
            # Never its text: h11 quotes the header it refused, and that may be the key.
            return self._unsendable("HTTP refused one of its headers")
        if isinstance(error, body.BodyTooLarge):
            return ProviderError(
                f"the answer from {self.base_url} was cut off: {error}, which no model's reply "
                f"is (a stream without end, or an endpoint that is not a model's): check "
                f"{BASE_URL_SETTING} and the server's log"
            )
        if isinstance(error, body.Undecodable):
            return ProviderError(
                f"the answer from {self.base_url} cannot be decoded ({error}): check the "
                "server's log"
            )
        if isinstance(error, httpx.ConnectTimeout):
            return self._unreachable(
                f"could not connect to {self._first_hop()} within {self.connect_timeout:g} s"
            )
        if isinstance(error, httpx.ConnectError):
            return self._connect_failed(error)
        if isinstance(error, httpx.TimeoutException):
            return ProviderError(
                f"the model endpoint at {self.base_url} sent nothing for {self.read_timeout:.0f} s "
                f"({type(error).__name__}): is the server overloaded? check its log"
            )
        return ProviderError(
            f"the connection to {self.base_url} failed ({self._via(type(error).__name__)}): "
            f"check {BASE_URL_SETTING} and the server's log"
        )

    def _connect_failed(self, error: httpx.ConnectError) -> ProviderError:
        """The sentence for a connection that was not made: the certificate, the handshake, or
        what the operating system said."""
        cause = _os_error(error)
        if isinstance(cause, ssl.SSLCertVerificationError):
            return self._tls_refused(
                f"the TLS certificate of {self._tls_peer('of')} was refused: "
                f"{cause.verify_message or cause.reason}"
            )
        if isinstance(cause, ssl.SSLError):
            return self._tls_refused(
                f"the TLS handshake with {self._tls_peer('with')} failed "
                f"({cause.reason or cause}): does it speak https on that port?"
            )
        why = _reason(cause) if cause is not None else str(error)
        return self._unreachable(f"could not connect to {self._first_hop()}: {why}")

    def _unreachable(self, what: str) -> ProviderError:
        """The sentence for a connection that was not made: `what` says which and why."""
        return ProviderError(
            f"cannot reach the model endpoint at {self.base_url} ({what}): is the server "
            f"running? Set {BASE_URL_SETTING}"
        )

    def _first_hop(self) -> str:
        """Where a connection goes first: the endpoint, or the proxy in front of it."""
        route = self._route
        return f"the proxy at {route.proxy_shown}" if route.proxy else route.address

    def _tls_peer(self, word: str) -> str:
        """Who spoke TLS: the endpoint, or an https proxy on the way, which the error does not
        tell apart ("model.test (or of the proxy at https://proxy:3128)")."""
        route = self._route
        if route.proxy_shown.startswith("https:"):
            return f"{route.host} (or {word} the proxy at {route.proxy_shown})"
        return route.host

    def _tls_refused(self, what: str) -> ProviderError:
        return ProviderError(
            f"{what}: check {BASE_URL_SETTING}; behind a proxy that inspects traffic, point "
            "SSL_CERT_FILE at its certificate authority"
        )

    def _proxy_refused(self, answer: str, request: str) -> ProviderError:
        """The sentence for a proxy that refused `request` ("a tunnel to host:443", a URL);
        `answer` is its status and what it said."""
        route = self._route
        said = f"the proxy at {route.proxy_shown} answered {answer} to the request for {request}"
        if answer.startswith("407"):
            return ProviderError(
                f"{said}: check the user and password in the proxy's URL ({route.variables})",
                407,
            )
        return self._proxy_problem(said)

    def _proxy_problem(self, problem: str) -> ProviderError:
        return ProviderError(
            f"{problem}: check the proxy settings (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and "
            f"NO_PROXY) for {self.base_url}"
        )

    def _unsendable(self, problem: str) -> ProviderError:
        """The sentence for a request that cannot be sent: a header HTTP cannot carry."""
        return ProviderError(
            f"the request to {self.base_url} cannot be sent: {problem}; check "
            f"{self.api_key_hint} (one line of plain text)"
        )

    def _via(self, what: str) -> str:
        """`what` happened, and through which proxy if there is one."""
        route = self._route
        return f"{what}, through the proxy at {route.proxy_shown}" if route.proxy else what

    def _invalid_url(self, problem: str) -> ProviderError:
        return ProviderError(
            f"the model endpoint URL '{self.base_url}' is not valid ({problem}): set "
            f"{BASE_URL_SETTING} to a URL like http://localhost:11434/v1"
        )

    def _nonsense(self, fault: Nonsense, url: str) -> ProviderError:
        """The sentence for an answer that is not a reply."""
        if fault.web_page:
            return ProviderError(
                f"the model endpoint {url} {fault.what}, not a model reply: {BASE_URL_SETTING} "
                f"points at a web site (a login page or a web UI?) rather than its API; "
                f"{self.api_hint}"
            )
        return ProviderError(
            f"the model endpoint {url} {fault.what}: that is not {self.reply_shape}; check that "
            f"{BASE_URL_SETTING} and {PROVIDER_SETTING} name the API the server speaks "
            f"({self.api_hint}), and the server's log"
        )

    def _excerpt(self, content: bytes) -> str:
        """A short, key-free excerpt of what the server said."""
        if content.lstrip()[:1] == b"<" and (title := page_title(content)) is not None:
            return f"a web page titled '{title}'"
        message, _ = error_info(content)
        text = " ".join(message.split()) or "no details"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        if len(text) > EXCERPT_CHARS:
            text = text[: EXCERPT_CHARS - 1] + "…"
        return text


def error_info(content: bytes) -> tuple[str, str | None]:
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


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it, outermost first (httpx raises from httpcore, which raises
    from what the operating system or the TLS library said)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _os_error(error: BaseException) -> OSError | None:
    """What the operating system or the TLS library said under `error`: the first error of the
    chain that names a cause (anyio's "All connection attempts failed" does not; the refusal it
    wraps does)."""
    found = None
    for cause in _causes(error):
        if isinstance(cause, OSError):
            found = cause
            if isinstance(cause, ssl.SSLError) or cause.errno is not None:
                return cause
    return found


def _reason(error: OSError) -> str:
    """What the operating system said, in a few words."""
    if isinstance(error, socket.gaierror):
        return f"the host name could not be resolved ({error.strerror})"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return error.strerror or str(error) or type(error).__name__
