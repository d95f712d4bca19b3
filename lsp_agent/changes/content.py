"""How the tracker reads the workspace's files: never through a symbolic link.

A command can plant a link to a file outside the workspace (a host file the sandbox cannot
even read); following it would carry that file's content into `<file_changes>`. So a path is
read only when no part of it below the workspace root is a link, and a link itself is known by
its target's name, as git stores it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

MAX_HASH_BYTES = 8 * 1024 * 1024
"""Larger files are told apart by size and modification time instead of content."""
MAX_TEXT_BYTES = 1024 * 1024
"""Larger files get no diff."""


def inside(root: Path, rel: str) -> Path | None:
    """`root / rel` when no part of it below `root` is a symbolic link (the last part may be
    one: it is then read as a link, never followed); None otherwise."""
    path = root / rel
    parent = os.path.realpath(path.parent)
    expected = os.path.normpath(path.parent)
    if parent != expected:
        return None
    return path


def read_text(root: Path, rel: str) -> str | None:
    """The text of a regular file of at most `MAX_TEXT_BYTES` (UTF-8, no NUL), else None."""
    path = inside(root, rel)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_TEXT_BYTES:
                return None
            data = handle.read(MAX_TEXT_BYTES + 1)
        except OSError:
            return None
    return decode(data)


def decode(data: bytes) -> str | None:
    """UTF-8 text without a byte-order mark, or None for binary data."""
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")


def file_digest(root: Path, rel: str) -> str | None:
    """git's blob hash of the file's bytes (of a link's target name, for a link); a size/time
    stamp for huge files; None when there is no file (absent, a folder, behind a link)."""
    path = inside(root, rel)
    if path is None:
        return None
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return blob_digest(os.fsencode(os.readlink(path)))
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_HASH_BYTES:
            return f"stat:{info.st_size}:{info.st_mtime_ns}"
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            return blob_digest(handle.read())
    except OSError:
        return None


def lf_digest(root: Path, rel: str) -> str | None:
    """The blob hash of the file with CRLF line ends made LF: what git stores for a file it
    checked out with CRLF (`core.autocrlf`, `eol=crlf`); None when the file has no CRLF."""
    path = inside(root, rel)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(MAX_HASH_BYTES + 1)
    except OSError:
        return None
    if b"\r\n" not in data or len(data) > MAX_HASH_BYTES:
        return None
    return blob_digest(data.replace(b"\r\n", b"\n"))


def stamp(root: Path, rel: str) -> str | None:
    """Size and modification time, for files too many to hash; None when absent."""
    try:
        info = (root / rel).lstat()
    except OSError:
        return None
    return f"stat:{info.st_size}:{info.st_mtime_ns}"


def blob_digest(data: bytes) -> str:
    """git's object name for a blob of `data`."""
    sha = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    sha.update(data)
    return sha.hexdigest()


def text_digests(text: str) -> list[str]:
    """Digests `text` has on disk: as UTF-8, and with a byte-order mark."""
    data = text.encode("utf-8", "surrogatepass")
    return [blob_digest(data), blob_digest(b"\xef\xbb\xbf" + data)]
