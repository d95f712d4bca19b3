"""Cap on arrival (the first context layer): a long tool result keeps its head and tail inline.

The whole text goes to a spill file, and the inline note says where it is, how much was cut, and
how to page it. Spill files live in a private folder outside the workspace (nothing for git, the
file watcher or the editor to see), which the sandbox binds read-only so that a command can page
them; they are deleted when the turn ends.

Command output is capped as it streams (`SpillStream`), so a 100 MB flood never sits in memory:
only the head, the tail and one read buffer do. A spill file keeps at most `MAX_SPILL_BYTES` of
it (the tail stays in the result): a command cannot fill the host's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lsp_agent.safety.untrusted import mark_untrusted

MAX_SPILL_BYTES = 32 * 1024 * 1024
"""A spill file holds at most this much of a command's output; the rest is counted, not kept."""

# ANSI colour and cursor sequences carry nothing the model can use.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# Control characters other than tab and newlines: binary output must not break the request.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Excerpt:
    """What the model sees of a tool result: all of it, or its head and tail and a spill file."""

    head: str
    tail: str = ""
    total: int = 0
    """Size of the whole result: characters for text, bytes for command output."""
    unit: str = "chars"
    spill: Path | None = None
    """The spill file holding the whole result; None when nothing was cut."""
    cut: int = 0
    """How much of the whole is not shown inline (in `unit`)."""
    kept: int | None = None
    """How much the spill file holds when it could not hold the whole (`MAX_SPILL_BYTES`)."""

    def note(self) -> str:
        """The inline note that replaces the middle: where the whole is and how to page it."""
        assert self.spill is not None
        where = f"The whole output is in {self.spill}"
        if self.kept is not None:
            where = (
                f"The first {self.kept:,} {self.unit} of the output are in {self.spill} (the rest "
                "was too large to keep)"
            )
        return (
            f"[… {self.cut:,} of {self.total:,} {self.unit} cut here. {where}: page it with bash "
            "(head -n, tail -n, sed -n '200,300p', grep -n). It is deleted when this turn ends.]"
        )


def render(excerpt: Excerpt, source: str | None) -> str:
    """The excerpt as tool-result text; outside text (`source` set) is marked untrusted."""

    def piece(text: str) -> str:
        return mark_untrusted(text, source) if source is not None else text

    if excerpt.spill is None:
        return piece(excerpt.head)
    if source is None:
        return f"{excerpt.head}\n{excerpt.note()}\n{excerpt.tail}"
    return f"{piece(excerpt.head)}\n{excerpt.note()}\n{piece(excerpt.tail)}"


def clean(text: str) -> str:
    """Text fit for a model request: no ANSI sequences, no NUL or other control characters."""
    return _CONTROL.sub("\ufffd", _ANSI.sub("", text))


class Spills:
    """The spill files of one session; `sweep()` deletes them at the end of each turn."""

    def __init__(self, parent: Path | None = None) -> None:
        self.parent = parent
        """Where the private spill folder is made (the system temp folder by default)."""
        self._directory: Path | None = None
        self._count = 0

    def directory(self) -> Path:
        """The private spill folder (mode 0700), made on first use."""
        if self._directory is None or not self._directory.is_dir():
            if self.parent is not None:
                self.parent.mkdir(parents=True, exist_ok=True)
            made = tempfile.mkdtemp(prefix="lsp-agent-spill-", dir=self.parent)
            self._directory = Path(made).resolve()
        return self._directory

    def existing(self) -> tuple[Path, ...]:
        """The spill folder when it exists (for permission rules: commands may read it)."""
        if self._directory is not None and self._directory.is_dir():
            return (self._directory,)
        return ()

    def new_path(self, name: str) -> Path:
        """A fresh file name in the spill folder, e.g. `3-bash.txt`."""
        self._count += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:40] or "output"
        return self.directory() / f"{self._count}-{safe}.txt"

    def cap(self, text: str, limit: int, name: str = "output") -> Excerpt:
        """`text` whole when it fits in `limit` characters, else its head and tail, spilled."""
        if len(text) <= limit:
            return Excerpt(text, total=len(text))
        path = self.new_path(name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)
        head_chars = limit // 2
        tail_chars = limit - head_chars
        return Excerpt(
            text[:head_chars],
            text[len(text) - tail_chars :],
            len(text),
            "chars",
            path,
            len(text) - head_chars - tail_chars,
        )

    def stream(self, limit: int, name: str = "output") -> SpillStream:
        """A sink for streamed bytes that keeps at most about `limit` bytes in memory."""
        return SpillStream(self, limit, name)

    def sweep(self) -> None:
        """Delete every spill file and the folder (made again when next needed)."""
        directory, self._directory = self._directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


class SpillStream:
    """Bytes in; head, tail and (past the limit) a spill file with all of them out."""

    def __init__(self, spills: Spills, limit: int, name: str) -> None:
        self._spills = spills
        self._limit = max(limit, 2)
        self._name = name
        self._head_bytes = self._limit // 2
        self._tail_bytes = self._limit - self._head_bytes
        self._buffer = bytearray()
        """Everything so far while it fits in the limit; then only the head."""
        self._tail = bytearray()
        self._total = 0
        self._file: BinaryIO | None = None
        self._path: Path | None = None
        self._written = 0
        """Bytes in the spill file (at most `MAX_SPILL_BYTES`)."""

    @property
    def total(self) -> int:
        return self._total

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of output."""
        if not chunk:
            return
        self._total += len(chunk)
        if self._file is None:
            self._buffer += chunk
            if len(self._buffer) <= self._limit:
                return
            self._path = self._spills.new_path(self._name)
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self._file = os.fdopen(fd, "wb")
            self._spill(bytes(self._buffer))
            self._tail = self._buffer[-self._tail_bytes :]
            del self._buffer[self._head_bytes :]
            return
        self._spill(chunk)
        self._tail += chunk
        if len(self._tail) > 2 * self._tail_bytes:
            del self._tail[: len(self._tail) - self._tail_bytes]

    def _spill(self, data: bytes) -> None:
        assert self._file is not None
        room = MAX_SPILL_BYTES - self._written
        if room > 0:
            self._file.write(data[:room])
            self._written += min(room, len(data))

    def finish(self) -> Excerpt:
        """Close the spill file, and say what to show inline."""
        if self._file is None:
            text = clean(bytes(self._buffer).decode("utf-8", "replace"))
            return Excerpt(text, total=self._total, unit="bytes")
        self._file.close()
        head = bytes(self._buffer[: self._head_bytes])
        tail = bytes(self._tail[-self._tail_bytes :])
        return Excerpt(
            clean(_decode_head(head)),
            clean(_decode_tail(tail)),
            self._total,
            "bytes",
            self._path,
            self._total - len(head) - len(tail),
            self._written if self._written < self._total else None,
        )

    def close(self) -> None:
        """Close the spill file without an excerpt (the command was cancelled)."""
        if self._file is not None:
            self._file.close()


def _decode_head(data: bytes) -> str:
    # A multi-byte character cut at the end is dropped rather than shown as garbage.
    text = data.decode("utf-8", "replace")
    return text[:-1] if text.endswith("\ufffd") and not data.endswith(b"\xef\xbf\xbd") else text


def _decode_tail(data: bytes) -> str:
    # Skip continuation bytes of a character whose start was cut off.
    start = 0
    while start < min(len(data), 4) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode("utf-8", "replace")
