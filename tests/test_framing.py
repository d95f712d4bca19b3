"""Cutting the editor's byte stream into messages (`lsp/framing.py`), whatever it sends."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from lsp_agent.lsp.framing import MAX_BODY_BYTES, FrameParser, Garbage


def frame(body: bytes, header: bytes = b"Content-Length: %d\r\n\r\n") -> bytes:
    """`body` framed with `header`, its `%d` standing for the length."""
    return header.replace(b"%d", str(len(body)).encode()) + body


def message(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "lspAgent/ping"}).encode()


def drain(parser: FrameParser) -> list[bytes | Garbage]:
    out: list[bytes | Garbage] = []
    item = parser.next()
    while item is not None:
        out.append(item)
        item = parser.next()
    return out


def bodies(items: list[bytes | Garbage]) -> list[bytes]:
    return [item for item in items if isinstance(item, bytes)]


@given(st.lists(st.integers(min_value=1, max_value=200), max_size=20))
def test_any_split_of_a_valid_stream_gives_the_same_messages(cuts: list[int]) -> None:
    stream = b"".join(frame(message(n)) for n in range(5))
    parser = FrameParser()
    got: list[bytes | Garbage] = []
    at = 0
    for cut in cuts:
        parser.feed(stream[at : at + cut])
        at += cut
        got += drain(parser)
    parser.feed(stream[at:])
    got += drain(parser)
    assert got == [message(n) for n in range(5)]


def test_header_names_in_any_case_and_lf_only_lines_are_read() -> None:
    parser = FrameParser()
    parser.feed(frame(message(1), b"content-length: %d\n\n"))
    parser.feed(frame(message(2), b"CONTENT-LENGTH:%d\r\nContent-Type: x\r\n\r\n"))
    assert drain(parser) == [message(1), message(2)]


def test_a_bad_length_is_skipped_and_the_next_message_still_read() -> None:
    for bad in (b"abc", b"-5", b"99999999999999999999", str(MAX_BODY_BYTES + 1).encode()):
        parser = FrameParser()
        parser.feed(b"Content-Length: " + bad + b"\r\n\r\n{}" + frame(message(7)))
        got = drain(parser)
        assert isinstance(got[0], Garbage), bad
        assert bodies(got) == [message(7)], bad


def test_a_frame_without_length_is_skipped() -> None:
    parser = FrameParser()
    parser.feed(b"Content-Type: application/json\r\n\r\n" + message(1) + frame(message(2)))
    got = drain(parser)
    assert isinstance(got[0], Garbage)
    assert bodies(got) == [message(2)]


def test_a_body_announced_too_short_fails_alone() -> None:
    body = message(1)
    parser = FrameParser()
    parser.feed(b"Content-Length: %d\r\n\r\n" % (len(body) - 3) + body + frame(message(2)))
    got = drain(parser)
    assert got[0] == body[:-3]  # the server answers it with a parse error
    assert bodies(got)[-1] == message(2)


def test_a_body_announced_too_long_is_cut_at_the_next_headers() -> None:
    body = message(1)
    parser = FrameParser()
    parser.feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 10) + body + frame(message(2)))
    first = parser.next()  # the reader reframes a body that is not JSON before reading on
    assert isinstance(first, bytes)
    assert first != body
    assert parser.reframe(first) == body
    assert drain(parser) == [message(2)]


def test_a_stalled_body_that_holds_the_next_headers_ends_there() -> None:
    body = message(1)
    parser = FrameParser()
    parser.feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 500) + body + frame(message(2)))
    assert drain(parser) == []
    assert parser.waiting_for_body
    assert parser.stalled() == body
    assert drain(parser) == [message(2)]


def test_a_stalled_body_without_headers_keeps_waiting() -> None:
    parser = FrameParser()
    parser.feed(b'Content-Length: 100\r\n\r\n{"partial')
    assert drain(parser) == []
    assert parser.stalled() is None
    assert parser.waiting_for_body


def test_garbage_before_a_header_is_skipped() -> None:
    parser = FrameParser()
    parser.feed(b'"}trailing text from a short body' + frame(message(3)))
    got = drain(parser)
    assert isinstance(got[0], Garbage)
    assert bodies(got) == [message(3)]


def test_a_header_cut_in_two_by_a_read_is_kept() -> None:
    parser = FrameParser()
    data = frame(message(4))
    parser.feed(data[:9])
    assert drain(parser) == []
    parser.feed(data[9:])
    assert drain(parser) == [message(4)]
