"""The server's own JSON-RPC pieces (`lsp_agent/lsp/rpc.py`, `documents.py`, `uris.py`) on their
own: the stories over stdio (test_malformed.py, test_plain_lsp.py, the real editors) cover them
as editors meet them; these pin the edges an editor rarely shows."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_agent.lsp.documents import Buffers
from lsp_agent.lsp.positions import ENCODINGS, TextEdit, apply_text_edits, code_units
from lsp_agent.lsp.rpc import INVALID_PARAMS, Peer, RpcError, frame
from lsp_agent.lsp.uris import to_fs_path


class Wire:
    """What the peer writes, as messages."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: %d\r\n" % len(body))
        self.messages.append(json.loads(body))


def test_a_frame_is_ascii_and_carries_a_lone_surrogate() -> None:
    data = frame({"jsonrpc": "2.0", "method": "x", "params": {"text": "é \ud800 😀"}})
    head, _, body = data.partition(b"\r\n\r\n")
    assert body.isascii()
    assert int(head.split(b"\r\n")[0].split(b":")[1]) == len(body)
    assert json.loads(body)["params"]["text"] == "é \ud800 😀"


async def test_an_answer_reaches_the_request_and_an_error_answer_raises() -> None:
    wire, peer = Wire(), Peer()
    peer.attach(wire.write)
    asked = asyncio.ensure_future(peer.request("workspace/applyEdit", {"edit": {}}))
    failing = asyncio.ensure_future(peer.request("window/showDocument", {"uri": "file:///a"}))
    await asyncio.sleep(0)
    first, second = wire.messages
    assert first["method"] == "workspace/applyEdit"
    assert first["id"] != second["id"]
    peer.answered({"jsonrpc": "2.0", "id": second["id"], "error": {"code": -1, "message": "no"}})
    peer.answered({"jsonrpc": "2.0", "id": first["id"], "result": {"applied": True}})
    assert await asked == {"applied": True}
    with pytest.raises(RpcError) as raised:
        await failing
    assert (raised.value.code, raised.value.message) == (-1, "no")


async def test_a_request_given_up_is_withdrawn_and_its_late_answer_dropped() -> None:
    wire, peer = Wire(), Peer()
    peer.attach(wire.write)
    asked = asyncio.ensure_future(peer.request("window/showMessageRequest", {}))
    await asyncio.sleep(0)
    asked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked
    request, withdrawn = wire.messages
    assert withdrawn == {
        "jsonrpc": "2.0",
        "method": "$/cancelRequest",
        "params": {"id": request["id"]},
    }
    peer.answered({"jsonrpc": "2.0", "id": request["id"], "result": {"title": "Allow"}})
    peer.answered({"jsonrpc": "2.0", "id": "never-sent", "error": "not an object"})
    assert len(wire.messages) == 2


def test_what_cannot_be_encoded_is_answered_as_an_internal_error() -> None:
    wire, peer = Wire(), Peer()
    peer.attach(wire.write)
    peer.respond(3, {"result": object()})
    peer.notify("lspAgent/event", {"bad": object()})
    (answer,) = wire.messages
    assert answer["id"] == 3
    assert answer["error"]["code"] == -32603


def test_a_closed_pipe_is_not_raised_to_the_sender() -> None:
    peer = Peer()

    def closed(data: bytes) -> None:
        raise BrokenPipeError

    peer.attach(closed)
    peer.notify("window/logMessage", {"type": 4, "message": "x"})
    peer.fail(1, RpcError(INVALID_PARAMS, "Invalid Params: x"))


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("file:///home/u/a%20b.py", "/home/u/a b.py"),
        ("file:///home/u/%E4%B8%AD.py", "/home/u/中.py"),
        ("file://localhost/etc/x", "/etc/x"),
        ("file://server/share/x.py", "//server/share/x.py"),
        ("file:///C:/src/x.py", "c:/src/x.py"),
        ("FILE:///tmp/x", "/tmp/x"),
        ("untitled:Untitled-1", None),
        ("https://example.com/x", None),
        ("file://", None),
        ("file://[", None),
    ],
)
def test_a_file_uri_is_its_decoded_path_and_any_other_uri_none(uri: str, path: str | None) -> None:
    assert to_fs_path(uri) == path


def utf16_position(text: str, offset: int, encoding: str) -> dict[str, int]:
    before = text[:offset]
    line = before.count("\n")
    start = before.rfind("\n") + 1
    return {"line": line, "character": code_units(text[start:offset], encoding)}


PIECES = ["a", " ", "\n", "é", "中", "😀", "👍🏽", "\t"]


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(st.sampled_from(PIECES), max_size=20).map("".join),
    data=st.data(),
    encoding=st.sampled_from(ENCODINGS),
)
def test_incremental_changes_keep_the_buffer_as_the_editor_has_it(
    text: str, data: st.DataObject, encoding: str
) -> None:
    buffers = Buffers()
    buffers.open("file:///a.py", text, 1)
    expected = text
    changes = []
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(expected)))
        end = data.draw(st.integers(start, len(expected)))
        new = data.draw(st.lists(st.sampled_from(PIECES), max_size=5).map("".join))
        changes.append(
            {
                "range": {
                    "start": utf16_position(expected, start, encoding),
                    "end": utf16_position(expected, end, encoding),
                },
                "text": new,
            }
        )
        expected = expected[:start] + new + expected[end:]
    assert buffers.change("file:///a.py", 2, changes, encoding) is None
    buffer = buffers.get("file:///a.py")
    assert buffer is not None
    assert (buffer.source, buffer.version) == (expected, 2)


ODD = ["a", "\n", "\r", "\r\n", "😀", "é", "\u2028", "\f", " "]
"""Every LSP line break (a lone CR too), characters of one to four UTF-8 bytes and two UTF-16
units, and characters `str.splitlines` breaks on and LSP does not."""

ODD_TEXT = st.lists(st.sampled_from(ODD), max_size=16).map("".join)
POSITION = st.fixed_dictionaries({"line": st.integers(0, 6), "character": st.integers(0, 6)})


@settings(max_examples=400, deadline=None)
@given(
    text=ODD_TEXT,
    changes=st.lists(st.tuples(POSITION, POSITION, ODD_TEXT), min_size=1, max_size=4),
    encoding=st.sampled_from(ENCODINGS),
)
def test_a_buffer_changes_exactly_as_the_edits_apply_to_the_whole_text(
    text: str, changes: list[tuple[dict[str, int], dict[str, int], str]], encoding: str
) -> None:
    """Positions anywhere (past a line's end, past the last line, inside a character), lone
    CRs and CRLFs on both sides of the edit: the buffer, kept as lines, ends as the edits
    applied one by one to the whole text (`positions.apply_text_edits`), or is dropped where
    they refuse."""
    buffers = Buffers()
    buffers.open("file:///a.py", text, 1)
    expected: str | None = text
    for start, end, new in changes:
        edit = TextEdit(start["line"], start["character"], end["line"], end["character"], new)
        try:
            expected = apply_text_edits(expected or "", [edit], encoding)
        except ValueError:
            expected = None
            break
    sent = [{"range": {"start": a, "end": b}, "text": new} for a, b, new in changes]
    refused = buffers.change("file:///a.py", 2, sent, encoding)
    buffer = buffers.get("file:///a.py")
    if expected is None:
        assert refused is not None
        assert buffer is None
        return
    assert refused is None
    assert buffer is not None
    assert buffer.source == expected


def test_a_whole_text_change_replaces_the_buffer_and_any_spelling_of_the_uri_finds_it() -> None:
    buffers = Buffers()
    buffers.open("file:///a%20b.py", "old", 1)
    assert buffers.change("file:///a b.py", 2, [{"text": "new"}], "utf-16") is None
    buffer = buffers.get("file:///a%20b.py")
    assert buffer is not None
    assert (buffer.source, buffer.version, buffer.uri) == ("new", 2, "file:///a%20b.py")
    buffers.close("file:///a b.py")
    assert buffers.get("file:///a%20b.py") is None


@pytest.mark.parametrize(
    ("start", "end", "why"),
    [
        ({"line": 0, "character": 4}, {"line": 0, "character": 2}, "ends before it starts"),
        ({"line": 0, "character": 1}, {"line": 0, "character": 2}, "inside the character"),
    ],
    ids=["backwards", "inside a surrogate pair"],
)
def test_a_change_that_cannot_apply_drops_the_buffer_until_it_is_opened_again(
    start: dict[str, int], end: dict[str, int], why: str
) -> None:
    buffers = Buffers()
    buffers.open("file:///a.py", "😀bc\n", 1)
    refused = buffers.change(
        "file:///a.py", 2, [{"range": {"start": start, "end": end}, "text": "x"}], "utf-16"
    )
    assert refused is not None
    assert why in refused
    assert buffers.get("file:///a.py") is None  # read from disk from now on
    assert buffers.change("file:///a.py", 3, [{"text": "later"}], "utf-16") is None
    assert buffers.get("file:///a.py") is None
    buffers.open("file:///a.py", "again", 4)
    buffer = buffers.get("file:///a.py")
    assert buffer is not None
    assert buffer.source == "again"
