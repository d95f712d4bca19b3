"""Cutting the editor's byte stream into messages, whatever it sends.

The base protocol frames each message with headers (`Content-Length: N`, CRLF lines, a blank
line) and N bytes of body. Editors get this right; broken ones, proxies and fuzzers do not, and a
server that trusts the framing blindly falls silent for good after one bad header: every later
request is read out of step. So `FrameParser`:

- reads header names in any case, and lines ended by LF alone;
- refuses a `Content-Length` that is missing, not a number, or over `MAX_BODY_BYTES`, and then
  resynchronises on the next `Content-Length` header in the stream;
- cuts a body that is not JSON and runs into the next message's headers (its length was too
  large) at those headers (`reframe`, or `stalled` when the editor waits for an answer before
  sending the rest), and lets a body that was too short end in a JSON error: the text after it
  is skipped up to the next header.

What it cannot parse becomes a `Garbage` item that the server logs; a body that is not JSON is
answered by the server with a JSON-RPC parse error. Pure: it never reads, it is fed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest message accepted: far above any real request (a 50 MB document is past what
editors sync), far below what would exhaust memory."""

MAX_HEADER_BYTES = 8 * 1024
"""A header block longer than this is not one."""

_HEADER_END = re.compile(rb"\r?\n\r?\n")
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"[A-Za-z][A-Za-z0-9-]*[ \t]*:[^\r\n]*")
_KEEP_FOR_A_HEADER = 32
"""Bytes kept at the end of skipped garbage: the start of a header cut in two by a read."""


@dataclass(frozen=True)
class Garbage:
    """Bytes that are not a message, and why (for the log)."""

    reason: str
    skipped: int
    """How many bytes were skipped."""


class FrameParser:
    """Fed bytes, gives message bodies (`bytes`) and `Garbage`, in stream order."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None
        """The body length of the frame whose headers were read, while waiting for its body."""

    @property
    def waiting_for_body(self) -> bool:
        """Headers were read and the body is not complete yet."""
        return self._length is not None

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next(self) -> bytes | Garbage | None:
        """The next message body or `Garbage`; None when more bytes are needed."""
        if self._length is None:
            found = self._headers()
            if found is None or isinstance(found, Garbage):
                return found
            self._length = found
        if len(self._buffer) < self._length:
            return None
        body = bytes(self._buffer[: self._length])
        del self._buffer[: self._length]
        self._length = None
        return body

    def reframe(self, body: bytes) -> bytes | None:
        """A body that did not parse as JSON: when it holds the next message's headers, its
        length was announced too large; it ends where they begin, and the rest goes back to the
        stream. Returns the shorter body, or None when there is nothing to cut."""
        joined = body + bytes(self._buffer)  # the headers may go on past the body's end
        where = _next_header(joined)
        if where is None or where >= len(body):
            return None
        self._buffer[:] = joined[where:]
        return body[:where]

    def stalled(self) -> bytes | None:
        """The editor stopped sending in the middle of a body: when the bytes so far already
        hold the next message's headers, the announced length was too large and the body ends
        where they begin. None when there is nothing to do but wait."""
        if self._length is None:
            return None
        where = _next_header(bytes(self._buffer))
        if where is None:
            return None
        body = bytes(self._buffer[:where])
        del self._buffer[:where]
        self._length = None
        return body

    def _headers(self) -> int | Garbage | None:
        """The body length announced by the next header block, `Garbage` for what is not one,
        None when the block is not complete yet."""
        buffer = self._buffer
        start = len(buffer) - len(buffer.lstrip(b"\r\n \t"))
        if start:
            del buffer[:start]
        if not buffer:
            return None
        end = _HEADER_END.search(buffer)
        if end is None:
            newline = buffer.find(b"\n")
            first = buffer[:newline].rstrip(b"\r") if newline >= 0 else None
            if first is not None and _HEADER_LINE.fullmatch(first) is None:
                return self._skip("not a header")
            if len(buffer) > MAX_HEADER_BYTES:
                return self._skip("a header block without an end")
            return None
        length: int | None = None
        for line in re.split(rb"\r?\n", bytes(buffer[: end.start()])):
            if _HEADER_LINE.fullmatch(line) is None:
                return self._skip(f"not a header: {line[:60]!r}")
            name, _, value = line.partition(b":")
            if name.strip().lower() != b"content-length":
                continue
            text = value.strip()
            problem = None
            if not text.isdigit():
                problem = f"Content-Length {text[:30]!r} is not a number"
            elif length is not None:
                problem = "two Content-Length headers"
            elif len(text) > 12 or int(text) > MAX_BODY_BYTES:
                problem = f"Content-Length {text[:30].decode()} is over {MAX_BODY_BYTES} bytes"
            if problem is not None:
                return self._skip(problem, after=end.end())
            length = int(text)
        if length is None:
            return self._skip("a header block without Content-Length", after=end.end())
        del buffer[: end.end()]
        return length

    def _skip(self, reason: str, after: int = 1) -> Garbage:
        """Drop bytes up to the next `Content-Length` header at or after `after`."""
        buffer = self._buffer
        match = _CONTENT_LENGTH.search(buffer, after)
        if match is not None:
            cut = match.start()
        elif after > 1:
            cut = after
        else:
            cut = max(len(buffer) - _KEEP_FOR_A_HEADER, 1)
        del buffer[:cut]
        return Garbage(reason, cut)


def _next_header(data: bytes) -> int | None:
    """Where a complete `Content-Length` header line starts inside `data` (not at 0)."""
    for match in _CONTENT_LENGTH.finditer(data, 1):
        if re.match(rb"[ \t]*\d+[ \t]*\r?\n", data[match.end() :]):
            return match.start()
    return None
