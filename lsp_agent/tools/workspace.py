"""Path confinement: the one place where a path from the model becomes a file on disk.

Every tool passes the model's path through `Workspace.resolve()`, which follows symlinks and
refuses anything outside the workspace root, anything under `.git`, `.env*` or `.venv` (for
reading and writing alike), and, for writes, anything matching the `readOnlyPaths` globs.
`Workspace.read_disk()` turns a resolved path into a `Document`, refusing binary and non-UTF-8
files with a message the model can act on.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path, PurePath

import pathspec

from lsp_agent.errors import ToolError
from lsp_agent.port import Document
from lsp_agent.safety.protected import off_limits
from lsp_agent.safety.symlinks import resolved as resolve_path

BINARY_SNIFF_BYTES = 8192
"""How much of a file is checked for a NUL byte before it is called binary."""
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

MAX_FILE_BYTES = 20 * 1024 * 1024
"""Larger files are refused by `read_disk`: the model pages them with search or bash."""

# Two characters at least, so a Windows drive (`C://x`) is not taken for a scheme.
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)

_SECRET_HINT = "these files hold credentials; ask the user for any value you need"
_PROTECTED_HINTS = {
    ".git": "inspect history with git commands through bash (git log, git show, git diff)",
    ".env": "these files hold secrets; ask the user for any value you need",
    ".venv": "installed packages are not part of the project; work on the project's own files",
}


class Workspace:
    """The workspace root the agent is confined to, and the rules for paths inside it."""

    def __init__(self, root: str | os.PathLike[str], *, read_only: Sequence[str] = ()) -> None:
        """Confine tools to `root`; `read_only` are `readOnlyPaths` globs (gitignore syntax).

        Raises ValueError when a `read_only` pattern is not a valid glob.
        """
        given = Path(root).absolute()
        self.root: Path = given.resolve(strict=False)
        """The workspace root, absolute with symlinks resolved."""
        self.read_only: tuple[str, ...] = tuple(read_only)
        """Globs the agent may read but never edit (the `readOnlyPaths` setting)."""
        self._read_only_spec = pathspec.GitIgnoreSpec.from_lines(self.read_only)
        # Absolute paths from the editor may spell the root the way the user opened it
        # (through a symlink such as macOS's /tmp); both spellings count as inside.
        self._root_spellings: tuple[Path, ...] = (
            (self.root,) if given == self.root else (self.root, given)
        )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, read_only={list(self.read_only)!r})"

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The absolute, symlink-free path for `path`, or a ToolError (reason `path`).

        `path` may be relative to the root, absolute inside the root, or a `file://` URI; an
        empty path is the root itself (for listing tools). Refused: anything that resolves
        outside the root, any component `.git`, `.venv` or starting with `.env` (before or
        after following symlinks), NUL bytes, other URI schemes, and, when `for_write` is
        true, paths matching a `readOnlyPaths` glob. The file need not exist.
        """
        if not isinstance(path, str):
            raise ToolError(
                f"invalid path {path!r}: a path must be a string such as 'src/app.py'",
                reason="path",
            )
        if "\x00" in path:
            raise ToolError(
                f"invalid path {path!r}: it contains a NUL byte; send the path as plain text, "
                "e.g. 'src/app.py'",
                reason="path",
            )
        raw = self._path_from_text(path)
        if raw is None:
            return self.root
        joined = raw if raw.is_absolute() else self.root / raw
        try:
            resolved = resolve_path(joined)
        except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: a symlink loop
            raise ToolError(
                f"invalid path {path!r}: {exc}; use list_files to find a valid path",
                reason="path",
            ) from exc
        if not resolved.is_relative_to(self.root):
            raise ToolError(
                f"path outside the workspace refused: {path}; use a path under {self.root}",
                reason="path",
            )
        inside = resolved.relative_to(self.root)
        for parts in (self._lexical_parts(raw), inside.parts):
            for part in parts:
                name = off_limits(part)
                if name is not None:
                    raise ToolError(
                        f"protected path refused: {path} (.git, .env*, .venv and credential "
                        f"files are off limits for reading and writing); "
                        f"{_PROTECTED_HINTS.get(name, _SECRET_HINT)}",
                        reason="path",
                    )
        if for_write and self.read_only:
            self._check_writable(path, raw, inside)
        return resolved

    def relative(self, path: Path) -> str:
        """`path` relative to the root in POSIX form, for messages (`.` for the root itself).

        A path outside the root (which `resolve()` never returns) comes back absolute.
        """
        for base in self._root_spellings:
            if path.is_relative_to(base):
                rel = path.relative_to(base)
                return rel.as_posix() if rel.parts else "."
        return path.as_posix()

    def read_disk(self, path: Path) -> Document:
        """The text of the file at `path` (a path from `resolve()`), as on disk.

        A leading UTF-8 byte-order mark is stripped and remembered (`Document.bom`); line
        endings are kept as they are. Refused with a ToolError: a missing file (`not_found`),
        a directory or other non-regular file (`path`), a binary file (`binary`: a NUL byte in
        the first 8 KB) and text that is not UTF-8 (`encoding`). This blocks on disk I/O: call
        it through `asyncio.to_thread` from the event loop.
        """
        rel = self.relative(path)
        data = _contents(path, rel)

        if data.startswith(_UTF16_BOMS):
            raise ToolError(
                f"{rel} is UTF-16 text; only UTF-8 files can be read and edited — convert it "
                "with bash (iconv -f UTF-16 -t UTF-8) if the user agrees",
                reason="encoding",
            )
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            raise ToolError(
                f"binary file refused: {rel} ({len(data)} bytes, a NUL byte in the first 8 KB); "
                "only text files can be read — use bash (file, xxd | head) to inspect it",
                reason="binary",
            )
        bom = data.startswith(codecs.BOM_UTF8)
        if bom:
            data = data[len(codecs.BOM_UTF8) :]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise ToolError(
                f"{rel} is not UTF-8 text (invalid byte 0x{data[exc.start]:02x} on line {line}); "
                "only UTF-8 files can be read and edited — use bash (file, iconv) to inspect it",
                reason="encoding",
            ) from exc
        return Document(text=text, version=None, bom=bom)

    def _path_from_text(self, path: str) -> Path | None:
        """The path the text names (a `file://` URI decoded), or None for the root."""
        if not path.strip():
            return None
        if path[:5].lower() == "file:":
            parts = urllib.parse.urlsplit(path)
            if parts.netloc not in ("", "localhost"):
                raise ToolError(
                    f"unsupported URI {path!r}: files on another host are not in the workspace; "
                    f"use a path under {self.root}",
                    reason="path",
                )
            local = urllib.request.url2pathname(parts.path)
            if "\x00" in local:
                raise ToolError(
                    f"invalid path {path!r}: it contains a NUL byte; send the path as plain "
                    "text, e.g. 'src/app.py'",
                    reason="path",
                )
            return Path(local)
        # Only `scheme://` counts as a URI: a colon is legal in a file name (`notes:v2.md`).
        if _URI_SCHEME.match(path):
            raise ToolError(
                f"unsupported URI {path!r}: only plain paths and file:// URIs name files in "
                "the workspace",
                reason="path",
            )
        return Path(path)

    def _lexical_parts(self, raw: Path) -> tuple[str, ...]:
        """The components of `raw` below the root, as written (before following symlinks)."""
        if not raw.is_absolute():
            return raw.parts
        for base in self._root_spellings:
            if raw.is_relative_to(base):
                return raw.relative_to(base).parts
        return ()

    def _check_writable(self, path: str, raw: Path, inside: Path) -> None:
        """Refuse a write to a path matching a `readOnlyPaths` glob, as written or resolved."""
        candidates = {inside.as_posix()}
        lexical = self._lexical_parts(raw)
        if lexical and ".." not in lexical:
            candidates.add(PurePath(*lexical).as_posix())
        for candidate in candidates:
            if candidate != "." and self._read_only_spec.match_file(candidate):
                patterns = ", ".join(self.read_only)
                raise ToolError(
                    f"read-only path refused: {path} matches readOnlyPaths ({patterns}); it may "
                    "be read but not edited — change the file it is generated from, or ask the "
                    "user",
                    reason="path",
                )


def _read_up_to(fd: int, limit: int) -> bytes:
    """At most `limit` bytes of the open file `fd`, from its start."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _contents(path: Path, rel: str) -> bytes:
    """The bytes of the regular file at `path`, at most `MAX_FILE_BYTES`; a `ToolError` that
    says what to do for anything else.

    Opened without waiting (a FIFO swapped in after `resolve()` opens at once) and judged by
    what was opened, not by a look before: a file changed between the two is never read as the
    regular file it was."""
    fd = _opened(path, rel)
    try:
        info = os.fstat(fd) if fd >= 0 else path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(
                f"{rel} is a directory, not a file; use list_files to see what it contains",
                reason="path",
            )
        # A FIFO or a device would block or never end; only regular files are read.
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(
                f"{rel} is not a regular file (a pipe, socket or device); only text files can "
                "be read",
                reason="path",
            )
        if info.st_size > MAX_FILE_BYTES:
            raise ToolError(
                f"{rel} is too large to read whole ({info.st_size / 2**20:.0f} MB, the limit is "
                f"{MAX_FILE_BYTES // 2**20} MB); look at parts of it with search or bash (head, "
                "tail, sed -n, grep)",
                reason="too_large",
            )
        data = _read_up_to(fd, MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ToolError(f"could not read {rel}: {exc.strerror or exc}", reason="path") from exc
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_FILE_BYTES:  # it grew after its size was read
        raise ToolError(
            f"{rel} is too large to read whole (over {MAX_FILE_BYTES // 2**20} MB); look at "
            "parts of it with search or bash (head, tail, sed -n, grep)",
            reason="too_large",
        )
    return data


def _opened(path: Path, rel: str) -> int:
    """`path` opened for reading without waiting; -1 for a directory; a `ToolError` saying
    what to do when it cannot be opened."""
    try:
        return os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    except IsADirectoryError:
        return -1
    except FileNotFoundError as exc:
        raise ToolError(
            f"file not found: {rel}; use list_files or search to find the right path",
            reason="not_found",
        ) from exc
    except NotADirectoryError as exc:
        raise ToolError(
            f"file not found: {rel} (a parent of it is a file, not a directory); use list_files "
            "or search to find the right path",
            reason="not_found",
        ) from exc
    except PermissionError as exc:
        raise ToolError(
            f"permission denied reading {rel}; the file is not readable by the agent",
            reason="path",
        ) from exc
    except OSError as exc:
        raise ToolError(f"could not read {rel}: {exc.strerror or exc}", reason="path") from exc
