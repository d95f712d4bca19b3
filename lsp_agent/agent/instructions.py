"""Standing instructions: the user's `~/.agents/AGENTS.md` and the workspace's `AGENTS.md`.

Both are read once when a session starts and folded into its system prompt, labelled by where
they come from (the user's first, so the project's, more specific, come last). The system prompt
never changes during a session (prefix caching), so an edited AGENTS.md takes effect in the next
session: `changed_note` compares a cheap fingerprint with the one taken at session start and gives
the line the reminder shows meanwhile.

The workspace's file is the repository's: it is read only as a regular file inside the
workspace, and at most `MAX_BYTES` of it (`safety.reading`). A link out of the workspace (to a
key, to `/proc/self/environ`), a FIFO, a device is not read, and the session's `refusals` say
so in one line for the user ("AGENTS.md links outside the workspace: not read").
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from lsp_agent.safety.reading import Read, Refused, read_confined, read_regular

FILE_NAME = "AGENTS.md"
RECENT_NS = 2_000_000_000
"""A file changed this recently (ns) is read again at the next call rather than judged by its
stats (timestamps are coarse: 4 ms on Linux, 2 s on FAT)."""
MAX_CHARS = 32_000
"""Each file is cut to this many characters, with a note: instructions must leave room to work."""
MAX_BYTES = 4 * MAX_CHARS + 4
"""What is read of a file at most: `MAX_CHARS` characters of UTF-8 and one more (a 400 MB
AGENTS.md costs no more memory than this)."""


@dataclass(frozen=True)
class InstructionFile:
    """One AGENTS.md that was found."""

    label: str
    """`user` or `workspace`."""
    path: Path
    text: str
    """The text as folded into the prompt (cut to `MAX_CHARS`)."""


@dataclass(frozen=True)
class Instructions:
    """The AGENTS.md files a session started with."""

    files: tuple[InstructionFile, ...]
    fingerprint: str
    """Identifies the contents of every source, present or not (see `fingerprint`)."""
    refusals: tuple[str, ...] = ()
    """One line per file that was there but not read (a link out, a FIFO, a device), for the
    user."""

    def prompt_section(self) -> str:
        """The system prompt's part: every file in a labelled `<agents_md>` block; "" when none."""
        if not self.files:
            return ""
        parts = [
            "Standing instructions from AGENTS.md files follow. Follow them; where they "
            "disagree, the workspace's (the project maintainers') win over the user's."
        ]
        for item in self.files:
            who = (
                "the user's own, for every project"
                if item.label == "user"
                else "the project maintainers', for this workspace"
            )
            parts.append(
                f'<agents_md source="{item.label}" path="{item.path}">\n'
                f"<!-- {who} -->\n{item.text.strip()}\n</agents_md>"
            )
        return "\n".join(parts)


def sources(root: Path, home: Path | None = None) -> list[tuple[str, Path]]:
    """Where AGENTS.md files are looked for: the user's, then the workspace's."""
    found: list[tuple[str, Path]] = []
    user_home = home if home is not None else _home()
    if user_home is not None:
        found.append(("user", user_home / ".agents" / FILE_NAME))
    found.append(("workspace", root / FILE_NAME))
    return found


def read_instructions(root: Path, home: Path | None = None) -> Instructions:
    """The AGENTS.md files of the user (`home`, default: the real one) and the workspace."""
    files: list[InstructionFile] = []
    refusals: list[str] = []
    digest = hashlib.sha256()
    for label, path in sources(root, home):
        found = _read(label, root, path)
        digest.update(_chunk(label, found))
        if isinstance(found, Refused):
            refusals.append(str(found))
            continue
        if found is None:
            continue
        text = found.data.decode("utf-8-sig", errors="replace")
        if not text.strip():
            continue
        if len(text) > MAX_CHARS or found.cut:
            text = (
                text[:MAX_CHARS] + f"\n[… the rest of {path} is not included: it is longer "
                f"than {MAX_CHARS:,} characters]"
            )
        files.append(InstructionFile(label, path, text))
    return Instructions(tuple(files), digest.hexdigest(), tuple(refusals))


def fingerprint(root: Path, home: Path | None = None) -> str:
    """A hash of what every AGENTS.md source holds now (a missing file counts as such)."""
    digest = hashlib.sha256()
    for label, path in sources(root, home):
        digest.update(_chunk(label, _read(label, root, path)))
    return digest.hexdigest()


class ChangeWatch:
    """Whether the AGENTS.md files changed since a session started, asked before every model
    call. Their stats are compared on the event loop (a `stat` per source, microseconds); the
    files are read again, in a thread, only when a stat changed: a read per call handed to a
    thread cost more than the rest of the reminder."""

    def __init__(self, at_start: Instructions, root: Path, home: Path | None = None) -> None:
        self.at_start = at_start
        self.root = root
        self.home = home
        self._paths = [path for _, path in sources(root, home)]
        """Where the sources are (found once: the home folder is looked up each time)."""
        self._stats: tuple[tuple[int, ...] | None, ...] | None = None
        """What `stat` said of each source when the files were last read."""
        self._note: str | None = None
        """The note that read gave."""

    async def note(self) -> str | None:
        """The reminder's line when an AGENTS.md changed since the session started, else None."""
        stats = tuple(map(_stat, self._paths))
        if stats != self._stats:
            self._note = await asyncio.to_thread(changed_note, self.at_start, self.root, self.home)
            # A file written in the last moments may be written again within the clock's
            # granularity, leaving the same stats: such stats are not trusted (as git does).
            recent = time.time_ns() - RECENT_NS
            self._stats = None if any(s and s[0] > recent for s in stats) else stats
        return self._note


def _stat(path: Path) -> tuple[int, ...] | None:
    """What changes when a file is written, replaced or removed; None when it is not there."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_ctime_ns, found.st_size, found.st_ino, found.st_dev)


def changed_note(at_start: Instructions, root: Path, home: Path | None = None) -> str | None:
    """The reminder's line when an AGENTS.md changed since the session started, else None."""
    if fingerprint(root, home) == at_start.fingerprint:
        return None
    return (
        "AGENTS.md changed since this session started; the new instructions take effect in "
        "the next session (this one keeps the instructions it started with)."
    )


def _chunk(label: str, found: Read | Refused | None) -> bytes:
    """One source's contribution to a fingerprint: unambiguous whatever the file holds."""
    if found is None:
        return label.encode() + b"\x00absent\x00"
    if isinstance(found, Refused):
        return label.encode() + b"\x00refused\x00" + str(found).encode("utf-8", "replace")
    data = found.data + (b"\x00cut" if found.cut else b"")
    return label.encode() + b"\x00" + len(data).to_bytes(8, "big") + data


def _read(label: str, root: Path, path: Path) -> Read | Refused | None:
    """What one source holds: what was read of it, why it was not read, or None when there is
    no such file. The workspace's is confined to the workspace; the user's is theirs to link."""
    try:
        if label == "workspace":
            return read_confined(root, path, MAX_BYTES, name=FILE_NAME)
        return read_regular(path, MAX_BYTES)
    except Refused as refused:
        return refused
    except OSError:
        return None


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # no home directory to speak of (HOME unset, unknown user)
        return None
