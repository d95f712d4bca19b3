"""What lsp-agent adds to httpx, told through the provider against real servers on loopback.

httpx speaks HTTP; these stories check what is ours beside it (`model/client.py`,
`model/body.py`): the route through a proxy from the environment (a model on this machine always
reached directly), the certificates, the cap on what an answer may bring (compressed or not),
and that a request is never sent twice behind the provider's back.

Each server is an `asyncio.start_server` handler the test writes, so every framing and every
fault is scripted byte by byte; TLS uses a certificate authority made for the test module with
the openssl command; proxies are tiny ones started by the test. No mocks.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import itertools
import json
import logging
import os
import ssl
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.model import Provider, ProviderError, client, make_provider
from tests.fake_model import ScriptedModel, reply

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

WAIT = 10.0
"""How long a test waits for something that happens at once when the client is right: a guard
against a hang, never a pause."""
ASK = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "hi"}]
MODELS = b'{"object": "list", "data": [{"id": "test-model"}]}'
SOCKET_BUFFERS = 16 << 20
"""More than the kernel buffers between a loopback server and its client: what a server
manages to write past this was read by the client."""
HELD = 16 << 20
"""The most memory reading a capped answer may take, the test's own server included: four
times what it took when measured, a sixth of what reading the same answer whole would."""


@dataclass
class Request:
    """One request as a server read it."""

    line: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    """A server a test started: its address, and what it saw."""

    url: str
    port: int
    connections: int = 0
    """How many connections it accepted."""
    requests: list[Request] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection, or None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:] if line)
    }
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(lines[0], headers, body)


async def client_closed(reader: asyncio.StreamReader) -> None:
    """Wait until the client closes its end (EOF or reset)."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass


@asynccontextmanager
async def serve(
    handler: Handler, *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1"
) -> AsyncIterator[Server]:
    """Run `handler` for each connection to a server on loopback until the block ends."""
    server = Server("", 0)
    writers: list[asyncio.StreamWriter] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        server.tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.CancelledError, ssl.SSLError):
            pass  # the client went away, refused the certificate, or the test is over
        finally:
            writer.close()

    listener = await asyncio.start_server(on_connection, host, 0, ssl=tls)
    server.port = listener.sockets[0].getsockname()[1]
    authority = f"[{host}]" if ":" in host else host
    server.url = f"{'https' if tls else 'http'}://{authority}:{server.port}"
    try:
        yield server
    finally:
        listener.close()
        for writer in writers:
            writer.transport.abort()
        for task in server.tasks:
            task.cancel()
        await asyncio.gather(*server.tasks, return_exceptions=True)


def sse(text: str) -> bytes:
    """A whole chat-completion stream that says `text`."""
    events = [
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(b"data: %s\n\n" % json.dumps(event).encode() for event in events) + (
        b"data: [DONE]\n\n"
    )


def answer(content: bytes, *, kind: bytes = b"text/event-stream", more: bytes = b"") -> bytes:
    """A 200 answer with a Content-Length; `more` adds header lines."""
    return b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\n%sContent-Length: %d\r\n\r\n%s" % (
        kind,
        more,
        len(content),
        content,
    )


def chunked(content: bytes, *, more: bytes = b"", size: int = 1000) -> bytes:
    """A 200 event stream carrying `content` in chunks of `size` bytes."""
    pieces = (content[i : i + size] for i in range(0, len(content), size))
    framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n%sTransfer-Encoding: chunked\r\n"
        b"\r\n%s0\r\n\r\n" % (more, framed)
    )


def endpoint(text: str = "ok") -> Handler:
    """A keep-alive model endpoint: every chat request gets a stream saying `text`, every other
    request the model list."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            chat = request.line.startswith("POST ")
            writer.write(answer(sse(text)) if chat else answer(MODELS, kind=b"application/json"))
            await writer.drain()

    return handler


@pytest.fixture
async def open_provider() -> AsyncIterator[Callable[..., Provider]]:
    """Make providers with fast retries; all are closed when the test ends."""
    made: list[Provider] = []

    def factory(base_url: str, api_key: str | None = None, **options: Any) -> Provider:
        options.setdefault("base_delay", 0.001)
        provider = make_provider("openai", base_url, "test-model", api_key, **options)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()


async def text_of(provider: Provider) -> str:
    """One model call's answer."""
    return (await provider.complete(ASK, [], lambda _: None)).text


async def refusal(call: Awaitable[Any]) -> str:
    """The sentence a call ends with."""
    with pytest.raises(ProviderError) as caught:
        await call
    return caught.value.message


@pytest.fixture(autouse=True)
def no_proxy_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the proxies a test sets are in the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


# The route


def test_the_route_follows_the_environment_and_this_machine_goes_direct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://alice:s3cret@proxy.test:3128")
    monkeypatch.setenv("HTTP_PROXY", "proxy.test:8080")  # a bare host:port is http://
    monkeypatch.setenv("NO_PROXY", "direct.test,.internal.test")
    through = client.route("https://api.example.com/v1")
    assert (through.address, through.proxy_shown, through.variables) == (
        "api.example.com:443",
        "http://proxy.test:3128",
        "HTTPS_PROXY or ALL_PROXY",
    )
    assert through.proxy is not None
    assert "s3cret" not in through.proxy_shown + repr(through.proxy)
    assert client.route("http://models.example.com:8000/v1").proxy_shown == (
        "http://proxy.test:8080"
    )
    for url in (
        "http://localhost:11434/v1",
        "http://LOCALHOST./v1",
        "http://ollama.localhost:11434/v1",
        "http://127.0.0.1:8080/v1",
        "http://127.1.2.3/v1",
        "http://[::1]:8000/v1",
        "https://direct.test/v1",
        "https://model.internal.test/v1",
    ):
        assert client.route(url).proxy is None, url
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("ALL_PROXY", "https://proxy.test")
    fallback = client.route("https://api.example.com/v1")
    assert (fallback.proxy_shown, fallback.variables) == ("https://proxy.test:443", "ALL_PROXY")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("localhost:11434/v1", "begins with 'localhost:', not http:// or https://"),
        ("/v1/models", "has no scheme"),
        ("ftp://example.com/v1", "scheme ftp:// is not http:// or https://"),
        ("http:///v1", "has no host"),
        ("http://example.com:99999/v1", "port is not a number from 1 to 65535"),
        ("http://example.com:0/v1", "port is not a number from 1 to 65535"),
        ("http://[::1/v1", "IPv6"),
    ],
)
async def test_a_url_that_cannot_be_used_says_why_before_anything_is_sent(
    open_provider: Callable[..., Provider], url: str, said: str
) -> None:
    message = await refusal(text_of(open_provider(url)))
    assert said in message
    assert f"'{url}' is not valid" in message
    assert "lspAgent.baseUrl" in message


# Proxies


@dataclass
class Proxy:
    """A tiny forward proxy: it answers plain requests itself (a model list whose one model is
    the request line it was sent), and tunnels CONNECTs to `upstream` (a port on loopback),
    whatever host they name."""

    upstream: int = 0
    credentials: str = "alice:wonder land"
    seen: list[Request] = field(default_factory=list)

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        if request is None:
            return
        self.seen.append(request)
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        if request.headers.get("proxy-authorization") != expected:
            writer.write(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
            )
            await writer.drain()
            return
        if not request.line.startswith("CONNECT "):
            listed = json.dumps({"data": [{"id": request.line}]}).encode()
            writer.write(answer(listed, kind=b"application/json"))
            await writer.drain()
            return
        far_reader, far_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, far_writer), pipe(far_reader, writer))


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def proxy_url(proxy: Server, credentials: str = "alice:wonder%20land") -> str:
    return proxy.url.replace("://", f"://{credentials}@")


async def test_an_http_endpoint_is_reached_through_the_proxy_with_its_credentials(
    monkeypatch: pytest.MonkeyPatch, open_provider: Callable[..., Provider]
) -> None:
    proxy = Proxy()
    async with serve(proxy) as server:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(server))
        listed = await open_provider("http://models.test:8080/v1").list_models()
    assert listed == ["GET http://models.test:8080/v1/models HTTP/1.1"]
    assert proxy.seen[0].headers["host"] == "models.test:8080"


async def test_an_https_endpoint_is_reached_through_the_proxy_s_tunnel(
    monkeypatch: pytest.MonkeyPatch,
    open_provider: Callable[..., Provider],
    certificates: Certificates,
) -> None:
    async with (
        serve(endpoint("through the tunnel"), tls=certificates.server()) as target,
        serve(Proxy(upstream=target.port)) as proxy_server,
    ):
        monkeypatch.setenv("HTTPS_PROXY", proxy_url(proxy_server))
        provider = open_provider("https://model.test/v1")
        assert await text_of(provider) == "through the tunnel"
        assert await text_of(provider) == "through the tunnel"
    assert target.connections == proxy_server.connections == 1  # the tunnel was kept


async def test_an_https_proxy_is_checked_against_the_same_certificates(
    monkeypatch: pytest.MonkeyPatch,
    open_provider: Callable[..., Provider],
    certificates: Certificates,
) -> None:
    proxy = Proxy()
    async with (
        serve(endpoint(), tls=certificates.server()) as target,
        serve(proxy, tls=certificates.server(), host="127.0.0.1") as proxy_server,
    ):
        proxy.upstream = target.port
        monkeypatch.setenv("https_proxy", proxy_url(proxy_server))
        assert await open_provider("https://model.test/v1").list_models() == ["test-model"]
    assert proxy.seen[0].line == "CONNECT model.test:443 HTTP/1.1"


async def test_a_proxy_that_refuses_an_http_endpoint_names_the_credentials(
    monkeypatch: pytest.MonkeyPatch, open_provider: Callable[..., Provider]
) -> None:
    proxy = Proxy()
    async with serve(proxy) as server:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(server, "alice:wrong%20password"))
        provider = open_provider("http://models.test/v1")
        messages = [await refusal(text_of(provider)), await refusal(provider.list_models())]
    for message in messages:
        assert f"the proxy at {server.url} answered 407" in message
        assert "check the user and password in the proxy's URL (HTTP_PROXY or ALL_PROXY)" in message
        assert "wrong" not in message
        assert "alice" not in message
    assert len(proxy.seen) == 2  # neither was retried


async def test_a_proxy_that_hangs_up_on_the_tunnel_is_named(
    monkeypatch: pytest.MonkeyPatch, open_provider: Callable[..., Provider]
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with serve(hang_up) as server:
        monkeypatch.setenv("HTTPS_PROXY", server.url)
        message = await refusal(text_of(open_provider("https://model.test/v1", retries=1)))
    assert "broke before any reply after 1 retry" in message
    assert f"through the proxy at {server.url}" in message
    assert server.connections == 2  # the try, and the one retry the provider decided


async def test_socks_proxies_are_refused_with_a_sentence(
    monkeypatch: pytest.MonkeyPatch, open_provider: Callable[..., Provider]
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://user:pw@proxy.test:1080")
    message = await refusal(text_of(open_provider("https://api.example.test/v1")))
    assert "socks proxies are not supported; set HTTPS_PROXY to an http:// proxy" in message
    assert "NO_PROXY" in message
    assert "pw" not in message


async def test_no_proxy_hosts_and_this_machine_are_reached_directly(
    monkeypatch: pytest.MonkeyPatch, open_provider: Callable[..., Provider]
) -> None:
    proxy = Proxy()
    async with serve(proxy) as proxy_server, serve(endpoint()) as local:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(proxy_server))
        monkeypatch.setenv("NO_PROXY", "direct.invalid,.internal.invalid")
        for url in (local.url, local.url.replace("127.0.0.1", "localhost")):
            assert await open_provider(f"{url}/v1").list_models() == ["test-model"]
        for host in ("direct.invalid", "model.internal.invalid"):
            message = await refusal(open_provider(f"http://{host}/v1").list_models())
            assert f"could not connect to {host}:80: the host name could not be resolved" in (
                message
            )
        through = await open_provider("http://elsewhere.invalid/v1").list_models()
    assert through == ["GET http://elsewhere.invalid/v1/models HTTP/1.1"]  # the proxy works
    assert [request.line for request in proxy.seen] == through
    assert local.connections == 2


# Certificates


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path

    def server(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A certificate authority made for these tests, and a server certificate it signed for
    localhost, 127.0.0.1 and model.test."""
    folder = tmp_path_factory.mktemp("tls")

    def openssl(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], cwd=folder, check=True, capture_output=True)

    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=lsp-agent test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    openssl("req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (folder / "server.ext").write_text(
        "subjectAltName=DNS:localhost,DNS:model.test,IP:127.0.0.1\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
    )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
    )  # fmt: skip
    return Certificates(folder / "ca.pem", folder / "server.pem", folder / "server.key")


@pytest.fixture
def certificates(
    authority: Certificates, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Certificates]:
    """The test authority, trusted alone through SSL_CERT_FILE, as a company's would be."""
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.ca))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    client.tls_context.cache_clear()
    yield authority
    client.tls_context.cache_clear()


async def test_an_endpoint_signed_by_the_authority_in_ssl_cert_file_is_trusted(
    open_provider: Callable[..., Provider], certificates: Certificates
) -> None:
    async with serve(endpoint("over TLS"), tls=certificates.server()) as server:
        for url in (server.url, server.url.replace("127.0.0.1", "localhost")):
            assert await text_of(open_provider(f"{url}/v1")) == "over TLS"


async def test_a_certificate_for_another_name_is_refused_with_what_to_do(
    open_provider: Callable[..., Provider], certificates: Certificates
) -> None:
    # 127.0.0.2 is loopback too, but not a name on the certificate.
    async with serve(endpoint(), tls=certificates.server(), host="127.0.0.2") as misnamed:
        message = await refusal(text_of(open_provider(f"{misnamed.url}/v1")))
    assert "the TLS certificate of 127.0.0.2 was refused: IP address mismatch" in message
    assert "SSL_CERT_FILE" in message
    assert "lspAgent.baseUrl" in message


async def test_https_to_a_plain_http_server_says_so(
    open_provider: Callable[..., Provider],
) -> None:
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # the TLS hello: a plain server answers it as a bad request
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    async with serve(plain) as server:
        url = server.url.replace("http://", "https://")
        message = await refusal(text_of(open_provider(f"{url}/v1")))
    assert "the TLS handshake with 127.0.0.1 failed" in message
    assert "does it speak https on that port?" in message


async def test_a_handshake_that_never_ends_is_named_with_the_time_waited(
    open_provider: Callable[..., Provider],
) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await client_closed(reader)  # takes the connection, never answers the hello

    async with serve(silent) as server:
        url = server.url.replace("http://", "https://")
        message = await refusal(text_of(open_provider(f"{url}/v1", connect_timeout=0.2)))
    assert f"could not connect to 127.0.0.1:{server.port} within 0.2 s" in message
    assert server.connections == 1  # not retried


# What an answer may bring


@dataclass
class Flooding:
    """A server that answers one head and then writes `data` `repeat` times, until done or the
    client hangs up: how much of it the server got to write."""

    head: bytes
    data: bytes
    repeat: int
    sent: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(self.head)
        try:
            for _ in range(self.repeat):
                writer.write(self.data)
                await writer.drain()
                self.sent += len(self.data)
        except ConnectionError:
            pass
        self.finished.set()
        await client_closed(reader)


def gzipped(data: bytes) -> bytes:
    """`data` in a gzip stream of one member."""
    return gzip.compress(data, compresslevel=1, mtime=0)


def chunk_of(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def endless_gzip() -> tuple[bytes, bytes]:
    """The start of a gzip stream, and a piece that may follow it any number of times: stored
    blocks of random bytes, which stand alone and do not compress."""
    compressor = zlib.compressobj(0, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    start = compressor.compress(b"data: ") + compressor.flush(zlib.Z_SYNC_FLUSH)
    piece = compressor.compress(os.urandom(MIB)) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return start, piece


MIB = 1 << 20
EVENTS = (
    b"data: " + json.dumps({"choices": [{"delta": {"content": "x" * 1000}}]}).encode() + (b"\n\n")
)
STREAM = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def flooding(kind: str) -> Flooding:
    """A server whose answer brings 64 MiB, framed and coded as `kind` says."""
    if kind == "plain":  # announced with its length
        data = EVENTS * 1000
        return Flooding(STREAM + b"Content-Length: %d\r\n\r\n" % (64 * len(data)), data, 64)
    if kind == "chunked":  # without end
        return Flooding(STREAM + b"Transfer-Encoding: chunked\r\n\r\n", chunk_of(EVENTS * 1000), 64)
    if kind == "gzip":  # the compressed stream itself over the cap
        start, piece = endless_gzip()
        head = STREAM + b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        return Flooding(head + chunk_of(start), chunk_of(piece), 64)
    assert kind == "gzip bomb"  # 64 KB that expand to 64 MiB
    return Flooding(
        STREAM + b"Content-Encoding: gzip\r\nConnection: close\r\n\r\n",
        gzipped(b"data: " + b"x" * (64 * MIB)),
        1,
    )


@pytest.mark.parametrize("kind", ["plain", "chunked", "gzip", "gzip bomb"])
async def test_an_answer_over_the_cap_is_cut_off_and_read_no_further(
    open_provider: Callable[..., Provider], kind: str
) -> None:
    server_side = flooding(kind)
    tracemalloc.start()
    try:
        async with serve(server_side) as server:
            message = await refusal(text_of(open_provider(f"{server.url}/v1", max_reply_bytes=MIB)))
            await asyncio.wait_for(server_side.finished.wait(), WAIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"the answer from {server.url}/v1 was cut off" in message
    assert "larger than 1 MiB" in message
    assert "lspAgent.baseUrl" in message
    assert server.connections == 1  # not retried: the next answer would be no better
    assert server_side.sent < SOCKET_BUFFERS  # the client stopped reading at the cap
    assert peak < HELD, f"{peak / MIB:.1f} MiB held while reading a 1 MiB answer"


@pytest.mark.parametrize("framing", ["length", "chunked"])
async def test_bytes_after_the_end_of_a_gzip_reply_are_not_read(
    open_provider: Callable[..., Provider], framing: str
) -> None:
    """A server sends a whole gzipped reply, then 64 MiB that belong to no gzip stream; the
    reply is whole and the rest is left unread."""
    reply_bytes = gzipped(sse("all there"))
    junk = b"\x00junk" * (MIB // 5)
    if framing == "length":
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(reply_bytes) + 64 * len(junk), reply_bytes)
        )
        server_side = Flooding(head, junk, 64)
    else:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunk_of(reply_bytes)
        )
        server_side = Flooding(head, chunk_of(junk), 64)
    tracemalloc.start()
    try:
        async with serve(server_side) as server:
            text = await text_of(open_provider(f"{server.url}/v1"))
            await asyncio.wait_for(server_side.finished.wait(), WAIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == "all there"
    assert server_side.sent < SOCKET_BUFFERS
    assert peak < HELD, f"{peak / MIB:.1f} MiB held for a reply of a few bytes"


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzipped),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send
    ],
    ids=["gzip", "deflate", "raw-deflate"],
)
async def test_compressed_replies_are_read_and_the_connection_kept(
    open_provider: Callable[..., Provider], coding: str, encode: Callable[[bytes], bytes]
) -> None:
    text = "the same words again and again " * 5000
    compressed = encode(sse(text))
    more = b"Content-Encoding: %s\r\n" % coding.encode()
    answers = itertools.cycle([answer(compressed, more=more), chunked(compressed, more=more)])
    requests: list[Request] = []

    async def compressing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            requests.append(request)
            writer.write(next(answers))
            await writer.drain()

    async with serve(compressing) as server:
        provider = open_provider(f"{server.url}/v1")
        assert [await text_of(provider), await text_of(provider)] == [text, text]
    assert requests[0].headers["accept-encoding"] == "gzip, deflate"
    assert server.connections == 1


@pytest.mark.parametrize(
    ("more", "content", "said"),
    [
        (b"Content-Encoding: br\r\n", b"xxxx", "encoded as 'br', which lsp-agent does not decode"),
        (b"Content-Encoding: gzip\r\n", b"xxxx", "not valid gzip"),
    ],
)
async def test_a_body_in_an_unknown_or_broken_coding_is_said(
    open_provider: Callable[..., Provider], more: bytes, content: bytes, said: str
) -> None:
    async def odd(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await read_request(reader) is not None:
            writer.write(answer(content, more=more))
            await writer.drain()

    async with serve(odd) as server:
        message = await refusal(text_of(open_provider(f"{server.url}/v1")))
    assert f"the answer from {server.url}/v1 cannot be decoded" in message
    assert said in message
    assert server.connections == 1


# A request goes once


async def test_a_post_the_server_never_answered_is_sent_again_only_by_the_retry_policy(
    open_provider: Callable[..., Provider], caplog: pytest.LogCaptureFixture
) -> None:
    """The server closes a kept connection after it has read the next POST, before any byte of
    an answer: it may have started on it (and billed it). httpx does not send it again; the
    provider's policy decides, after a pause, and says so."""
    posts: list[int] = []

    async def forgetful(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = server.connections
        while await read_request(reader) is not None:
            posts.append(number)
            if posts.count(number) > 1:
                return  # the second request on a connection: closed without a word
            writer.write(answer(sse("ok")))
            await writer.drain()

    async with serve(forgetful) as server:
        once = open_provider(f"{server.url}/v1", retries=0)
        assert await text_of(once) == "ok"
        message = await refusal(text_of(once))
        assert "broke before any reply (RemoteProtocolError)" in message
        assert posts == [1, 1]  # nothing sent behind the provider's back

        with caplog.at_level(logging.WARNING, logger="lsp_agent.model.http"):
            retrying = open_provider(f"{server.url}/v1", retries=1)
            assert await text_of(retrying) == "ok"
            assert await text_of(retrying) == "ok"
        assert posts == [1, 1, 2, 2, 3]  # the unanswered one, then the provider's one retry
    assert "retry 1 of 1" in caplog.text


async def test_an_idle_connection_the_server_closed_is_replaced_without_a_retry(
    open_provider: Callable[..., Provider], caplog: pytest.LogCaptureFixture
) -> None:
    closed = asyncio.Event()
    posts: list[int] = []

    async def closes_when_idle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = server.connections
        while await read_request(reader) is not None:
            posts.append(number)
            writer.write(answer(sse("ok")))
            await writer.drain()
            if number == 1:  # keep-alive as far as the client can tell; then closed while idle
                writer.close()
                await writer.wait_closed()
                closed.set()
                return

    async with serve(closes_when_idle) as server:
        provider = open_provider(f"{server.url}/v1")
        with caplog.at_level(logging.WARNING, logger="lsp_agent.model.http"):
            assert await text_of(provider) == "ok"
            await asyncio.wait_for(closed.wait(), WAIT)
            assert await text_of(provider) == "ok"
    assert posts == [1, 2]
    assert "retry" not in caplog.text


# What goes out


async def test_a_body_given_in_parts_goes_whole_with_its_length(
    open_provider: Callable[..., Provider],
) -> None:
    long_ask = [*ASK, {"role": "user", "content": "é" * 200_000}, {"role": "user", "content": "?"}]
    with ScriptedModel([reply("fine")]) as model:
        provider = open_provider(model.base_url)
        assert (await provider.complete(long_ask, [], lambda _: None)).text == "fine"
    (sent,) = model.bodies
    assert json.loads(sent)["messages"] == long_ask
    assert model.headers[0]["content-length"] == str(len(sent))
    assert "transfer-encoding" not in model.headers[0]
    assert model.headers[0]["user-agent"].startswith("lsp-agent/")


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("sk-pasted-123\r\nX-Evil: 1", "'authorization' has a line break in it"),
        ("sk-pasted-123\x00", "'authorization' has a character that is not printable ASCII"),
        ("sk-pasted-123é", "'authorization' has a character that is not printable ASCII"),
    ],
)
async def test_a_key_http_cannot_carry_is_said_before_anything_is_sent(
    open_provider: Callable[..., Provider], key: str, said: str
) -> None:
    async with serve(endpoint()) as server:
        provider = open_provider(f"{server.url}/v1", key)
        for call in (text_of(provider), provider.list_models()):
            message = await refusal(call)
            assert said in message
            assert "sk-pasted" not in message
    assert server.connections == 0


async def test_spaces_around_a_pasted_key_are_not_sent(
    open_provider: Callable[..., Provider],
) -> None:
    with ScriptedModel([reply("ok")], api_key="sk-right") as model:
        assert await text_of(open_provider(model.base_url, " sk-right\t")) == "ok"
    assert model.headers[0]["authorization"] == "Bearer sk-right"


def test_after_the_warm_up_a_first_request_loads_nothing_more(tmp_path: Path) -> None:
    """What the server's warm-up does before the first ask: the first model request then
    imports no module of the HTTP stack (httpx imports its event-loop backend on its first
    request, a tenth of a second on a busy machine)."""
    script = """
import asyncio, json, sys
from lsp_agent.agent.sessions import warm_up
from lsp_agent.model import make_provider
from tests.fake_model import ScriptedModel, reply

warm_up()
loaded = set(sys.modules)
with ScriptedModel([reply("ok")]) as model:
    async def ask():
        provider = make_provider("openai", model.base_url, "test-model", None)
        try:
            return (await provider.complete([{"role": "user", "content": "hi"}], [], print)).text
        finally:
            await provider.aclose()
    assert asyncio.run(ask()) == "ok"
print(json.dumps(sorted(set(sys.modules) - loaded)))
"""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()[-1]
    stack = ("httpx", "httpcore", "h11", "anyio", "ssl", "idna", "certifi", "lsp_agent.model")
    assert [name for name in json.loads(out) if name.startswith(stack)] == []
