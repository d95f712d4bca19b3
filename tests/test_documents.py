"""The server's own buffer store (`lsp_agent/lsp/documents.py`, beside pygls: its workspace
re-splits a whole file at every keystroke) on its own: the stories over stdio (test_malformed.py,
test_plain_lsp.py, the real editors) cover it as editors meet it; these pin the edges an editor
rarely shows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from lsp_agent.lsp.documents import Buffers
from lsp_agent.lsp.positions import ENCODINGS, TextEdit, apply_text_edits, code_units


def partial(
    start: dict[str, int], end: dict[str, int], text: str
) -> types.TextDocumentContentChangeEvent:
    """An incremental change, as lsprotocol reads it off the wire."""
    return types.TextDocumentContentChangePartial(
        range=types.Range(
            start=types.Position(line=start["line"], character=start["character"]),
            end=types.Position(line=end["line"], character=end["character"]),
        ),
        text=text,
    )


def whole(text: str) -> types.TextDocumentContentChangeEvent:
    return types.TextDocumentContentChangeWholeDocument(text=text)


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
            partial(
                utf16_position(expected, start, encoding),
                utf16_position(expected, end, encoding),
                new,
            )
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
    sent = [partial(a, b, new) for a, b, new in changes]
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
    assert buffers.change("file:///a b.py", 2, [whole("new")], "utf-16") is None
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
    refused = buffers.change("file:///a.py", 2, [partial(start, end, "x")], "utf-16")
    assert refused is not None
    assert why in refused
    assert buffers.get("file:///a.py") is None  # read from disk from now on
    assert buffers.change("file:///a.py", 3, [whole("later")], "utf-16") is None
    assert buffers.get("file:///a.py") is None
    buffers.open("file:///a.py", "again", 4)
    buffer = buffers.get("file:///a.py")
    assert buffer is not None
    assert buffer.source == "again"
