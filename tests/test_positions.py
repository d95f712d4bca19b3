"""LSP position arithmetic, once (`lsp_agent/lsp/positions.py`): lines end only at LF, CRLF and a
lone CR, whatever else `str.splitlines` would split on."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_agent.lsp.arguments import Position, Range
from lsp_agent.lsp.commands import selection_of
from lsp_agent.lsp.positions import ENCODINGS, text_range
from lsp_agent.text import split_lines

NOT_LINE_BREAKS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
"""What `str.splitlines` splits on and LSP does not."""


def line(number: int) -> Range:
    return Range(Position(number, 0), Position(number, 200))


@pytest.mark.parametrize("separator", NOT_LINE_BREAKS, ids=repr)
def test_a_character_splitlines_breaks_on_stays_inside_its_line(separator: str) -> None:
    text = f"x = 1  # page{separator}break\ndef target():\n    pass\n"

    selected = selection_of(text, line(1), "utf-16", Path("/w/a.py"))

    assert selected.text == "def target():"
    assert (selected.start_line, selected.end_line) == (2, 2)
    assert split_lines(text)[0] == f"x = 1  # page{separator}break\n"


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"], ids=repr)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_each_lsp_line_break_ends_a_line_in_every_encoding(eol: str, encoding: str) -> None:
    text = f"first🎉{eol}second line{eol}third"

    assert text_range(text, (1, 0), (1, 200), encoding) == "second line"
    assert text_range(text, (2, 0), (2, 5), encoding) == "third"
    assert text_range(text, (0, 0), (1, 0), encoding) == f"first🎉{eol}"


def test_a_selection_across_lines_keeps_the_text_between_them() -> None:
    text = "a = 1\r\nb = 2\r\nc = 3\r\n"
    selected = selection_of(text, Range(Position(0, 4), Position(2, 1)), "utf-16", Path("/w/a.py"))
    assert selected.text == "1\r\nb = 2\r\nc"
    assert (selected.start_line, selected.end_line) == (1, 3)


def test_a_selection_that_ends_at_the_start_of_a_line_ends_on_the_line_before() -> None:
    # Whole lines selected (or Ctrl+A over a file that ends in a newline): the editor counts the
    # lines that hold selected text, and so does the model's message.
    text = 'def greet():\n    return "hello"\n'
    selected = selection_of(text, Range(Position(0, 0), Position(2, 0)), "utf-16", Path("/w/a.py"))
    assert selected.text == text
    assert (selected.start_line, selected.end_line) == (1, 2)
    # An empty selection at a line's start is that line.
    at = selection_of(text, Range(Position(1, 0), Position(1, 0)), "utf-16", Path("/w/a.py"))
    assert (at.start_line, at.end_line) == (2, 2)


def test_a_column_counts_code_units_of_the_negotiated_encoding() -> None:
    text = "s = '🎉x'\n"
    # 🎉 is 2 UTF-16 units, 4 UTF-8 bytes, 1 UTF-32 unit
    assert text_range(text, (0, 7), (0, 8), "utf-16") == "x"
    assert text_range(text, (0, 9), (0, 10), "utf-8") == "x"
    assert text_range(text, (0, 6), (0, 7), "utf-32") == "x"
