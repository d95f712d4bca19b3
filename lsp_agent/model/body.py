"""An answer's body as the providers read it: capped, and expanded a piece at a time.

httpx decodes gzip and deflate itself, with no bound at all: an answer may bring any number of
bytes, one network read of 64 KiB is expanded to as much as 64 MiB in one call, and whatever
follows the end of a gzip stream is kept and copied again at every read (the client used before
did the same: 64 MiB of it after a short reply cost 5.6 s of the event loop and 157 MiB). So the
providers read the body as it came over the wire (`Response.aiter_raw`), and this module counts
it and expands it:

- the bytes received count against the cap, compressed or not, and so do the bytes they expand
  to (a gzip bomb);
- a compressed piece is expanded `DECODED_PIECE` bytes at a time;
- once the compressed stream has ended, the first byte after it ends the reading: the reply is
  whole, and the connection, whose answer was not read to its end, is closed instead of reused.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncGenerator, Iterator

import httpx

MAX_BODY = 256 * 1024 * 1024
"""The most one answer may bring, as received and once expanded. A model's reply is a few
megabytes at most (a long one streamed in tiny events); past this the answer is not one, and
holding it would only fill the memory: a gzip bomb, a stream without end."""
DECODED_PIECE = 1 << 20
"""The most a compressed piece is expanded to at once."""
ACCEPTED_CODINGS = "gzip, deflate"
"""What the requests say they accept (`Accept-Encoding`): the codings this module expands.
httpx would also offer br and zstd when their packages happen to be installed."""


class BodyError(Exception):
    """The body cannot be read as a reply's: too large, or not valid in its coding."""


class BodyTooLarge(BodyError):
    """The answer brought more than the cap."""


class Undecodable(BodyError):
    """The body's content coding is unknown, or the body is not valid in it."""


async def pieces(response: httpx.Response, limit: int = MAX_BODY) -> AsyncGenerator[bytes, None]:
    """The body of `response` as it arrives, expanded: one piece per network read (or per
    `DECODED_PIECE` of an expanded one). Raises `BodyTooLarge` once more than `limit` bytes
    arrived or were expanded, `Undecodable` for a coding that cannot be undone."""
    coding = response.headers.get("content-encoding", "")
    decoders = [_Decoder(name.strip().lower()) for name in reversed(coding.split(","))]
    decoders = [decoder for decoder in decoders if not decoder.identity]
    raw = response.aiter_raw()
    received = expanded = 0
    try:
        async for data in raw:
            received += len(data)
            if received > limit:
                raise _too_large(limit)
            if not decoders:
                yield data
                continue
            if decoders[0].ended:
                break  # bytes after the end of the compressed stream
            for piece in _undone(decoders, data):
                expanded += len(piece)
                if expanded > limit:
                    raise _too_large(limit, "once decompressed")
                yield piece
            if decoders[0].trailing:
                break
        tail = b""
        for decoder in decoders:
            tail = b"".join(decoder.pieces(tail)) + decoder.flush()
    except zlib.error as error:
        raise Undecodable(f"the body is not valid {coding.strip()} ({error})") from None
    finally:
        if isinstance(raw, AsyncGenerator):  # httpx's is: closed now, not when collected
            await raw.aclose()
    if tail:
        if expanded + len(tail) > limit:
            raise _too_large(limit, "once decompressed")
        yield tail


async def read(response: httpx.Response, limit: int = MAX_BODY) -> bytes:
    """The whole body of `response`, expanded, under the same cap as `pieces`."""
    return b"".join([piece async for piece in pieces(response, limit)])


def _too_large(limit: int, how: str = "") -> BodyTooLarge:
    return BodyTooLarge(f"the answer's body is larger than {limit / 2**20:g} MiB {how}".rstrip())


def _undone(decoders: list[_Decoder], data: bytes) -> Iterator[bytes]:
    """`data` through every decoder in turn, in bounded pieces."""
    first, rest = decoders[0], decoders[1:]
    for piece in first.pieces(data):
        if rest:
            yield from _undone(rest, piece)
        else:
            yield piece


class _Decoder:
    """One content coding undone, incrementally and in bounded pieces."""

    __slots__ = ("_guess", "_zlib", "ended", "identity", "trailing")

    def __init__(self, coding: str) -> None:
        if coding in ("gzip", "x-gzip"):
            wbits = zlib.MAX_WBITS | 16
        elif coding == "deflate":
            wbits = zlib.MAX_WBITS
        elif coding in ("", "identity"):
            wbits = 0
        else:
            raise Undecodable(
                f"the body is encoded as '{coding}', which lsp-agent does not decode "
                f"(it asks for {ACCEPTED_CODINGS})"
            )
        self.identity = not wbits
        """True for no coding at all."""
        self._zlib = zlib.decompressobj(wbits) if wbits else None
        self._guess = coding == "deflate"
        """True until the first bytes said whether "deflate" is zlib-wrapped (as the standard
        says) or raw (as some servers send it)."""
        self.ended = False
        """True once the compressed stream has ended: what follows is not part of it."""
        self.trailing = False
        """True when bytes followed the end of the compressed stream."""

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """`data` expanded, in pieces of at most `DECODED_PIECE` bytes. After the end of the
        stream nothing is expanded, and nothing kept: the bytes are dropped unread."""
        if self._zlib is None:
            if data:
                yield data
            return
        while not self.ended:
            piece = self._decompress(data)
            if piece:
                yield piece
            if self._zlib.eof:
                self.ended = True
                self.trailing = bool(self._zlib.unused_data)
                return
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
        """What the decoder still holds at the end of the body (a stream cut short)."""
        if self._zlib is None or self.ended:
            return b""
        # Bounded: `pieces` left no input unread, so this is what zlib held back, if anything.
        return self._zlib.flush()
