"""The HTTP/1.1 client every model request goes through: asyncio streams, a keep-alive pool,
proxies from the environment.

Why our own: the server's own CPU time per model call should stay under two milliseconds, and
two thirds of it went to httpx's request and streamed-read path (httpcore, h11, anyio on every
chunk). Here a request is a handful of calls: the head written beside the body, the answer's
head parsed line by line with `readline`, the body handed on as each network read brings it.

What it does is what httpx does by default: http and https (with the caller's `SSLContext`),
default ports, IPv6 literals, IDNA host names, Basic credentials from the URL; chunked,
Content-Length and read-to-the-end bodies, gzip and deflate decoded; 1xx interim answers
skipped; idle connections kept per origin and reused, with one transparent retry when a reused
connection turns out to have been closed by the server; HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and
NO_PROXY (absolute-form requests and CONNECT tunnels), except that loopback hosts always go
direct. No redirects, no cookies, no HTTP/2. The exceptions carry httpx's names and hierarchy:
the providers name them in the sentences the user reads.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import functools
import ipaddress
import json
import socket
import ssl
import string
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

MAX_HEAD = 64 * 1024
"""The longest response head (status line, headers, or a chunked body's trailers) accepted."""
READ_SIZE = 1 << 18
"""The most one read asks for: whatever has arrived, up to this, is handed on at once. A
quarter of a megabyte of tiny SSE events takes the reader 2-3 ms to split, and the event loop
waits meanwhile (with a megabyte per read, steps of 11 ms were measured)."""
MAX_BODY = 256 * 1024 * 1024
"""The most body one answer may bring, decoded. A model's reply is a few megabytes at most (a
long one streamed in tiny events); past this the answer is not one, and holding it would only
fill the memory: a gzip bomb, a stream without end."""
DECODED_PIECE = 1 << 20
"""The most a compressed piece is expanded to at once (a kilobyte of gzip can hold a gigabyte)."""
SMALL_BODY = 64 * 1024
"""Bodies (or a body's first part) up to this size are sent in one write with the head (one
system call); longer ones are written after it, never copied into one buffer with it. (Not
`writelines`, which would send both in one `sendmsg` from Python 3.12: there it does not pause
the writer when the socket is full, so `drain` returns at once and the write timeout never
applies.)"""
Content = bytes | Sequence[bytes]
"""A request's body: whole, or the parts it is made of (see `encoding.json_parts`)."""
MAX_IDLE = 4
"""Idle connections kept per origin: a turn makes one request at a time."""
KEEPALIVE_SECONDS = 60.0
"""An idle connection older than this is closed rather than reused: a firewall or NAT may have
dropped it silently, and a request sent on it would wait for the whole read timeout. (A server
that closes an idle connection is noticed, and a request that meets it is retried.)"""

DEFAULT_PORTS = {"http": 80, "https": 443}
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
"""Methods whose requests say `Content-Length` even when the body is empty."""
HOST_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "-._")
HEX_DIGITS = b"0123456789abcdefABCDEF"
LINE_ENDS = (b"\r\n", b"\n")

CLOSED_BEFORE_ANSWER = "the server closed the connection without sending a response"
NOT_HTTP = "the server's answer is not HTTP/1.1 (its first line is not a status line)"
HEAD_TOO_LONG = f"the head of the server's answer is longer than {MAX_HEAD // 1024} KiB"
CLOSED_IN_HEAD = "the server closed the connection in the middle of its answer's head"
MALFORMED_HEADER = "the server's answer has a malformed header line"
LONGER_CHUNK = "a chunk of the body is longer than its size says"
LONG_CHUNK_LINE = "a chunk size line of the body is too long"
CLOSED_IN_CHUNKED = "the server closed the connection before the end of the chunked body"
PORT_RANGE = "the URL's port is not a number from 1 to 65535"


class HTTPError(Exception):
    """Anything a request can raise (except `InvalidURL`)."""


class TransportError(HTTPError):
    """The exchange with the server failed."""


class TimeoutException(TransportError):
    """The server took longer than a timeout allowed."""


class ConnectTimeout(TimeoutException):
    """The connection (TCP, a proxy's tunnel, the TLS handshake) was not made in time."""


class ReadTimeout(TimeoutException):
    """The server sent nothing for the read timeout."""


class WriteTimeout(TimeoutException):
    """The request could not be sent within the write timeout."""


class NetworkError(TransportError):
    """The operating system reported a failure."""


class ConnectError(NetworkError):
    """No connection: refused, unknown host, unreachable, or a certificate refused."""


class TLSError(ConnectError):
    """The TLS handshake failed, or the server's certificate was refused."""


class ReadError(NetworkError):
    """The connection broke while the answer was being read."""


class WriteError(NetworkError):
    """The connection broke while the request was being sent."""


class ProtocolError(TransportError):
    """Something on the wire broke HTTP's rules."""


class RemoteProtocolError(ProtocolError):
    """The server broke HTTP's rules, or closed the connection before its answer was whole."""


class ProxyError(TransportError):
    """The proxy refused the tunnel, or is of a kind this client cannot use."""


class UnsupportedProtocol(TransportError):
    """The URL's scheme is not http or https, or it has none."""


class BodyTooLarge(TransportError):
    """The answer's body is larger than the client accepts (`MAX_BODY`)."""


class DecodingError(HTTPError):
    """The body's content coding is unknown, or the body is not valid in it."""


class InvalidURL(Exception):
    """The URL cannot be used: no host, a bad port, a malformed address."""


class Headers(Mapping[str, str]):
    """A response's headers: names are case-insensitive, repeated fields are joined with ", "."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Iterable[tuple[str, str]] = ()) -> None:
        joined: dict[str, str] = {}
        for name, value in fields:
            key = name.lower()
            joined[key] = f"{joined[key]}, {value}" if key in joined else value
        self._fields = joined
        """Each header's value, under its lower-case name."""

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Headers({self._fields!r})"


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a request goes, as its URL says."""

    scheme: str
    host: str
    """What is connected to and named to TLS: IDNA-encoded, an IPv6 address without brackets."""
    port: int
    authority: str
    """The `Host` header: brackets around an IPv6 address, the port when it is not the default."""
    path: str
    """The request target: the path, and the query when there is one."""
    authorization: str | None
    """`Basic …` from the URL's user and password, when it has them."""

    @property
    def address(self) -> str:
        """`host:port`, as a CONNECT request and the error messages name it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class _Proxy:
    """An HTTP proxy from the environment."""

    url: str
    """The proxy as messages name it: scheme, host and port, never the credentials."""
    tls: bool
    """True for an https:// proxy: the connection to the proxy itself is TLS."""
    host: str
    port: int
    authorization: str | None = None
    """`Basic …` from the proxy URL's user and password, sent as `Proxy-Authorization`."""


class _Unanswered(Exception):
    """The connection failed before any byte of the answer arrived: a reused connection that
    fails so was closed by the server while idle, and the request is worth sending again."""

    def __init__(self, error: HTTPError) -> None:
        super().__init__(str(error))
        self.error = error
        """What to raise when the request is not sent again."""


class _Connection:
    """One connection to an origin (or to the proxy in front of it)."""

    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0
        """When it went back to the pool (`time.monotonic()`)."""

    def reusable(self, now: float) -> bool:
        """Still open at both ends, and not idle for too long."""
        return (
            now - self.idle_since < KEEPALIVE_SECONDS
            and not self.reader.at_eof()
            and not self.writer.transport.is_closing()
        )

    def close(self) -> None:
        """Close it politely: the end of an exchange that went well."""
        self.writer.close()

    def abort(self) -> None:
        """Drop it at once: an answer left half-read, a failure, a cancellation. The server
        sees the disconnect (and stops generating)."""
        self.writer.transport.abort()


class Response:
    """An answer: status and headers when it arrives, the body as it is read."""

    def __init__(
        self,
        client: Client,
        origin: tuple[Any, ...],
        connection: _Connection,
        head: tuple[str, int, str, list[tuple[str, str]]],
        method: str,
        keep_alive: bool,
    ) -> None:
        version, status, reason, fields = head
        self.status_code = status
        self.reason = reason
        """The reason phrase of the status line, as the server wrote it."""
        self.http_version = version
        """`HTTP/1.1` or `HTTP/1.0`."""
        self.headers = Headers(fields)
        self._client = client
        self._origin = origin
        """The pool the connection goes back to when the body has been read to its end."""
        self._connection: _Connection | None = connection
        """The connection the body is read from; None once the body ended or it was dropped."""
        self._content: bytes | None = None
        """The whole body, once `aread` read it."""
        self._started = False
        """True once the body began to be read: it can be read only once."""
        self._length: int | None = None
        """The body's size when the server announced it; None with `_chunked` or to the end."""
        self._chunked = False
        connection_header = self.headers.get("connection", "").lower()
        if version == "HTTP/1.1":
            self._keep_alive = keep_alive and "close" not in connection_header
        else:
            self._keep_alive = keep_alive and "keep-alive" in connection_header
        """True when the connection may carry another request once the body is read."""
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._length = 0
            if status == 101:  # what follows is another protocol
                self._keep_alive = False
        elif (coding := self.headers.get("transfer-encoding")) is not None:
            if coding.lower().replace(" ", "") != "chunked":
                raise RemoteProtocolError(
                    f"the server's answer has the transfer coding '{coding}': only chunked is "
                    "supported"
                )
            self._chunked = True
            if "content-length" in self.headers:
                # Two framings: the body is read as chunked, but what follows it is suspect.
                self._keep_alive = False
        elif (length := self.headers.get("content-length")) is not None:
            self._length = _content_length(length)
        else:
            self._keep_alive = False

    def __repr__(self) -> str:
        return f"<Response [{self.status_code} {self.reason}]>"

    @property
    def content(self) -> bytes:
        """The body, once `aread` has read it."""
        if self._content is None:
            raise RuntimeError("read the body first")
        return self._content

    async def aread(self) -> bytes:
        """Read the whole body (decoded), keep it in `content`, and return it."""
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.aiter_bytes()])
        return self._content

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives, de-chunked and decoded: each network read is handed on at
        once (a 20 MB chunk comes in pieces, not in one piece at its end)."""
        if self._content is not None:
            return _once(self._content)
        if self._started:
            raise RuntimeError("the body is being read already: it can be read only once")
        self._started = True
        coding = self.headers.get("content-encoding", "").strip().lower()
        if coding in ("", "identity"):
            return self._limited(self._body())
        return self._limited(self._decoded(self._body(), coding))

    async def _limited(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`body`, ended with `BodyTooLarge` (and the connection closed) once it has brought
        more than the client accepts."""
        allowed = self._client._max_body
        size = 0
        async for data in body:
            size += len(data)
            if size > allowed:
                self._abandon()
                raise BodyTooLarge(
                    f"the answer's body is larger than {allowed / 2**20:g} MiB (decoded)"
                )
            yield data

    def json(self) -> Any:
        """The body read as JSON."""
        return json.loads(self.content)

    async def aclose(self) -> None:
        """Done with the answer: a body not read to its end closes the connection."""
        self._abandon()

    def _abandon(self) -> None:
        if self._connection is not None:
            self._connection.abort()
            self._connection = None

    def _finished(self) -> None:
        """The body was read to its end: the connection goes back to the pool, or is closed."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._keep_alive:
            self._client._release(self._origin, connection)
        else:
            connection.close()

    async def _body(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, framed as the head said."""
        assert self._connection is not None
        reader = self._connection.reader
        seconds = self._client._read_timeout
        try:
            if self._chunked:
                async for data in self._chunks(reader, seconds):
                    yield data
            elif self._length is not None:
                remaining = self._length
                while remaining:
                    async with asyncio.timeout(seconds):
                        data = await reader.read(min(remaining, READ_SIZE))
                    if not data:
                        raise RemoteProtocolError(
                            f"the server closed the connection after {self._length - remaining:,} "
                            f"of the {self._length:,} bytes of the body it announced"
                        )
                    remaining -= len(data)
                    if not remaining:
                        # Whole: the connection is free again, even if the reader stops here.
                        self._finished()
                    yield data
            else:
                while True:
                    async with asyncio.timeout(seconds):
                        data = await reader.read(READ_SIZE)
                    if not data:
                        break
                    yield data
        except BaseException as error:
            self._abandon()
            if isinstance(error, TimeoutError):
                raise ReadTimeout(f"the server sent nothing for {seconds:g} s") from None
            if isinstance(error, OSError):
                raise ReadError(f"the connection broke: {_reason(error)}") from None
            raise
        self._finished()

    async def _chunks(self, reader: asyncio.StreamReader, seconds: float) -> AsyncIterator[bytes]:
        """A chunked body's data, one piece per network read: the framing of every chunk that
        arrived is taken off in one pass (a model's reply is many small chunks that usually
        arrive together), and only a read that finds nothing waits, under the timeout."""
        chunked = _Dechunker()
        while not chunked.done:
            async with asyncio.timeout(seconds):
                data = await reader.read(READ_SIZE)
            if not data:
                chunked.closed()
                break
            if piece := chunked.feed(data):
                yield piece
        if not chunked.reusable:
            self._keep_alive = False

    async def _decoded(self, raw: AsyncIterator[bytes], coding: str) -> AsyncIterator[bytes]:
        """The body decoded from its content codings (gzip and deflate; applied in order, so
        undone in reverse)."""
        try:
            decoders = [_Decoder(name.strip()) for name in reversed(coding.split(","))]
        except DecodingError:
            self._abandon()
            raise
        try:
            async for data in raw:
                for piece in _undone(decoders, data):
                    yield piece
            tail = b""
            for decoder in decoders:
                tail = b"".join(decoder.pieces(tail)) + decoder.flush()
        except zlib.error as error:
            self._abandon()
            raise DecodingError(f"the body is not valid {coding} ({error})") from None
        if tail:
            yield tail


def _undone(decoders: list[_Decoder], data: bytes) -> Iterator[bytes]:
    """`data` through every decoder in turn, in bounded pieces."""
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    for piece in first.pieces(data):
        yield from _undone(rest, piece)


class _Decoder:
    """One content coding undone, incrementally."""

    __slots__ = ("_guess", "_zlib", "coding")

    def __init__(self, coding: str) -> None:
        if coding in ("gzip", "x-gzip"):
            wbits = zlib.MAX_WBITS | 16
        elif coding == "deflate":
            wbits = zlib.MAX_WBITS
        elif coding == "identity":
            wbits = 0
        else:
            raise DecodingError(
                f"the body is encoded as '{coding}', which this client does not decode "
                "(it asks for gzip or deflate)"
            )
        self.coding = coding
        self._zlib = zlib.decompressobj(wbits) if wbits else None
        self._guess = coding == "deflate"
        """True until the first bytes said whether "deflate" is zlib-wrapped (as the standard
        says) or raw (as some servers send it)."""

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """`data` decoded, in pieces of at most `DECODED_PIECE` bytes."""
        if self._zlib is None:
            yield data
            return
        while True:
            piece = self._decompress(data)
            if piece:
                yield piece
            data = self._zlib.unconsumed_tail
            if not data and len(piece) < DECODED_PIECE:
                return

    def _decompress(self, data: bytes) -> bytes:
        assert self._zlib is not None
        if self._guess:
            self._guess = False
            try:
                return self._zlib.decompress(data, DECODED_PIECE)
            except zlib.error:
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._zlib.decompress(data, DECODED_PIECE)

    def flush(self) -> bytes:
        return b"" if self._zlib is None else self._zlib.flush()


class _Stream:
    """`Client.stream`: the answer's head on entry; on exit the connection goes back to the
    pool if the body was read to its end, else it is closed."""

    __slots__ = ("_client", "_request", "_response")

    def __init__(
        self, client: Client, request: tuple[str, str, Content, Mapping[str, str] | None]
    ) -> None:
        self._client = client
        self._request = request
        self._response: Response | None = None

    async def __aenter__(self) -> Response:
        self._response = await self._client._send(*self._request)
        return self._response

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._response is not None:
            self._response._abandon()


class Client:
    """An HTTP/1.1 client with a pool of keep-alive connections per origin."""

    def __init__(
        self,
        *,
        tls: ssl.SSLContext,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        write_timeout: float = 60.0,
        trust_env: bool = True,
        user_agent: str = "lsp-agent",
        max_body: int = MAX_BODY,
    ) -> None:
        self._tls = tls
        """The certificates https servers (and https proxies) are checked against."""
        self._connect_timeout = connect_timeout
        """Seconds for TCP, a proxy's tunnel and the TLS handshake together."""
        self._read_timeout = read_timeout
        """Seconds any one read may wait for the server."""
        self._write_timeout = write_timeout
        """Seconds the request may take to leave."""
        self._user_agent = user_agent
        self._max_body = max_body
        """The most body (decoded) one answer may bring; past it, `BodyTooLarge`."""
        self._proxies = urllib.request.getproxies_environment() if trust_env else {}
        """The proxies the environment names, by scheme (`no` holds NO_PROXY), read once."""
        self._routes: dict[tuple[str, str, int], _Proxy | None] = {}
        """The proxy (or None: direct) each origin goes through, decided once."""
        self._idle: dict[tuple[Any, ...], list[_Connection]] = {}
        """Idle connections by origin (scheme, host, port, proxy), the newest last."""
        self._closed = False

    async def aclose(self) -> None:
        """Close the idle connections; later requests are refused."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def stream(
        self,
        method: str,
        url: str,
        *,
        content: Content = b"",
        headers: Mapping[str, str] | None = None,
    ) -> contextlib.AbstractAsyncContextManager[Response]:
        """Send a request; the context gives the answer with its body not yet read. `content`
        is the body, or the parts it is made of, sent one after the other."""
        return _Stream(self, (method, url, content, headers))

    async def get(self, url: str, *, headers: Mapping[str, str] | None = None) -> Response:
        """GET `url` and read the answer's body."""
        response = await self._send("GET", url, b"", headers)
        try:
            await response.aread()
        finally:
            response._abandon()
        return response

    async def _send(
        self, method: str, url: str, content: Content, headers: Mapping[str, str] | None
    ) -> Response:
        """Send the request on an idle connection or a new one; return when the answer's head
        has arrived."""
        if self._closed:
            raise RuntimeError("the HTTP client is closed")
        target = _parse_url(url)
        proxy = self._route(target)
        origin = (target.scheme, target.host, target.port, proxy)
        head, keep_alive = _request_head(method, target, proxy, content, headers, self._user_agent)
        connection = self._reuse(origin)
        reused = connection is not None
        while True:
            if connection is None:
                connection = await self._connect(target, proxy)
            try:
                answer = await self._exchange(connection, head, content)
                return Response(self, origin, connection, answer, method, keep_alive)
            except _Unanswered as unanswered:
                connection.abort()
                if not reused:
                    raise unanswered.error from None
                # The server closed it while it sat idle; the others it kept idle may be gone
                # too. The request goes once more, on a new connection.
                for stale in self._idle.pop(origin, []):
                    stale.abort()
                reused = False
                connection = None
            except BaseException:
                connection.abort()
                raise

    async def _exchange(
        self, connection: _Connection, head: bytes, content: Content
    ) -> tuple[str, int, str, list[tuple[str, str]]]:
        """Write the request, read the answer's head (after any 1xx interim answers)."""
        writer = connection.writer
        parts = (content,) if isinstance(content, bytes) else content
        try:
            if not parts or len(parts[0]) <= SMALL_BODY:
                writer.write(head + parts[0] if parts else head)
                parts = parts[1:]
            else:
                writer.write(head)
            for part in parts:
                # A view: what the socket does not take at once is kept without a copy first.
                writer.write(memoryview(part) if len(part) > SMALL_BODY else part)
            async with asyncio.timeout(self._write_timeout):
                await writer.drain()
        except TimeoutError:
            raise WriteTimeout(
                f"the request was not sent within {self._write_timeout:g} s"
            ) from None
        except OSError as error:
            raise _Unanswered(
                WriteError(f"the connection broke while sending the request: {_reason(error)}")
            ) from None
        answer = await _read_head(connection.reader, self._read_timeout, first=True)
        while 100 <= answer[1] < 200 and answer[1] != 101:
            answer = await _read_head(connection.reader, self._read_timeout, first=False)
        return answer

    def _reuse(self, origin: tuple[Any, ...]) -> _Connection | None:
        """An idle connection to `origin` that is still open, if there is one."""
        idle = self._idle.get(origin)
        if not idle:
            return None
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now):
                return connection
            connection.close()
        return None

    def _release(self, origin: tuple[Any, ...], connection: _Connection) -> None:
        """A connection whose answer was read to its end: keep it for the next request."""
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= MAX_IDLE:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    def _route(self, target: _Target) -> _Proxy | None:
        """The proxy a request to `target` goes through, or None to go direct."""
        key = (target.scheme, target.host, target.port)
        if key in self._routes:
            return self._routes[key]
        proxy = None
        value = self._proxies.get(target.scheme) or self._proxies.get("all")
        if value and not _loopback(target.host):
            host = target.host if ":" in target.host else f"{target.host}:{target.port}"
            # Public in urllib.request (requests uses it too), missing from typeshed.
            bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
            if not bypass(host, self._proxies):
                proxy = _parse_proxy(value)
        self._routes[key] = proxy
        return proxy

    async def _connect(self, target: _Target, proxy: _Proxy | None) -> _Connection:
        """A new connection to the target, through the proxy's tunnel when there is one."""
        host, port = (proxy.host, proxy.port) if proxy is not None else (target.host, target.port)
        where = target.address if proxy is None else f"the proxy at {proxy.url}"
        tls = proxy.tls if proxy is not None else target.scheme == "https"
        verified = host
        connection = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=self._tls if tls else None,
                    server_hostname=host if tls else None,
                    limit=MAX_HEAD,
                )
                connection = _Connection(reader, writer)
                if proxy is not None and target.scheme == "https":
                    await _tunnel(connection, target, proxy)
                    verified = target.host
                    await writer.start_tls(self._tls, server_hostname=target.host)
        except BaseException as error:
            if connection is not None:
                connection.abort()
            if isinstance(error, TimeoutError):
                raise ConnectTimeout(
                    f"could not connect to {where} within {self._connect_timeout:g} s"
                ) from None
            if isinstance(error, ssl.SSLCertVerificationError):
                raise TLSError(
                    f"the TLS certificate of {verified} was refused: "
                    f"{error.verify_message or error.reason}"
                ) from None
            if isinstance(error, ssl.SSLError):
                raise TLSError(
                    f"the TLS handshake with {verified} failed ({error.reason or error}): "
                    "does it speak https on that port?"
                ) from None
            if isinstance(error, OSError):
                raise ConnectError(f"could not connect to {where}: {_reason(error)}") from None
            raise
        return connection


async def _tunnel(connection: _Connection, target: _Target, proxy: _Proxy) -> None:
    """Ask the proxy for a tunnel to the target (CONNECT); raise `ProxyError` if refused."""
    lines = [f"CONNECT {target.address} HTTP/1.1", f"Host: {target.address}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    connection.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
    await connection.writer.drain()
    try:
        _, status, reason, _ = await _read_head(connection.reader, None, first=True)
    except (_Unanswered, RemoteProtocolError, ReadError):
        raise ProxyError(
            f"the proxy at {proxy.url} did not answer the request for a tunnel to {target.address}"
        ) from None
    if not 200 <= status < 300:
        hint = (
            ": check the user and password in the proxy's URL (HTTPS_PROXY or ALL_PROXY)"
            if status == 407
            else ""
        )
        raise ProxyError(
            f"the proxy at {proxy.url} answered {status} {reason} to the request for a tunnel "
            f"to {target.address}{hint}"
        )


async def _read_head(
    reader: asyncio.StreamReader, seconds: float | None, *, first: bool
) -> tuple[str, int, str, list[tuple[str, str]]]:
    """One answer's head: its version, status, reason and header fields. The whole head shares
    one timeout: it is small, and usually arrives in one piece."""
    try:
        async with asyncio.timeout(seconds):
            try:
                line = await reader.readline()
                # Some servers send a line break after a body; it is not the next answer.
                for _ in range(4):
                    if line not in LINE_ENDS:
                        break
                    line = await reader.readline()
            except ValueError:
                raise RemoteProtocolError(NOT_HTTP) from None
            if not line and first:
                raise _Unanswered(RemoteProtocolError(CLOSED_BEFORE_ANSWER))
            first = False
            version, status, reason = _status_line(line)
            fields = await _header_fields(reader, len(line))
    except TimeoutError:
        raise ReadTimeout(f"the server sent nothing for {seconds:g} s") from None
    except OSError as error:
        failure = ReadError(f"the connection broke: {_reason(error)}")
        if first:
            raise _Unanswered(failure) from None
        raise failure from None
    return version, status, reason, fields


def _status_line(line: bytes) -> tuple[str, int, str]:
    """The version, status and reason of an answer's first line."""
    if not line.endswith(b"\n"):
        raise RemoteProtocolError(
            CLOSED_IN_HEAD if line.startswith(b"HTTP/") or not line else NOT_HTTP
        )
    version = line[:8]
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or line[8:9] != b" "
        or not line[9:12].isdigit()
        or line[12:13] not in (b" ", b"\r", b"\n")
    ):
        raise RemoteProtocolError(NOT_HTTP)
    return version.decode("ascii"), int(line[9:12]), line[13:].rstrip(b"\r\n").decode("latin-1")


async def _header_fields(reader: asyncio.StreamReader, size: int) -> list[tuple[str, str]]:
    """The header fields that follow a status line of `size` bytes, up to the empty line."""
    fields: list[tuple[str, str]] = []
    while True:
        try:
            line = await reader.readline()
        except ValueError:
            raise RemoteProtocolError(HEAD_TOO_LONG) from None
        size += len(line)
        if size > MAX_HEAD:
            raise RemoteProtocolError(HEAD_TOO_LONG)
        if not line.endswith(b"\n"):
            raise RemoteProtocolError(CLOSED_IN_HEAD)
        if line in LINE_ENDS:
            return fields
        if line[0] in b" \t":
            # An obsolete folded line continues the previous field's value.
            if not fields:
                raise RemoteProtocolError(MALFORMED_HEADER)
            name, value = fields[-1]
            fields[-1] = (name, f"{value} {line.strip().decode('latin-1')}")
            continue
        name_bytes, colon, value_bytes = line.partition(b":")
        if not colon or not name_bytes or name_bytes != name_bytes.strip():
            raise RemoteProtocolError(MALFORMED_HEADER)
        fields.append((name_bytes.decode("latin-1"), value_bytes.strip().decode("latin-1")))


_SIZE, _DATA, _END, _TRAILERS = range(4)
"""Where a chunked body is: at a size line, in a chunk's data, at the line end after the data,
in the trailer fields after the last chunk."""


class _Dechunker:
    """A chunked body's framing taken off the bytes as they arrive, in any pieces."""

    __slots__ = ("_held", "_remaining", "_state", "_trailers", "done", "reusable")

    def __init__(self) -> None:
        self._state = _SIZE
        self._held = b""
        """The start of a line whose end has not arrived yet."""
        self._remaining = 0
        """Bytes of the current chunk's data still to come."""
        self._trailers = 0
        """Bytes of trailer fields so far."""
        self.done = False
        """True once the empty line after the last chunk (and its trailers) arrived."""
        self.reusable = True
        """False when something other than a line break followed the body: the connection
        carries no other answer."""

    def feed(self, data: bytes) -> bytes:
        """The data of the chunks in `data` (and in what came before it)."""
        if self._held:
            data, self._held = self._held + data, b""
        pieces = []
        position, size = 0, len(data)
        while position < size:
            state = self._state
            if state == _DATA:
                end = min(position + self._remaining, size)
                pieces.append(data if end - position == size else data[position:end])
                self._remaining -= end - position
                position = end
                if not self._remaining:
                    self._state = _END
                continue
            end = data.find(b"\n", position) + 1
            if not end:
                rest = data[position:]
                if state == _END and not b"\r\n".startswith(rest):
                    raise RemoteProtocolError(LONGER_CHUNK)
                if len(rest) > MAX_HEAD:
                    raise RemoteProtocolError(
                        HEAD_TOO_LONG if state == _TRAILERS else LONG_CHUNK_LINE
                    )
                self._held = rest
                break
            line = data[position:end]
            position = end
            if state == _END:
                if line not in LINE_ENDS:
                    raise RemoteProtocolError(LONGER_CHUNK)
                self._state = _SIZE
            elif state == _SIZE:
                if len(line) > MAX_HEAD:
                    raise RemoteProtocolError(LONG_CHUNK_LINE)
                self._remaining = _chunk_size(line)
                self._state = _DATA if self._remaining else _TRAILERS
            else:
                self._trailers += len(line)
                if self._trailers > MAX_HEAD:
                    raise RemoteProtocolError(HEAD_TOO_LONG)
                if line in LINE_ENDS:
                    self.done = True
                    # A stray line break after a body is tolerated (and skipped before the next
                    # answer); anything else means the connection cannot be trusted again.
                    self.reusable = not data[position:].strip(b"\r\n")
                    break
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def closed(self) -> None:
        """The server closed the connection: fine in the trailers (the body is whole, the
        connection is not reusable), a broken body anywhere else."""
        if self._state == _TRAILERS:
            self.done = True
            self.reusable = False
            return
        if self._state == _DATA:
            raise RemoteProtocolError(
                "the server closed the connection in the middle of a chunk of the body"
            )
        if self._state == _END and self._held:
            raise RemoteProtocolError(LONGER_CHUNK)
        raise RemoteProtocolError(CLOSED_IN_CHUNKED)


def _chunk_size(line: bytes) -> int:
    """The size on a chunk's size line (extensions after `;` are ignored)."""
    digits = line.split(b";", 1)[0].strip()
    # `int(…, 16)` alone would take "0x1f", "+1f" and "1_f".
    if not digits or digits.strip(HEX_DIGITS) or len(digits) > 16:
        raise RemoteProtocolError("a chunk size line of the body is not a hexadecimal number")
    return int(digits, 16)


def _content_length(value: str) -> int:
    """The body's size from `Content-Length` (repeated fields must agree)."""
    sizes = {size.strip() for size in value.split(",")}
    if len(sizes) != 1 or not (size := sizes.pop()).isdigit() or not size.isascii():
        raise RemoteProtocolError("the server's answer has an invalid Content-Length")
    return int(size)


def content_length(content: Content) -> int:
    """The size of a request body given whole or in parts."""
    return len(content) if isinstance(content, bytes) else sum(map(len, content))


async def _once(content: bytes) -> AsyncIterator[bytes]:
    yield content


def _request_head(
    method: str,
    target: _Target,
    proxy: _Proxy | None,
    content: Content,
    headers: Mapping[str, str] | None,
    user_agent: str,
) -> tuple[bytes, bool]:
    """The request's head, and False when it asks the server to close the connection."""
    fields = {
        "host": ("Host", target.authority),
        "user-agent": ("User-Agent", user_agent),
        "accept": ("Accept", "*/*"),
        "accept-encoding": ("Accept-Encoding", "gzip, deflate"),
    }
    size = content_length(content)
    if size or method in WITH_BODY:
        fields["content-length"] = ("Content-Length", str(size))
    if target.authorization is not None:
        fields["authorization"] = ("Authorization", target.authorization)
    through_proxy = proxy is not None and target.scheme == "http"
    if through_proxy and proxy is not None and proxy.authorization is not None:
        fields["proxy-authorization"] = ("Proxy-Authorization", proxy.authorization)
    if headers:
        for name, value in headers.items():
            fields[name.lower()] = (name, value)
    request_target = (
        f"{target.scheme}://{target.authority}{target.path}" if through_proxy else target.path
    )
    lines = [f"{method} {request_target} HTTP/1.1"]
    lines.extend([f"{name}: {value}" for name, value in fields.values()])
    text = "\r\n".join(lines) + "\r\n\r\n"
    # A line break inside a name or a value would end the head early, or smuggle a header in.
    if text.count("\n") != len(lines) + 1 or text.count("\r") != len(lines) + 1:
        raise ProtocolError(_bad_field(fields.values(), "a line break"))
    try:
        head = text.encode("latin-1")
    except UnicodeEncodeError:
        raise ProtocolError(
            _bad_field(fields.values(), "a character that is not Latin-1")
        ) from None
    return head, "close" not in fields.get("connection", ("", ""))[1].lower()


def _bad_field(fields: Iterable[tuple[str, str]], what: str) -> str:
    """Which request header has `what` in it (never its value: it may be a key)."""
    for name, value in fields:
        field = name + value
        if "\r" in field or "\n" in field or not field.isascii():
            return f"the request header {name!r} has {what} in it"
    return f"a request header has {what} in it"


@functools.lru_cache(maxsize=64)
def _parse_url(url: str) -> _Target:
    """What a request URL says: scheme, host, port, path and query, credentials."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as error:  # "Invalid IPv6 URL"
        raise InvalidURL(f"{error}") from None
    try:
        port = parts.port
    except ValueError:
        raise InvalidURL(PORT_RANGE) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        if not scheme:
            raise UnsupportedProtocol("the URL has no scheme: begin it with http:// or https://")
        if not parts.netloc:
            raise UnsupportedProtocol(
                f"the URL begins with '{parts.scheme}:', not http:// or https://"
            )
        raise UnsupportedProtocol(f"the URL's scheme {scheme}:// is not http:// or https://")
    host = _host(parts.hostname, "the URL")
    if port == 0:
        raise InvalidURL(PORT_RANGE)
    port = port or DEFAULT_PORTS[scheme]
    bracketed = f"[{host}]" if ":" in host else host
    authority = bracketed if port == DEFAULT_PORTS[scheme] else f"{bracketed}:{port}"
    path = _quote(parts.path, "/") or "/"
    if parts.query:
        path = f"{path}?{_quote(parts.query, '/?')}"
    return _Target(scheme, host, port, authority, path, _basic(parts.username, parts.password))


def _host(hostname: str | None, what: str) -> str:
    """A host name as it is connected to: IDNA-encoded, checked."""
    if not hostname:
        raise InvalidURL(f"{what} has no host")
    if ":" in hostname:
        try:
            ipaddress.IPv6Address(hostname.split("%", 1)[0])
        except ValueError:
            raise InvalidURL(f"{what} has an invalid IPv6 address") from None
        return hostname
    if not hostname.isascii():
        try:
            hostname = hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise InvalidURL(f"{what} has a host name that cannot be encoded (IDNA)") from None
    if not HOST_CHARACTERS.issuperset(hostname):
        raise InvalidURL(f"{what} has an invalid host name")
    return hostname


def _quote(text: str, safe: str) -> str:
    """`text` with what may not appear in a request line (spaces, controls, non-ASCII)
    percent-encoded; what is already encoded is kept."""
    return urllib.parse.quote(text, safe=safe + "%!$&'()*+,;=:@~[]")


def _basic(user: str | None, password: str | None) -> str | None:
    """A Basic authorization from a URL's (percent-encoded) user and password."""
    if user is None and password is None:
        return None
    pair = f"{urllib.parse.unquote(user or '')}:{urllib.parse.unquote(password or '')}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def _parse_proxy(value: str) -> _Proxy:
    """A proxy URL from the environment (a bare `host:port` means http://)."""
    if "://" not in value:
        value = f"http://{value}"
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError:
        raise ProxyError(
            "the proxy URL in the environment has an invalid port or address"
        ) from None
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        raise ProxyError("socks proxies are not supported; set HTTPS_PROXY to an http:// proxy")
    if scheme not in DEFAULT_PORTS:
        raise ProxyError(
            f"the proxy URL in the environment has the scheme {scheme}://; use an http:// proxy"
        )
    try:
        host = _host(parts.hostname, "the proxy URL in the environment")
    except InvalidURL as error:
        raise ProxyError(str(error)) from None
    port = port or DEFAULT_PORTS[scheme]
    bracketed = f"[{host}]" if ":" in host else host
    return _Proxy(
        f"{scheme}://{bracketed}:{port}",
        scheme == "https",
        host,
        port,
        _basic(parts.username, parts.password),
    )


def _loopback(host: str) -> bool:
    """True for this machine's own addresses: a local model server never goes through a
    proxy, whatever the environment says."""
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _reason(error: OSError) -> str:
    """What the operating system said, in a few words."""
    if isinstance(error, socket.gaierror):
        return f"the host name could not be resolved ({error.strerror})"
    if isinstance(error, ConnectionRefusedError) or (
        # Several addresses tried (IPv6 and IPv4 for "localhost"), all refused.
        error.errno is None and str(error).count(f"[Errno {errno.ECONNREFUSED}]") > 1
    ):
        return "connection refused"
    if isinstance(error, ssl.SSLError):
        return f"TLS error ({error.reason or error})"
    return error.strerror or str(error) or type(error).__name__
