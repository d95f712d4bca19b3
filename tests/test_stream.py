"""Reading an event stream: lines however the network cuts them, in batches, text repaired."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from lsp_agent.model.stream import BodySeen, Pacer, sse_batches


async def arriving(*pieces: bytes) -> AsyncIterator[bytes]:
    """A response body that arrives in exactly these network reads."""
    for piece in pieces:
        yield piece


async def batches(*pieces: bytes) -> list[list[str]]:
    return [batch async for batch in sse_batches(arriving(*pieces), Pacer(), BodySeen())]


async def test_each_network_read_gives_one_batch() -> None:
    found = await batches(b"data: 1\n\ndata: 2\n\n", b"data: 3\n\n")
    assert found == [["1", "2"], ["3"]]


async def test_a_line_cut_anywhere_is_whole_once_its_end_arrives() -> None:
    payload = json.dumps({"content": "é 😀 " * 1000}, ensure_ascii=False).encode()
    raw = b"data: " + payload + b"\n\n"
    cuts = [raw[i : i + 7] for i in range(0, len(raw), 7)]  # multibyte characters cut too
    found = await batches(*cuts)
    assert [data for batch in found for data in batch] == [payload.decode()]


async def test_lines_may_end_with_cr_or_crlf_even_across_reads() -> None:
    found = await batches(b"data: a\r", b"\ndata: b\rdata: c\r\n\r\n")
    assert [data for batch in found for data in batch] == ["a", "b", "c"]


async def test_a_line_separator_inside_a_payload_does_not_end_the_line() -> None:
    payload = '{"content": "one\u2028two\x85three"}'
    found = await batches(b"data: " + payload.encode() + b"\n\n")
    assert found == [[payload]]


async def test_comments_and_other_fields_are_skipped_and_data_without_space_is_read() -> None:
    found = await batches(b": keep-alive\n\nevent: delta\ndata:{}\nid: 3\n\n")
    assert found == [["{}"]]


async def test_a_last_line_without_its_end_is_still_read() -> None:
    assert await batches(b"data: [DONE]") == [["[DONE]"]]


async def test_what_came_is_counted_for_a_sentence_about_it() -> None:
    seen = BodySeen()
    body = arriving(b"<html>", b"</html>")
    assert [batch async for batch in sse_batches(body, Pacer(), seen)] == []
    assert (seen.size, bytes(seen.head)) == (13, b"<html></html>")
