"""The editor's open buffers, kept in step with `didOpen` / `didChange` / `didClose`.

The agent reads a buffer from here rather than from disk while the editor has it open: that is
the user's unsaved typing. Changes arrive incrementally (a range in the negotiated position
encoding and its new text) or whole, and are applied as `positions.apply_text_edits` applies an
edit (LSP's line breaks, positions clamped as editors clamp them). A buffer is kept as its lines,
so a keystroke re-reads only the lines it touches, whatever the size of the file; the text is
joined when someone reads it. A change that cannot be applied (a range inside a character, or
ending before it starts) makes the buffer unreliable: it is dropped, and the file is read from
disk until the editor opens it again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from urllib.parse import unquote

from lsprotocol import types

from lsp_agent.lsp import positions
from lsp_agent.text import split_lines


class Buffer:
    """One open buffer: its URI as the editor spelled it, its text and its version."""

    def __init__(self, uri: str, text: str, version: int | None) -> None:
        self.uri = uri
        self.version = version
        self._lines = split_lines(text)
        """The text's LSP lines, each with its line break (the last one may have none)."""
        self._text: str | None = text

    @property
    def source(self) -> str:
        """The buffer's text."""
        if self._text is None:
            self._text = "".join(self._lines)
        return self._text

    def replace(self, text: str) -> None:
        self._lines = split_lines(text)
        self._text = text

    def edit(self, range_: types.Range, text: str, encoding: str) -> None:
        """Replace `range_` by `text`; `ValueError` when the range cannot be applied (it ends
        before it starts, or a position falls inside a character)."""
        lines = self._lines
        start, end = range_.start, range_.end
        first = self._locate(start.line, start.character, encoding)
        last = self._locate(end.line, end.character, encoding)
        if last < first:
            raise ValueError(f"the range ends before it starts: {range_}")
        (a_line, a_at), (b_line, b_at) = first, last
        middle = (
            (lines[a_line][:a_at] if a_line < len(lines) else "")
            + text
            + (lines[b_line][b_at:] if b_line < len(lines) else "")
        )
        replaced_to = min(b_line + 1, len(lines))
        # One unchanged line on each side is split again with the edit: a line break can join
        # across the edit's ends ("\r" before it and "\n" after it make one CRLF).
        low, high = max(a_line - 1, 0), min(replaced_to + 1, len(lines))
        window = "".join(lines[low:a_line]) + middle + "".join(lines[replaced_to:high])
        lines[low:high] = split_lines(window)
        self._text = None

    def _locate(self, line: int, character: int, encoding: str) -> tuple[int, int]:
        """(line, code-point index in it) of an LSP position; past the last line: the end."""
        if line < 0 or character < 0:
            raise ValueError(f"negative position ({line}, {character})")
        if line >= len(self._lines):
            return len(self._lines), 0
        text = self._lines[line]
        at = positions.offset(text, [0], 0, character, encoding)
        if at == len(text):  # the end of a last line without a break: the end of the text
            return len(self._lines), 0
        return line, at


class Buffers:
    """The open buffers of one connection, keyed by decoded URI (any percent-encoding of a URI
    finds the same buffer)."""

    def __init__(self) -> None:
        self._open: dict[str, Buffer] = {}

    def __iter__(self) -> Iterator[Buffer]:
        return iter(list(self._open.values()))

    def get(self, uri: str) -> Buffer | None:
        return self._open.get(unquote(uri))

    def open(self, uri: str, text: str, version: int | None) -> None:
        self._open[unquote(uri)] = Buffer(uri, text, version)

    def close(self, uri: str) -> None:
        self._open.pop(unquote(uri), None)

    def change(
        self,
        uri: str,
        version: int | None,
        changes: Sequence[types.TextDocumentContentChangeEvent],
        encoding: str,
    ) -> str | None:
        """Apply a `didChange`; None when applied, else why the buffer was dropped."""
        positions.check_encoding(encoding)
        key = unquote(uri)
        buffer = self._open.get(key)
        if buffer is None:
            return None  # a change of a buffer never opened: nothing here to keep in step
        for change in changes:
            try:
                if isinstance(change, types.TextDocumentContentChangePartial):
                    buffer.edit(change.range, change.text, encoding)
                else:
                    buffer.replace(change.text)
            except ValueError as error:
                del self._open[key]
                return str(error)
        buffer.version = version
        return None
