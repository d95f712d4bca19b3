"""One session's transcript on disk: an append-only JSONL file, and the history rebuilt from it.

One JSON record a line: a `session` header first, then `message` (an OpenAI chat message), `event`
(cancellation, error, edit outcome, usage, compaction, ...) and `turn` (how a turn ended)
records, each with a `ts` timestamp. The file is the truth: context layers change what is sent,
never what is stored.

Durability: every record reaches the kernel in one `write()` on an `O_APPEND` descriptor before
`append` returns (no user-space buffer), so a server killed with `kill -9` mid-turn loses nothing it
had appended, and two appenders never interleave within a line. `fsync` runs only on `close`: an
append costs tens of microseconds and may run on the event loop, while an fsync can stall for
milliseconds or more on a busy disk; what fsync adds is surviving a power cut, and the kernel's own
writeback already bounds that loss to the last half minute or so.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

_log = logging.getLogger(__name__)


RECORD_TYPES = ("session", "message", "event", "turn")
"""The `type` a transcript record may have."""


INTERRUPTED = "interrupted: the server stopped before this tool ran; run it again if still needed"
"""Result given on resume to a tool call whose result was never stored."""


REDACTED = "[redacted]"
"""What a registered secret is replaced with before a record is written."""


MIN_SECRET_LENGTH = 8
"""Shorter values are placeholders (`ollama`, `EMPTY`, `none`), not credentials; replacing them
everywhere would garble the transcript, so they are not redacted."""


TITLE_CHARS = 80
"""Longest session title: the first line of the first prompt."""


_PROMPT_PREFIX = b'{"type": "message", "role": "user"'


@dataclass(frozen=True)
class SessionInfo:
    """One line of `lsp-agent sessions` and of the `lspAgent.sessions` result."""

    session: str
    """The session id."""
    started: str
    """When it was created, ISO 8601 in UTC."""
    turns: int
    """How many prompts the user sent in it."""
    title: str
    """The first line of the first prompt, at most `TITLE_CHARS` characters; empty if none."""

    def as_dict(self) -> dict[str, Any]:
        """The `{session, started, turns, title}` object of `lspAgent.sessions`."""
        return {
            "session": self.session,
            "started": self.started,
            "turns": self.turns,
            "title": self.title,
        }


class Transcript:
    """One session's JSONL file: append records, read them back, rebuild the history."""

    def __init__(self, path: Path, session_id: str, secrets: set[str] | None = None) -> None:
        self.session_id = session_id
        """The id, also the file's stem."""
        self.path = path
        """The JSONL file."""
        self.secrets: set[str] = secrets if secrets is not None else set()
        """Values replaced by `[redacted]` before anything is written; shared with the store."""
        self.warnings: list[str] = []
        """What the last `records()` or `messages()` had to skip or repair, one sentence each."""
        self._file: io.FileIO | None = None
        self._lock = threading.Lock()
        self._summary: Summary | None = None

    def __repr__(self) -> str:
        return f"Transcript({self.session_id!r}, {str(self.path)!r})"

    @property
    def turns(self) -> int:
        """How many prompts the user sent in this session (read from the file)."""
        return self.info().turns

    def info(self) -> SessionInfo:
        """Id, start time, turns and title, reading only what was appended since the last call."""
        with self._lock:
            self._summary = summarize(self.path, self._summary)
            return self._summary.info(self.session_id)

    def redact(self, secret: str) -> None:
        """Never write `secret`: it becomes `[redacted]` wherever it appears in a record."""
        if len(secret) >= MIN_SECRET_LENGTH:
            self.secrets.add(secret)

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record as one line, now; adds `ts` when missing and redacts secrets.

        Raises ValueError for a record without a known `type`, or a `message` record without a
        message that has a `role`: those are bugs of the caller, not of the session.
        """
        kind = record.get("type")
        if kind not in RECORD_TYPES:
            raise ValueError(f"transcript record type must be one of {RECORD_TYPES}, got {kind!r}")
        ordered: dict[str, Any] = {"type": kind}
        if kind == "message":
            message = record.get("message")
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
                raise ValueError("a message record needs `message`: a chat message with a role")
            ordered["role"] = message["role"]
        ordered["ts"] = record.get("ts") or now_iso()
        for key, value in record.items():
            ordered.setdefault(key, value)
        with self._lock:
            line = self._encode(ordered)
            handle = self._handle()
            write_all(handle, line)

    def records(self) -> list[dict[str, Any]]:
        """Every readable record, in order; unreadable lines are skipped and noted in `warnings`."""
        self.warnings = []
        with self._lock:
            data = self.path.read_bytes()
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        found: list[dict[str, Any]] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = _parse(line)
            if record is not None:
                found.append(record)
                continue
            where = "last line" if number == len(lines) else f"line {number}"
            self._warn(
                f"skipped the {where} of session {self.session_id}: it is not a complete "
                "record (the server was probably stopped while writing it)"
            )
        return found

    def messages(self, records: Iterable[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The stored chat history, repaired so that a provider accepts it: of `records` when
        given (the records a session continues from), else of every record.

        A tool call without a stored result (the server stopped first) gets a synthetic result
        saying so; a tool result that answers no pending call is dropped.
        """
        history = [
            dict(record["message"])
            for record in (self.records() if records is None else records)
            if record.get("type") == "message" and isinstance(record.get("message"), dict)
        ]
        repaired, added, dropped = _pair_tool_calls(history)
        if added:
            self._warn(
                f"session {self.session_id}: {added} tool call(s) had no result because the "
                "server stopped before they ran; they are answered as interrupted"
            )
        if dropped:
            self._warn(
                f"session {self.session_id}: dropped {dropped} tool result(s) that answer no "
                "pending tool call"
            )
        return repaired

    def close(self) -> None:
        """Flush to stable storage and close the file; a later `append` opens it again."""
        with self._lock:
            if self._file is not None:
                try:
                    os.fsync(self._file.fileno())
                finally:
                    self._file.close()
                    self._file = None

    def __enter__(self) -> Transcript:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _encode(self, record: dict[str, Any]) -> bytes:
        # tuple() copies the set in one step, so a concurrent `redact` cannot break the loop.
        active = [secret for secret in tuple(self.secrets) if len(secret) >= MIN_SECRET_LENGTH]
        line = json.dumps(_scrub(record, active), default=str)
        # Catches what the deep walk cannot see: objects turned to text by `default=str`.
        for secret in active:
            line = line.replace(secret, REDACTED)
        return (line + "\n").encode("utf-8")

    def _handle(self) -> io.FileIO:
        if self._file is None:
            self._file = open_append(self.path, exclusive=False)
            size = os.fstat(self._file.fileno()).st_size
            if size and not _ends_with_newline(self.path, size):
                # A line cut short by a crash must not swallow the next record.
                write_all(self._file, b"\n")
        return self._file

    def _adopt(self, handle: io.FileIO) -> None:
        """Use a descriptor the store just created the file with."""
        self._file = handle

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        _log.warning(message)


@dataclass(frozen=True)
class Summary:
    """What `list` needs from a file, and how far the file has been read for it."""

    identity: tuple[int, int]
    """`(st_dev, st_ino)`: a replaced file is read again from the start."""
    offset: int = 0
    """Bytes read so far, always at the end of a complete line."""
    started: str | None = None
    turns: int = 0
    title: str | None = None
    mtime: float = 0.0

    def info(self, session_id: str) -> SessionInfo:
        started = self.started or iso(datetime.fromtimestamp(self.mtime, UTC))
        return SessionInfo(session_id, started, self.turns, self.title or "")


def summarize(path: Path, previous: Summary | None) -> Summary:
    """Bring a summary up to date, reading only complete lines appended after `previous`."""
    status = path.stat()
    identity = (status.st_dev, status.st_ino)
    summary = previous
    if summary is None or summary.identity != identity or status.st_size < summary.offset:
        summary = Summary(identity)
    summary = replace(summary, mtime=status.st_mtime)
    if status.st_size == summary.offset:
        return summary
    offset, started, turns, title = summary.offset, summary.started, summary.turns, summary.title
    with path.open("rb") as file:
        file.seek(offset)
        for line in file:
            if not line.endswith(b"\n"):
                break  # still being written, or cut short: not a record yet
            if offset == 0:
                started = _header_started(line)
            offset += len(line)
            if line.startswith(_PROMPT_PREFIX):
                # Prompts are few and short, so parsing them is cheap; a line cut by a crash
                # (and closed by the next append's newline) must not count.
                record = _parse(line)
                if record is not None:
                    turns += 1
                    if title is None:
                        title = _title(record)
    return replace(summary, offset=offset, started=started, turns=turns, title=title)


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record on a line, or None when the line is not one (cut short, damaged)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _header_started(line: bytes) -> str | None:
    header = _parse(line)
    if header is not None and header.get("type") == "session":
        started = header.get("started")
        return started if isinstance(started, str) else None
    return None


def _title(record: dict[str, Any]) -> str | None:
    """The first non-blank line of a prompt record's text, shortened to `TITLE_CHARS`."""
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts: keep the text ones
        content = "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    if not isinstance(content, str):
        return None
    first = next((line for line in content.splitlines() if line.strip()), "")
    first = " ".join(first.split())
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"


def _pair_tool_calls(
    history: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], int, int]:
    """Answer every tool call and drop unanswerable results; returns (history, added, dropped)."""
    repaired: list[dict[str, Any]] = []
    pending: dict[str, None] = {}  # ids of the latest assistant message still awaiting results
    added = dropped = 0

    def answer_pending() -> None:
        nonlocal added
        for call_id in pending:
            repaired.append({"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED})
            added += 1
        pending.clear()

    for message in history:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str) and call_id in pending:
                del pending[call_id]
                repaired.append(message)
            else:
                dropped += 1
            continue
        answer_pending()
        repaired.append(message)
        calls = message.get("tool_calls") if role == "assistant" else None
        if isinstance(calls, list):
            for call in calls:
                call_id = call.get("id") if isinstance(call, dict) else None
                if isinstance(call_id, str):
                    pending[call_id] = None
    answer_pending()
    return repaired, added, dropped


def _scrub(value: Any, secrets: list[str]) -> Any:
    """A copy of `value` with every secret inside any string (keys too) replaced."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {_scrub(key, secrets): _scrub(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(item, secrets) for item in value]
    return value


def open_append(path: Path, *, exclusive: bool) -> io.FileIO:
    """An unbuffered `O_APPEND` file: each write is one system call that lands at the end."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
    if exclusive:
        flags |= os.O_EXCL
    descriptor = os.open(path, flags, 0o600)
    return io.FileIO(descriptor, "a", closefd=True)


def write_all(handle: io.FileIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = handle.write(view)
        if written is None:  # only for non-blocking files, which ours are not
            continue
        view = view[written:]


def _ends_with_newline(path: Path, size: int) -> bool:
    with path.open("rb") as file:
        file.seek(size - 1)
        return file.read(1) == b"\n"


def now_iso() -> str:
    return iso(datetime.now(UTC))


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")
