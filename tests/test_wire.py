"""The HTTP client model requests go through, against real servers on loopback.

Each server is an `asyncio.start_server` handler the test writes, so every framing and every
fault is scripted byte by byte; TLS uses a certificate authority made for the test session with
the openssl command; proxies are tiny ones started by the test. No mocks.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import itertools
import os
import re
import socket
import ssl
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_agent.model import wire

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
WAIT = 10.0
"""How long a test waits for something that happens at once when the client is right: a guard
against a hang, never a pause."""


@dataclass
class Request:
    """One request as a server read it."""

    line: str
    headers: dict[str, str]
    body: bytes
    head: bytes
    """The head exactly as it came over the wire."""


@dataclass
class Server:
    """A server a test started: its address, and what it saw."""

    url: str
    port: int
    connections: int = 0
    """How many connections it accepted."""
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection, or None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if line)
    lowered = {name.lower(): value for name, value in headers.items()}
    body = await reader.readexactly(int(lowered.get("content-length", "0")))
    return Request(lines[0], lowered, body, head)


async def client_closed(reader: asyncio.StreamReader) -> bool:
    """Wait until the client closes its end; True when it did (EOF or reset)."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass
    return True


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
        except (ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
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


def answering(*answers: bytes, requests: list[Request] | None = None) -> Handler:
    """A keep-alive server: each request on any connection gets the next answer (the last one
    repeats), until the client closes the connection."""
    queue = iter(itertools.chain(answers, itertools.repeat(answers[-1])))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            if requests is not None:
                requests.append(request)
            writer.write(next(queue))
            await writer.drain()

    return handler


def answer_once(answer: bytes, *, then_close: bool = True) -> Handler:
    """Read one request, write `answer`, then close (or wait for the client to)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer)
        await writer.drain()
        if not then_close:
            await client_closed(reader)

    return handler


def reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP reset instead of an orderly close."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def new_client(
    *,
    tls: ssl.SSLContext | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float = 300.0,
    write_timeout: float = 60.0,
    trust_env: bool = True,
    user_agent: str = "lsp-agent",
    max_body: int = wire.MAX_BODY,
) -> wire.Client:
    """A client that checks certificates against the system's authorities unless told."""
    return wire.Client(
        tls=tls or ssl.create_default_context(),
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        write_timeout=write_timeout,
        trust_env=trust_env,
        user_agent=user_agent,
        max_body=max_body,
    )


@pytest.fixture
async def client() -> AsyncIterator[wire.Client]:
    http = new_client()
    yield http
    await http.aclose()


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# The exceptions


def test_the_exceptions_have_httpx_names_and_hierarchy() -> None:
    expected = {
        wire.TransportError: wire.HTTPError,
        wire.TimeoutException: wire.TransportError,
        wire.ConnectTimeout: wire.TimeoutException,
        wire.ReadTimeout: wire.TimeoutException,
        wire.WriteTimeout: wire.TimeoutException,
        wire.NetworkError: wire.TransportError,
        wire.ConnectError: wire.NetworkError,
        wire.ReadError: wire.NetworkError,
        wire.WriteError: wire.NetworkError,
        wire.ProtocolError: wire.TransportError,
        wire.RemoteProtocolError: wire.ProtocolError,
        wire.ProxyError: wire.TransportError,
        wire.UnsupportedProtocol: wire.TransportError,
        wire.DecodingError: wire.HTTPError,
    }
    for error, parent in expected.items():
        assert issubclass(error, parent), error
    assert issubclass(wire.HTTPError, Exception)
    assert not issubclass(wire.DecodingError, wire.TransportError)
    assert issubclass(wire.InvalidURL, Exception)
    assert not issubclass(wire.InvalidURL, wire.HTTPError)


def test_headers_are_case_insensitive_and_repeated_fields_are_joined() -> None:
    headers = wire.Headers([("Content-Type", "text/plain"), ("Via", "a"), ("via", "b")])
    assert headers["content-type"] == headers["CONTENT-TYPE"] == "text/plain"
    assert headers.get("VIA") == "a, b"
    assert headers.get("missing", "none") == "none"
    assert "Content-Type" in headers
    assert len(headers) == 2
    assert dict(headers) == {"content-type": "text/plain", "via": "a, b"}


# Bodies, however the server frames them


async def test_a_content_length_body_is_read_and_kept(client: wire.Client) -> None:
    answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n"
    async with serve(answering(answer + b'{"a": 1}\n')) as server:
        response = await client.get(server.url + "/things")
    assert (response.status_code, response.reason, response.http_version) == (
        201,
        "Created",
        "HTTP/1.1",
    )
    assert response.headers["content-type"] == "application/json"
    assert response.content == b'{"a": 1}\n'
    assert response.json() == {"a": 1}
    assert await response.aread() == response.content


async def test_a_reader_that_stops_at_the_last_byte_leaves_the_connection_reusable(
    client: wire.Client,
) -> None:
    async with serve(answering(OK)) as server:
        async with client.stream("GET", server.url) as response:
            async for piece in response.aiter_bytes():
                assert piece == b"ok"
                break  # the body's announced length has arrived: nothing is left unread
        assert (await client.get(server.url)).content == b"ok"
    assert server.connections == 1


async def test_the_content_is_there_only_once_the_body_is_read(client: wire.Client) -> None:
    async with serve(answering(OK)) as server, client.stream("GET", server.url) as response:
        with pytest.raises(RuntimeError, match="read the body first"):
            _ = response.content
        assert await response.aread() == b"ok"
        assert response.content == b"ok"
        assert [chunk async for chunk in response.aiter_bytes()] == [b"ok"]


async def test_chunks_with_extensions_and_trailers_arrive_as_they_are_read(
    client: wire.Client,
) -> None:
    first_piece = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;name=value\r\nhel"  # the chunk is cut: its end comes in a later read
        )
        await writer.drain()
        await first_piece.wait()
        writer.write(b"lo\r\nB\r\n, chunked!\n\r\n0\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n")
        await writer.drain()

    async with serve(handler) as server, client.stream("GET", server.url) as response:
        pieces = []
        async with asyncio.timeout(WAIT):
            async for piece in response.aiter_bytes():
                pieces.append(piece)
                first_piece.set()
    # One piece per read: the second read's two chunks (and the end) come as one.
    assert pieces == [b"hel", b"lo, chunked!\n"]


async def test_a_20_mb_chunk_is_handed_on_in_pieces_as_it_arrives(client: wire.Client) -> None:
    size = 20_000_000
    handed_on = asyncio.Event()
    rest_sent = False

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal rest_sent
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(f"{size:x}\r\n".encode() + b"a" * 1_000_000)
        await writer.drain()
        await handed_on.wait()  # the rest of the chunk only once the client has some of it
        rest_sent = True
        writer.write(b"a" * (size - 1_000_000) + b"\r\n0\r\n\r\n")
        await writer.drain()

    received = 0
    before_the_rest = None
    async with serve(handler) as server, client.stream("GET", server.url) as response:
        async with asyncio.timeout(WAIT * 3):
            async for piece in response.aiter_bytes():
                if before_the_rest is None:
                    before_the_rest = not rest_sent
                received += len(piece)
                handed_on.set()
    assert before_the_rest is True
    assert received == size


async def test_a_body_without_length_is_read_to_the_end_and_not_reused(
    client: wire.Client,
) -> None:
    async with serve(answer_once(b"HTTP/1.1 200 OK\r\n\r\nuntil the end")) as server:
        first = await client.get(server.url)
        second = await client.get(server.url)
    assert first.content == second.content == b"until the end"
    assert server.connections == 2


async def test_no_body_is_awaited_after_204_304_or_a_head_request(client: wire.Client) -> None:
    requests: list[Request] = []
    answers = (
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",  # the answer to HEAD
        OK,
    )
    async with serve(answering(*answers, requests=requests)) as server:
        empty = [await client.get(server.url), await client.get(server.url)]
        async with client.stream("HEAD", server.url) as response:
            assert await response.aread() == b""
        last = await client.get(server.url)
    assert [response.content for response in empty] == [b"", b""]
    assert last.content == b"ok"
    assert [request.line.split()[0] for request in requests] == ["GET", "GET", "HEAD", "GET"]
    assert server.connections == 1


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send
    ],
)
async def test_gzip_and_deflate_bodies_are_decoded(
    client: wire.Client, coding: str, encode: Callable[[bytes], bytes]
) -> None:
    text = b"data: " + b"the same words again and again " * 5000 + b"\n\n"
    body = encode(text)
    chunked = b"".join(
        b"%x\r\n%s\r\n" % (len(piece), piece)
        for piece in (body[i : i + 1000] for i in range(0, len(body), 1000))
    )
    answers = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s"
        % (coding.encode(), len(body), body),
        b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n"
        % (coding.encode(), chunked),
    )
    requests: list[Request] = []
    async with serve(answering(*answers, requests=requests)) as server:
        whole = await client.get(server.url)
        async with client.stream("POST", server.url, content=b"{}") as response:
            streamed = b"".join([piece async for piece in response.aiter_bytes()])
    assert whole.content == streamed == text
    assert requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize(
    "parts",
    [
        [b'{"a":', b'"' + b"x" * 200_000 + b'"', b"}"],  # a large part between small ones
        [b"[" + b"1," * 100_000, b"2]"],  # a large first part: written after the head
        [b"{", b"}"],
        [],
    ],
    ids=["large-middle", "large-first", "small", "empty"],
)
async def test_a_body_given_in_parts_arrives_whole(client: wire.Client, parts: list[bytes]) -> None:
    requests: list[Request] = []
    async with serve(answering(OK, requests=requests)) as server:
        for _ in range(2):  # the second on the kept connection
            async with client.stream("POST", server.url, content=parts) as response:
                await response.aread()
    whole = b"".join(parts)
    assert [request.body for request in requests] == [whole, whole]
    assert requests[0].headers["content-length"] == str(len(whole))


async def test_an_unknown_or_broken_encoding_is_a_decoding_error(client: wire.Client) -> None:
    answers = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 4\r\n\r\nxxxx",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nxxxx",
    )
    async with serve(answering(*answers)) as server:
        async with client.stream("GET", server.url) as response:
            assert response.status_code == 200
            with pytest.raises(wire.DecodingError, match="'br'"):
                await response.aread()
        with pytest.raises(wire.DecodingError, match="not valid gzip"):
            await client.get(server.url)


async def test_a_gzip_bomb_is_expanded_a_piece_at_a_time_and_cut_off() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in about 64 KB
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (
        len(bomb),
        bomb,
    )
    http = new_client(max_body=8 << 20)
    pieces: list[int] = []

    async def read(response: wire.Response) -> None:
        async for piece in response.aiter_bytes():
            pieces.append(len(piece))

    async with (
        serve(answer_once(answer, then_close=False)) as server,
        http.stream("GET", server.url) as response,
    ):
        with pytest.raises(wire.BodyTooLarge, match="larger than 8 MiB"):
            await read(response)
    await http.aclose()
    largest, received = max(pieces), sum(pieces)
    assert 0 < received <= 8 << 20
    assert largest <= wire.DECODED_PIECE  # never the whole expansion at once


async def test_a_body_without_end_is_cut_off_and_its_connection_closed() -> None:
    gone = asyncio.Event()
    sent = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"data: " + b"x" * 65_000 + b"\n\n"
        try:
            while True:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
                sent += len(chunk)
        except ConnectionError:
            gone.set()

    http = new_client(max_body=4 << 20)
    async with serve(handler) as server:
        with pytest.raises(wire.BodyTooLarge, match="larger than 4 MiB"):
            await http.get(server.url)
        async with asyncio.timeout(WAIT):
            await gone.wait()  # the client closed the connection: the server stopped sending
    await http.aclose()
    assert sent > 4 << 20


async def test_a_line_break_after_a_body_is_not_taken_for_the_next_answer(
    client: wire.Client,
) -> None:
    requests: list[Request] = []
    async with serve(answering(OK + b"\r\n", requests=requests)) as server:
        first = await client.get(server.url)
        second = await client.get(server.url)
    assert first.content == second.content == b"ok"
    assert (len(requests), server.connections) == (2, 1)


async def test_interim_1xx_answers_are_skipped(client: wire.Client) -> None:
    answer = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal"
    )
    async with serve(answering(answer)) as server:
        response = await client.get(server.url)
    assert (response.status_code, response.content) == (200, b"final")
    assert "link" not in response.headers


async def test_heads_with_bare_line_feeds_and_folded_lines_are_read(client: wire.Client) -> None:
    answer = b"HTTP/1.0 200 OK\nX-Folded: one\n  two\nContent-Length: 4\n\nbody"
    async with serve(answering(answer)) as server:
        response = await client.get(server.url)
    assert response.http_version == "HTTP/1.0"
    assert response.headers["x-folded"] == "one two"
    assert response.content == b"body"


# What a broken server gets


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            b"HTTP/1.1 200 OK\r\nX-Filler: " + b"f" * 70_000 + b"\r\n\r\n",
            "longer than 64 KiB",
        ),
        (
            b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: %s\r\n" % (n, b"f" * 999) for n in range(70)),
            "longer than 64 KiB",
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not HTTP"),
        (b"\x15\x03\x03\x00\x02\x02\x16", "not HTTP"),  # a TLS alert, then the server closes
        (b"HTTP/1.1 2000 OK\r\n\r\n", "not HTTP"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n", "invalid Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "in the middle of its answer's head"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "only chunked"),
    ],
)
async def test_a_broken_head_is_a_remote_protocol_error(
    client: wire.Client, answer: bytes, message: str
) -> None:
    async with serve(answer_once(answer)) as server:
        with pytest.raises(wire.RemoteProtocolError, match=message) as raised:
            await client.get(server.url)
    assert len(str(raised.value)) < 120  # a sentence, not an excerpt of what came


async def test_a_body_that_ends_short_says_how_much_came(client: wire.Client) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfour"
    async with serve(answer_once(answer)) as server, client.stream("GET", server.url) as response:
        with pytest.raises(wire.RemoteProtocolError, match="after 4 of the 10 bytes"):
            await response.aread()


async def test_a_chunked_body_cut_off_is_a_remote_protocol_error(client: wire.Client) -> None:
    answers = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly six",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsix ok\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsix ok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x6\r\nsix ok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nsix ok\r\n0\r\n\r\n",
    ]
    messages = [
        "in the middle of a chunk",
        "before the end",
        "before the end",
        "not a hexadecimal",
        "longer than its size says",
    ]
    for answer, message in zip(answers, messages, strict=True):
        async with serve(answer_once(answer)) as server:
            with pytest.raises(wire.RemoteProtocolError, match=message):
                await client.get(server.url)


async def test_a_server_that_closes_without_answering_is_not_asked_again(
    client: wire.Client,
) -> None:
    requests: list[Request] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        assert request is not None
        requests.append(request)

    async with serve(handler) as server:
        with pytest.raises(
            wire.RemoteProtocolError,
            match="the server closed the connection without sending a response",
        ):
            await client.stream("POST", server.url, content=b"{}").__aenter__()
    assert (server.connections, len(requests)) == (1, 1)


async def test_a_reset_in_the_middle_of_the_body_is_a_read_error(client: wire.Client) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npart of it")
        await writer.drain()
        await got_part.wait()
        reset(writer)

    got_part = asyncio.Event()
    async with serve(handler) as server, client.stream("GET", server.url) as response:
        pieces = response.aiter_bytes()
        assert await anext(pieces) == b"part of it"
        got_part.set()
        with pytest.raises(wire.ReadError, match="connection broke"):
            await anext(pieces)


async def test_a_server_gone_quiet_is_a_read_timeout() -> None:
    quiet = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await writer.drain()
        quiet.set()
        await client_closed(reader)

    http = new_client(read_timeout=0.2)
    async with serve(handler) as server, http.stream("GET", server.url) as response:
        pieces = response.aiter_bytes()
        assert await anext(pieces) == b"abc"
        with pytest.raises(wire.ReadTimeout, match=re.escape("sent nothing for 0.2 s")):
            await anext(pieces)
    assert quiet.is_set()
    await http.aclose()


async def test_no_answer_at_all_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await client_closed(reader)

    http = new_client(read_timeout=0.2)
    async with serve(handler) as server:
        with pytest.raises(wire.ReadTimeout):
            await http.get(server.url)
    assert server.connections == 1
    await http.aclose()


async def test_a_server_that_stops_reading_is_a_write_timeout() -> None:
    stopped = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        stopped.set()
        await asyncio.Event().wait()  # never reads the body

    http = new_client(write_timeout=0.2)
    async with serve(handler) as server:
        with pytest.raises(wire.WriteTimeout, match=re.escape("not sent within 0.2 s")):
            await http.stream("POST", server.url, content=b"x" * 32_000_000).__aenter__()
    assert stopped.is_set()
    await http.aclose()


async def test_a_refused_connection_is_a_connect_error(client: wire.Client) -> None:
    port = closed_port()
    with pytest.raises(wire.ConnectError, match=f"127.0.0.1:{port}: connection refused"):
        await client.get(f"http://127.0.0.1:{port}/v1/models")
    # "localhost" is tried on IPv6 and IPv4: both refuse.
    with pytest.raises(wire.ConnectError, match="connection refused"):
        await client.get(f"http://user:secret@localhost:{port}/v1/models")


async def test_credentials_in_the_url_never_appear_in_a_message(client: wire.Client) -> None:
    with pytest.raises(wire.ConnectError) as raised:
        await client.get(f"http://user:s3cret@127.0.0.1:{closed_port()}/")
    assert "s3cret" not in str(raised.value)
    assert "user" not in str(raised.value)


# URLs


@pytest.mark.parametrize(
    ("url", "error", "message"),
    [
        ("localhost:11434/v1", wire.UnsupportedProtocol, "begins with 'localhost:'"),
        ("127.0.0.1:8080/v1", wire.UnsupportedProtocol, "has no scheme"),
        ("/v1/models", wire.UnsupportedProtocol, "has no scheme"),
        ("ftp://example.com/", wire.UnsupportedProtocol, "ftp://"),
        ("http:///v1", wire.InvalidURL, "no host"),
        ("http://example.com:99999/", wire.InvalidURL, "port is not a number from 1 to 65535"),
        ("http://example.com:port/", wire.InvalidURL, "port is not a number"),
        ("http://example.com:0/", wire.InvalidURL, "port is not a number"),
        ("http://[::1/", wire.InvalidURL, "IPv6"),
        ("http://exa mple.com/", wire.InvalidURL, "invalid host name"),
    ],
)
async def test_a_url_that_cannot_be_used_says_why(
    client: wire.Client, url: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await client.get(url)


async def test_the_request_carries_our_headers_and_the_callers_win(client: wire.Client) -> None:
    requests: list[Request] = []
    async with serve(answering(OK, requests=requests)) as server:
        await client.get(server.url + "/v1/models?limit=5&q=a b")
        async with client.stream(
            "POST",
            server.url.replace("http://", "http://me:p%40ss@") + "/v1/chat",
            content=b"",
            headers={"Accept": "text/event-stream", "Authorization": "Bearer k"},
        ) as response:
            await response.aread()
        await client.get(server.url.replace("http://", "http://me:p%40ss@"))
        custom = new_client(user_agent="lsp-agent/9 (test)")
        await custom.get(server.url)
        await custom.aclose()
    get, post, basic, agent = requests
    host = f"127.0.0.1:{server.port}"
    assert (
        get.head
        == (
            f"GET /v1/models?limit=5&q=a%20b HTTP/1.1\r\nHost: {host}\r\nUser-Agent: lsp-agent\r\n"
            "Accept: */*\r\nAccept-Encoding: gzip, deflate\r\n\r\n"
        ).encode()
    )
    assert post.line == "POST /v1/chat HTTP/1.1"
    assert post.headers["content-length"] == "0"
    assert post.headers["accept"] == "text/event-stream"
    assert post.headers["authorization"] == "Bearer k"
    assert post.head.count(b"ccept:") == 1
    assert basic.headers["authorization"] == "Basic " + base64.b64encode(b"me:p@ss").decode()
    assert agent.headers["user-agent"] == "lsp-agent/9 (test)"


async def test_a_header_with_a_line_break_is_refused_without_showing_it(
    client: wire.Client,
) -> None:
    requests: list[Request] = []
    async with serve(answering(OK, requests=requests)) as server:
        with pytest.raises(wire.ProtocolError, match="'Authorization' has a line break") as raised:
            await client.get(server.url, headers={"Authorization": "Bearer sk-1\r\nX-Evil: 1"})
        await client.get(server.url, headers={"Authorization": "Bearer sk-1"})
    assert "sk-1" not in str(raised.value)
    assert len(requests) == 1  # only the good one went out


async def test_an_ipv6_literal_is_reached_and_named_in_brackets(client: wire.Client) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    requests: list[Request] = []
    async with serve(answering(OK, requests=requests), host="::1") as server:
        response = await client.get(server.url + "/x")
    assert response.content == b"ok"
    assert requests[0].headers["host"] == f"[::1]:{server.port}"


async def test_a_3_mb_body_goes_and_comes_back_intact(client: wire.Client) -> None:
    body = os.urandom(3_000_000)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        assert request is not None
        digest = hashlib.sha256(request.body).hexdigest().encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nX-Sha256: %s\r\nContent-Length: %d\r\n\r\n"
            % (digest, len(request.body))
        )
        writer.write(request.body)
        await writer.drain()

    async with (
        serve(handler) as server,
        client.stream("POST", server.url, content=body) as response,
    ):
        echoed = await response.aread()
    assert response.headers["x-sha256"] == hashlib.sha256(body).hexdigest()
    assert echoed == body


# The pool


async def test_one_connection_serves_request_after_request(client: wire.Client) -> None:
    requests: list[Request] = []
    sse = b"data: {}\n\ndata: [DONE]\n\n"
    streamed = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (
        len(sse),
        sse,
    )
    async with serve(answering(OK, streamed, OK, requests=requests)) as server:
        assert (await client.get(server.url)).content == b"ok"
        async with client.stream("POST", server.url, content=b"{}") as response:
            assert await response.aread() == sse
        assert (await client.get(server.url)).content == b"ok"
    assert len(requests) == 3
    assert server.connections == 1


async def test_a_pooled_connection_the_server_closed_is_replaced(client: wire.Client) -> None:
    closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if server.connections > 1:
            await answering(OK)(reader, writer)
            return
        await read_request(reader)
        writer.write(OK)  # keep-alive, as far as the client can tell; then closed while idle
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed.set()

    async with serve(handler) as server:
        await client.get(server.url)
        await asyncio.wait_for(closed.wait(), WAIT)
        assert (await client.get(server.url)).content == b"ok"
    assert server.connections == 2


async def test_a_request_that_meets_a_connection_closing_is_sent_again_once(
    client: wire.Client,
) -> None:
    """The server closes an idle connection just as the next request arrives on it: that
    request goes once more, on a new connection, and only once."""
    seen: list[int] = []
    fresh_ones_answer = True

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = server.connections
        while await read_request(reader) is not None:
            seen.append(number)
            if seen.count(number) > 1 or (number > 1 and not fresh_ones_answer):
                return  # closed without a word
            writer.write(OK)
            await writer.drain()

    async with serve(handler) as server:
        await client.get(server.url)
        assert (await client.get(server.url)).content == b"ok"
        assert seen == [1, 1, 2]

        fresh_ones_answer = False
        with pytest.raises(wire.RemoteProtocolError, match="without sending a response"):
            await client.get(server.url)
    assert seen == [1, 1, 2, 2, 3]  # the stale one, then one new connection: no third try


@pytest.mark.parametrize(
    ("answer", "reused"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", True),
    ],
)
async def test_connection_close_and_http_1_0_are_honoured(
    client: wire.Client, answer: bytes, reused: bool
) -> None:
    closed_by_client = 0
    all_closed = asyncio.Event()
    expected = 1 if reused else 2

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal closed_by_client
        while await read_request(reader) is not None:
            writer.write(answer)
            await writer.drain()
        closed_by_client += 1
        if closed_by_client == expected:
            all_closed.set()

    async with serve(handler) as server:
        await client.get(server.url)
        await client.get(server.url)
        assert server.connections == expected
        await client.aclose()  # closes what it kept; the others it closed already
        await asyncio.wait_for(all_closed.wait(), WAIT)


async def test_leaving_a_stream_early_closes_its_connection(client: wire.Client) -> None:
    disconnected = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nfirst")
        await writer.drain()
        if await client_closed(reader):
            disconnected.set()

    async with serve(handler) as server:
        async with client.stream("POST", server.url, content=b"{}") as response:
            async for piece in response.aiter_bytes():
                assert piece == b"first"
                break
        await asyncio.wait_for(disconnected.wait(), WAIT)
        async with client.stream("POST", server.url, content=b"{}") as response:
            pass  # not read at all
        assert server.connections == 2


async def test_cancelling_a_turn_mid_read_closes_its_connection(client: wire.Client) -> None:
    disconnected = asyncio.Event()
    first_piece = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        if await client_closed(reader):
            disconnected.set()

    async def turn(url: str) -> None:
        async with client.stream("POST", url, content=b"{}") as response:
            async for _ in response.aiter_bytes():
                first_piece.set()

    async with serve(handler) as server:
        task = asyncio.create_task(turn(server.url))
        await asyncio.wait_for(first_piece.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(disconnected.wait(), WAIT)


async def test_cancelling_before_the_answer_closes_the_connection(client: wire.Client) -> None:
    disconnected = asyncio.Event()
    asked = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        asked.set()
        if await client_closed(reader):
            disconnected.set()

    async with serve(handler) as server:
        task = asyncio.create_task(client.get(server.url))
        await asyncio.wait_for(asked.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(disconnected.wait(), WAIT)


# TLS


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path

    def server(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context

    def client(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
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


async def test_https_to_a_server_whose_certificate_we_trust(certificates: Certificates) -> None:
    http = new_client(tls=certificates.client())
    async with serve(answering(OK), tls=certificates.server()) as server:
        first = await http.get(server.url)
        second = await http.get(server.url.replace("127.0.0.1", "localhost"))
        third = await http.get(server.url)
    assert first.content == second.content == third.content == b"ok"
    assert server.connections == 2  # one per origin; the third request reused the first's
    await http.aclose()


async def test_an_untrusted_or_misnamed_certificate_is_a_connect_error(
    certificates: Certificates,
) -> None:
    trusting = new_client(tls=certificates.client())
    untrusting = new_client()
    async with (
        serve(answering(OK), tls=certificates.server()) as server,
        # 127.0.0.2 is loopback too, but not a name on the certificate.
        serve(answering(OK), tls=certificates.server(), host="127.0.0.2") as misnamed,
    ):
        with pytest.raises(
            wire.ConnectError, match=re.escape("certificate of 127.0.0.1 was refused")
        ):
            await untrusting.get(server.url)
        with pytest.raises(
            wire.ConnectError,
            match=re.escape("certificate of 127.0.0.2 was refused: IP address mismatch"),
        ):
            await trusting.get(misnamed.url)
        assert (await trusting.get(server.url)).content == b"ok"
    await trusting.aclose()
    await untrusting.aclose()


async def test_https_to_a_plain_http_server_says_so(client: wire.Client) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # the TLS hello: a plain server answers it as a bad request
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    async with serve(handler) as server:
        with pytest.raises(
            wire.ConnectError, match=re.escape("TLS handshake with 127.0.0.1 failed")
        ):
            await client.get(server.url.replace("http://", "https://"))


async def test_a_handshake_that_never_ends_is_a_connect_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await client_closed(reader)  # takes the connection, never answers the hello

    http = new_client(connect_timeout=0.2)
    async with serve(handler) as server:
        with pytest.raises(wire.ConnectTimeout, match=re.escape("within 0.2 s")):
            await http.get(server.url.replace("http://", "https://"))
    assert server.connections == 1
    await http.aclose()


# Proxies


@dataclass
class Proxy:
    """A tiny forward proxy: it answers plain requests itself and tunnels CONNECTs to
    `upstream` (a port on loopback), whatever host they name."""

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
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(request.line))
            writer.write(request.line.encode())
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


async def test_an_http_target_goes_through_the_proxy_in_absolute_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = Proxy()
    async with serve(proxy) as server:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(server))
        http = new_client()
        response = await http.get("http://bücher.test:8080/ä/models?q=1 2")
        await http.aclose()
    assert response.content == b"GET http://xn--bcher-kva.test:8080/%C3%A4/models?q=1%202 HTTP/1.1"
    assert proxy.seen[0].headers["host"] == "xn--bcher-kva.test:8080"


async def test_an_https_target_goes_through_the_proxy_s_tunnel(
    monkeypatch: pytest.MonkeyPatch, certificates: Certificates
) -> None:
    async with (
        serve(answering(OK), tls=certificates.server()) as target,
        serve(Proxy(upstream=target.port)) as proxy_server,
    ):
        monkeypatch.setenv("HTTPS_PROXY", proxy_url(proxy_server))
        http = new_client(tls=certificates.client())
        first = await http.get("https://model.test/v1/models")
        second = await http.get("https://model.test/v1/models")
        await http.aclose()
    assert first.content == second.content == b"ok"
    assert target.connections == proxy_server.connections == 1  # the tunnel was reused


async def test_a_tls_proxy_tunnels_to_an_https_target(
    monkeypatch: pytest.MonkeyPatch, certificates: Certificates
) -> None:
    proxy = Proxy()
    async with (
        serve(answering(OK), tls=certificates.server()) as target,
        serve(proxy, tls=certificates.server()) as proxy_server,
    ):
        proxy.upstream = target.port
        monkeypatch.setenv("https_proxy", proxy_url(proxy_server))
        http = new_client(tls=certificates.client())
        response = await http.get("https://model.test/v1/models")
        await http.aclose()
    assert response.content == b"ok"
    assert proxy.seen[0].line == "CONNECT model.test:443 HTTP/1.1"


async def test_a_proxy_that_refuses_the_tunnel_is_a_proxy_error(
    monkeypatch: pytest.MonkeyPatch, certificates: Certificates
) -> None:
    proxy = Proxy()
    async with serve(proxy) as server:
        monkeypatch.setenv("ALL_PROXY", proxy_url(server, "alice:wrong%20password"))
        http = new_client(tls=certificates.client())
        with pytest.raises(wire.ProxyError, match="answered 407 Proxy Authentication") as raised:
            await http.get("https://model.test/v1/models")
        await http.aclose()
    assert "wrong" not in str(raised.value)
    assert "alice" not in str(raised.value)
    assert proxy.seen[0].line == "CONNECT model.test:443 HTTP/1.1"


async def test_a_proxy_that_hangs_up_on_the_tunnel_is_a_proxy_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with serve(answer_once(b"")) as server:
        monkeypatch.setenv("HTTPS_PROXY", server.url)
        http = new_client()
        with pytest.raises(wire.ProxyError, match="did not answer the request for a tunnel"):
            await http.get("https://model.test/v1/models")
        await http.aclose()
    assert server.connections == 1


async def test_socks_proxies_are_refused_with_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://user:pw@proxy.test:1080")
    http = new_client()
    with pytest.raises(wire.ProxyError, match="socks proxies are not supported") as raised:
        await http.get("https://api.example.test/v1/models")
    assert "pw" not in str(raised.value)
    await http.aclose()


async def test_no_proxy_hosts_and_loopback_go_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = Proxy()
    async with serve(proxy) as proxy_server, serve(answering(OK)) as local:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(proxy_server))
        monkeypatch.setenv("NO_PROXY", "direct.invalid,.internal.invalid")
        http = new_client(connect_timeout=WAIT)
        through = await http.get("http://elsewhere.invalid/")
        for url in (local.url, local.url.replace("127.0.0.1", "localhost")):
            assert (await http.get(url)).content == b"ok"
        for host in ("direct.invalid", "model.internal.invalid"):
            with pytest.raises(wire.ConnectError, match=f"to {host}:80: the host name could not"):
                await http.get(f"http://{host}/")
        await http.aclose()
    assert through.content == b"GET http://elsewhere.invalid/ HTTP/1.1"  # the proxy works
    assert [request.line for request in proxy.seen] == [through.content.decode()]
    assert local.connections == 2


async def test_without_trust_env_the_environment_s_proxy_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    http = new_client(trust_env=False, connect_timeout=WAIT)
    with pytest.raises(wire.ConnectError, match=re.escape("to elsewhere.invalid:80")):
        await http.get("http://elsewhere.invalid/")
    await http.aclose()
    trusting = new_client()
    with pytest.raises(wire.ConnectError, match=re.escape("proxy at http://127.0.0.1:9")):
        await trusting.get("http://elsewhere.invalid/")
    await trusting.aclose()


# Any framing, cut anywhere


def _framed(payload: bytes, sizes: list[int], chunked: bool, extensions: bool) -> bytes:
    """An answer carrying `payload`: chunked in pieces of `sizes` (cycled), or with a length."""
    if not chunked:
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)
    parts = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
    start = 0
    for size in itertools.cycle(sizes):
        if start >= len(payload):
            break
        piece = payload[start : start + size]
        start += size
        parts.append(b"%x%s\r\n%s\r\n" % (len(piece), b";n=v" if extensions else b"", piece))
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=4000),
    sizes=st.lists(st.integers(1, 900), min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 6000), max_size=10),
    chunked=st.booleans(),
    extensions=st.booleans(),
    gzipped=st.booleans(),
)
def test_a_body_framed_and_cut_anywhere_comes_back_whole_and_ends_where_it_should(
    body: bytes, sizes: list[int], cuts: list[int], chunked: bool, extensions: bool, gzipped: bool
) -> None:
    """Every answer is written in pieces cut at random places, each piece drained on its own;
    a second request on the same connection shows the first answer was read to its exact end."""
    answer = _framed(gzip.compress(body) if gzipped else body, sizes, chunked, extensions)
    if gzipped:
        answer = answer.replace(b"200 OK\r\n", b"200 OK\r\nContent-Encoding: gzip\r\n", 1)
    marks = sorted({cut for cut in cuts if 0 < cut < len(answer)})
    pieces = [answer[a:b] for a, b in itertools.pairwise([0, *marks, len(answer)])]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await read_request(reader) is not None:
            for piece in pieces:
                writer.write(piece)
                await writer.drain()

    async def two_requests() -> tuple[list[bytes], int]:
        http = new_client()
        try:
            async with serve(handler) as server, asyncio.timeout(WAIT):
                contents = [(await http.get(server.url)).content for _ in range(2)]
                return contents, server.connections
        finally:
            await http.aclose()

    contents, connections = asyncio.run(two_requests())
    assert contents == [body, body]
    assert connections == 1
