"""Reading a reply: SSE payloads in bounded slices, the reply being assembled, the text passed on.

The editor must never wait on a reply being read (a status request is answered within
milliseconds while a model streams megabytes): `sse_batches` hands the payloads of each network
read over together, and a `Pacer` lets the event loop run other work every few milliseconds of
parsing. Text deltas are passed on once per network read (one `on_text` call for a read that
carried a hundred tiny deltas), and a huge delta in slices of `TEXT_SLICE` characters.

Text is repaired where it enters: an emoji whose escape the endpoint split across two chunks
arrives as two lone UTF-16 surrogates; they are joined, and a truly lone one becomes U+FFFD with
a note in the log, so that no reply can carry text that cannot be encoded (and stored, and sent).

Replayed text: when a retried stream starts with the text the user has already seen, only what
comes after it is passed to `on_text`; when it says something else, the new text is passed in full,
so the editor may show the broken start followed by the new reply (the `Reply` holds only the new).
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import time
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from lsp_agent.messages import NAMELESS_TOOL, REPLACEMENT, ToolCall, as_int, clean_text
from lsp_agent.model import TextSink

SLICE_SECONDS = 0.004
"""Event-loop time a reader may take before it lets other work run."""
TEXT_SLICE = 1 << 16
"""The most characters passed to `on_text` at once (a huge delta is passed on in slices)."""
EXCERPT_BYTES = 4096
"""How much of a body that is not a reply is kept to quote from."""

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)


class StreamBroken(Exception):
    """The reply stopped half-way; the request is worth one more try from scratch."""

    def __init__(self, reason: str, *, twice: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.twice = twice
        """What to tell the user when it happened twice, when the reason says it better than
        "broke off"."""


class Nonsense(Exception):
    """The endpoint answered something that is not a reply; a retry would get the same."""

    def __init__(self, what: str, *, web_page: bool = False) -> None:
        super().__init__(what)
        self.what = what
        """What the endpoint did, as the middle of a sentence ("answered 200 with …")."""
        self.web_page = web_page
        """True when the answer was a web page: the base URL points at a site, not the API."""


class Pacer:
    """Lets the event loop run other work after every `SLICE_SECONDS` of work done here."""

    def __init__(self, budget: float = SLICE_SECONDS) -> None:
        self.budget = budget
        self._since = time.perf_counter()

    def due(self) -> bool:
        """True when the slice is used up (cheap enough to ask after every small step)."""
        return time.perf_counter() - self._since >= self.budget

    async def rest(self) -> None:
        """Let the event loop run what waits, then start a new slice."""
        await asyncio.sleep(0)
        self._since = time.perf_counter()

    async def tick(self) -> None:
        """Yield to the event loop when the slice is used up."""
        if self.due():
            await self.rest()

    def rested(self) -> None:
        """The reader waited on the network: the loop ran meanwhile."""
        self._since = time.perf_counter()


@dataclass
class BodySeen:
    """What came over the wire while reading an event stream, to describe it when it is not one."""

    size: int = 0
    head: bytearray = field(default_factory=bytearray)
    """The first `EXCERPT_BYTES` of the body."""


async def sse_batches(
    chunks: AsyncIterable[bytes], pacer: Pacer, seen: BodySeen
) -> AsyncIterator[list[str]]:
    """The `data:` payloads of an event stream, one list per network read.

    Lines end at LF, CRLF or CR (never at the other breaks `str.splitlines` knows: a payload may
    hold a raw U+2028). Text is decoded as it arrives; a line that spans many reads (a 20 MB
    event) is kept in parts and joined once, when its end arrives.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    async for chunk in chunks:
        pacer.rested()
        if len(seen.head) < EXCERPT_BYTES:
            seen.head += chunk[: EXCERPT_BYTES - len(seen.head)]
        seen.size += len(chunk)
        text = decoder.decode(chunk)
        end = max(text.rfind("\n"), text.rfind("\r")) + 1
        if not end:
            if text:
                parts.append(text)
            continue
        lines = text[:end]
        if parts:
            parts.append(lines)
            lines = "".join(parts)
            parts = []
        if end < len(text):
            parts.append(text[end:])
        batch = _data_lines(lines)
        if batch:
            yield batch
        if pacer.due():
            await pacer.rest()
    parts.append(decoder.decode(b"", final=True))
    if (rest := "".join(parts)) and (batch := _data_lines(rest)):
        yield batch


def _data_lines(text: str) -> list[str]:
    """The payloads of the `data:` lines in `text`, each sliced out once (a 20 MB line is not
    copied by a split and then again by its slice)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    found = []
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        if text.startswith("data:", start, end):
            begin = start + (6 if text.startswith(" ", start + 5, end) else 5)
            found.append(text[begin:end])
        start = end + 1
    return found


def page_title(head: bytes) -> str | None:
    """The `<title>` of an HTML page, from its first bytes."""
    match = _TITLE.search(head)
    if match is None:
        return None
    title = " ".join(match[1].decode("utf-8", "replace").split())
    return title[:120] or None


class Surrogates:
    """Joins the two halves of a character split between two text pieces; replaces lone ones."""

    def __init__(self) -> None:
        self.replaced = 0
        """Lone surrogates replaced by U+FFFD so far."""
        self._held = ""

    def feed(self, piece: str) -> str:
        """`piece` made safe to encode; a trailing high surrogate waits for the next piece."""
        if self._held:
            piece, self._held = self._held + piece, ""
        if piece.isascii():
            return piece
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            piece, self._held = piece[:-1], piece[-1]
        text, lone = clean_text(piece)
        self.replaced += lone
        return text

    def finish(self) -> str:
        """What is still held back, at the end of the text."""
        if not self._held:
            return ""
        self._held = ""
        self.replaced += 1
        return REPLACEMENT


class ReplayingSink:
    """Passes streamed text to `on_text`, without repeating what a retried attempt replays.

    `feed` collects; `flush` passes what was collected on, in slices, letting the loop breathe.
    """

    def __init__(self, on_text: TextSink) -> None:
        self._on_text = on_text
        self._seen = ""
        """The text the user has seen of this reply, as the attempt that showed it had it."""
        self._parts: list[str] = []
        self._length = 0
        self._replaying = False
        self._diverged = False
        self._out: list[str] = []

    def restart(self) -> None:
        """A new attempt begins."""
        text = "".join(self._parts)
        if self._diverged or len(text) > len(self._seen):
            self._seen = text
        self._parts, self._length = [], 0
        self._replaying, self._diverged = bool(self._seen), False
        self._out = []

    def feed(self, delta: str) -> None:
        """One text delta of the current attempt."""
        if not delta:
            return
        start = self._length
        self._parts.append(delta)
        self._length += len(delta)
        if not self._replaying:
            self._out.append(delta)
            return
        overlap = self._seen[start : start + len(delta)]
        if not delta.startswith(overlap):
            self._replaying, self._diverged = False, True
            self._out.append("".join(self._parts))
        elif self._length >= len(self._seen):
            self._replaying = False
            if rest := delta[len(overlap) :]:
                self._out.append(rest)

    async def flush(self, pacer: Pacer) -> None:
        """Pass the collected text on: one call, or slices of `TEXT_SLICE` for a huge one."""
        if not self._out:
            return
        text = self._out[0] if len(self._out) == 1 else "".join(self._out)
        self._out = []
        for start in range(0, len(text), TEXT_SLICE):
            self._on_text(text[start : start + TEXT_SLICE])
            await pacer.tick()


@dataclass
class CallDraft:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class Draft:
    """A reply being assembled from a stream."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, CallDraft] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    done: bool = False
    events: int = 0
    """Payloads read."""
    understood: int = 0
    """Of those, payloads in the dialect's shape (a chunk with `choices`, a Messages event)."""
    first: str = ""
    """The beginning of the first payload, to quote when none was understood."""
    surrogates: Surrogates = field(default_factory=Surrogates)
    sent_bytes: int = 0
    """The size of the request this reply answers (for a usage estimate)."""

    def add_text(self, piece: str) -> str:
        """Keep a text delta; returns it as it may be shown (halves of a character joined)."""
        text = self.surrogates.feed(piece)
        if text:
            self.text.append(text)
        return text

    def end_text(self) -> str:
        """The end of the text: a high surrogate still held back becomes U+FFFD."""
        text = self.surrogates.finish()
        if text:
            self.text.append(text)
        return text

    def call(self, index: int) -> CallDraft:
        if index not in self.calls:
            self.calls[index] = CallDraft(id="", name="")
        return self.calls[index]

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for position, index in enumerate(sorted(self.calls)):
            draft = self.calls[index]
            arguments, lone = clean_text("".join(draft.arguments))
            self.surrogates.replaced += lone
            calls.append(
                ToolCall(
                    id=draft.id or f"call_{position}",
                    name=draft.name or NAMELESS_TOOL,
                    arguments=arguments,
                )
            )
        return tuple(calls)


def feed_call(draft: Draft, delta: Any) -> None:
    """One tool-call delta: the first of a call carries id and name, the rest argument text.

    Raises `Nonsense` for a delta that is not an object or whose `index` is there but not a
    whole number: guessing which call it continues could run a call the model never made.
    """
    if not isinstance(delta, dict):
        raise Nonsense(f"sent a tool-call delta that is not an object ({quote(delta)})")
    raw_index = delta.get("index")
    index = as_int(raw_index)
    if raw_index is not None and (index is None or index < 0):
        raise Nonsense(
            f"sent a tool-call delta whose index is {quote(raw_index)}, not a whole number, so "
            "which call it belongs to is unknown"
        )
    call_id = delta.get("id")
    if index is None:
        # Some servers leave the index out; a new id starts a new call, else the last goes on.
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
    if not isinstance(function, dict):
        raise Nonsense(f"sent a tool call whose `function` is not an object ({quote(function)})")
    name = function.get("name")
    if isinstance(name, str) and name and name != call.name:
        # A name arrives whole in its first delta; a few servers split it, some repeat it.
        call.name += name
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call.arguments.append(arguments)
    elif arguments is not None:
        call.arguments.append(json.dumps(arguments))


def quote(value: Any) -> str:
    """A short rendering of a JSON value for a sentence."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
