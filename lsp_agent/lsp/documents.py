"""The editor's open buffers, kept in step with `didOpen` / `didChange` / `didClose`.

The agent reads a buffer from here rather than from disk while the editor has it open: that is
the user's unsaved typing. Changes arrive incrementally (a range in the negotiated position
encoding and its new text) or whole; they are applied the way `positions.apply_text_edits`
applies an edit, with LSP's line breaks. A change that cannot be applied (a range inside a
character, or ending before it starts) makes the buffer unreliable: it is dropped, and the file
is read from disk until the editor opens it again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from lsp_agent.lsp import positions


@dataclass
class Buffer:
    """One open buffer: its URI as the editor spelled it, its text and its version."""

    uri: str
    source: str
    version: int | None


class Buffers:
    """The open buffers of one connection, keyed by decoded URI (any percent-encoding of a URI
    finds the same buffer)."""

    def __init__(self) -> None:
        self._open: dict[str, Buffer] = {}

    def __iter__(self) -> Iterator[tuple[str, Buffer]]:
        return iter(list(self._open.items()))

    def get(self, uri: str) -> Buffer | None:
        return self._open.get(unquote(uri))

    def open(self, uri: str, text: str, version: int | None) -> None:
        self._open[unquote(uri)] = Buffer(uri, text, version)

    def close(self, uri: str) -> None:
        self._open.pop(unquote(uri), None)

    def change(
        self, uri: str, version: int | None, changes: Sequence[dict[str, Any]], encoding: str
    ) -> str | None:
        """Apply a `didChange`; None when applied, else why the buffer was dropped."""
        key = unquote(uri)
        buffer = self._open.get(key)
        if buffer is None:
            return None  # a change of a buffer never opened: nothing here to keep in step
        text = buffer.source
        for change in changes:
            range_ = change.get("range")
            if range_ is None:
                text = change["text"]
                continue
            start, end = range_["start"], range_["end"]
            edit = positions.TextEdit(
                start["line"], start["character"], end["line"], end["character"], change["text"]
            )
            try:
                text = positions.apply_text_edits(text, [edit], encoding)
            except ValueError as error:
                del self._open[key]
                return str(error)
        buffer.source = text
        buffer.version = version
        return None
