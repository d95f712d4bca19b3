"""All LSP position arithmetic, once: text ⇄ (line, character) in any position encoding.

`text_edits` turns a (before, after) pair into the minimal LSP text edits; `apply_text_edits`
applies such edits as an editor does; `offset` and `position` convert between code-point offsets
and LSP positions, counted in the encoding negotiated at `initialize` (UTF-16 unless the client
offers another). Lines end where LSP says (`lsp_agent.text`). Pure: no I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from lsp_agent.text import (
    changed_lines,
    equal_ends,
    inside_crlf,
    line_content,
    line_offsets,
    line_starts,
    split_lines,
)

ENCODINGS = ("utf-8", "utf-16", "utf-32")
"""The LSP position encodings (`PositionEncodingKind`) understood here."""


@dataclass(frozen=True)
class TextEdit:
    """Replace the range [start, end) of the original text by `new_text`.

    Lines are 0-based and split like LSP (`\\n`, `\\r\\n`, lone `\\r`); characters are counted in
    the position encoding the edit was computed for.
    """

    start_line: int
    start_character: int
    end_line: int
    end_character: int
    new_text: str


def text_edits(before: str, after: str, encoding: str = "utf-16") -> list[TextEdit]:
    """The minimal edits that turn `before` into `after`, sorted and non-overlapping.

    A line diff finds the changed hunks; inside each hunk the common prefix and suffix are left
    out, so a change in the middle of a line is a small edit. Positions are in the LSP position
    `encoding` ("utf-16", "utf-8" or "utf-32") and never fall inside a CRLF pair or a character.
    """
    check_encoding(encoding)
    if before == after:
        return []
    a, b = split_lines(before), split_lines(after)
    # Equal head and tail lines are cut first: the line diff then only sees the changed middle.
    head, tail = equal_ends(a, b)
    a_offsets, b_offsets = line_offsets(a), line_offsets(b)
    starts = line_starts(before)
    edits: list[TextEdit] = []
    for i1, i2, j1, j2 in changed_lines(a[head : len(a) - tail], b[head : len(b) - tail]):
        start, end = a_offsets[head + i1], a_offsets[head + i2]
        new_start, new_end = b_offsets[head + j1], b_offsets[head + j2]
        prefix = _common_prefix(before, start, end, after, new_start, new_end)
        if inside_crlf(before, start + prefix):
            prefix -= 1
        suffix = _common_suffix(before, start + prefix, end, after, new_start + prefix, new_end)
        if inside_crlf(before, end - suffix):
            suffix -= 1
        start, end = start + prefix, end - suffix
        new_text = after[new_start + prefix : new_end - suffix]
        if start == end and not new_text:
            continue
        start_line, start_character = position(before, starts, start, encoding)
        end_line, end_character = position(before, starts, end, encoding)
        edits.append(TextEdit(start_line, start_character, end_line, end_character, new_text))
    return edits


def apply_text_edits(text: str, edits: Sequence[TextEdit], encoding: str = "utf-16") -> str:
    """Apply `edits` (all positions refer to `text`) the way an editor does.

    A character past the end of its line means the end of that line, a line past the end of the
    text means its end. Inserts at the same position keep their order. Raises `ValueError` for
    overlapping edits, a range that ends before it starts, or a position inside a character (such
    as between the two halves of a UTF-16 surrogate pair).
    """
    check_encoding(encoding)
    starts = line_starts(text)
    spans: list[tuple[int, int, int, str]] = []
    for order, edit in enumerate(edits):
        start = offset(text, starts, edit.start_line, edit.start_character, encoding)
        end = offset(text, starts, edit.end_line, edit.end_character, encoding)
        if end < start:
            raise ValueError(f"edit {order} ends before it starts: {edit}")
        spans.append((start, end, order, edit.new_text))
    spans.sort(key=lambda span: span[:3])
    pieces: list[str] = []
    cursor = 0
    for start, end, order, new_text in spans:
        if start < cursor:
            raise ValueError(f"edit {order} overlaps an earlier edit")
        pieces.append(text[cursor:start])
        pieces.append(new_text)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def check_encoding(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown position encoding {encoding!r}: use one of {ENCODINGS}")


def code_units(text: str, encoding: str) -> int:
    """The length of `text` in the code code_units of an LSP position encoding."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-16":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text.encode("utf-8", "surrogatepass"))


def position(text: str, starts: list[int], offset: int, encoding: str) -> tuple[int, int]:
    """The LSP (line, character) of a code-point `offset` in `text`."""
    line = bisect.bisect_right(starts, offset) - 1
    return line, code_units(text[starts[line] : offset], encoding)


def offset(text: str, starts: list[int], line: int, character: int, encoding: str) -> int:
    """The code-point offset of an LSP position in `text`, clamped as editors clamp."""
    if line < 0 or character < 0:
        raise ValueError(f"negative position ({line}, {character})")
    if line >= len(starts):
        return len(text)
    begin = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    content = line_content(text[begin:end])
    if encoding == "utf-32" or code_units(content, encoding) == len(content):
        return begin + min(character, len(content))
    counted = 0
    for index, char in enumerate(content):
        if counted == character:
            return begin + index
        counted += code_units(char, encoding)
        if counted > character:
            raise ValueError(
                f"position ({line}, {character}) falls inside the character {char!r} ({encoding})"
            )
    return begin + len(content)


def _common_prefix(a: str, a_start: int, a_end: int, b: str, b_start: int, b_end: int) -> int:
    """Length of the common prefix of a[a_start:a_end] and b[b_start:b_end]."""
    limit = min(a_end - a_start, b_end - b_start)
    low, high = 0, limit
    # Binary search on slice equality: C-speed comparisons, O(n log n) at worst.
    while low < high:
        mid = (low + high + 1) // 2
        if a[a_start + low : a_start + mid] == b[b_start + low : b_start + mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: str, a_start: int, a_end: int, b: str, b_start: int, b_end: int) -> int:
    """Length of the common suffix of a[a_start:a_end] and b[b_start:b_end]."""
    limit = min(a_end - a_start, b_end - b_start)
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[a_end - mid : a_end - low] == b[b_end - mid : b_end - low]:
            low = mid
        else:
            high = mid - 1
    return low


def text_range(text: str, start: tuple[int, int], end: tuple[int, int], encoding: str) -> str:
    """The text between two LSP positions (clamped as editors clamp)."""
    check_encoding(encoding)
    starts = line_starts(text)
    return text[offset(text, starts, *start, encoding) : offset(text, starts, *end, encoding)]
