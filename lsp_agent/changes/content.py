"""How the tracker reads the workspace's files: never through a symbolic link.

A command can plant a link to a file outside the workspace (a host file the sandbox cannot
even read); following it would carry that file's content into `<file_changes>`. So a path is
read only when no folder of it below the workspace root is a link, the file itself is opened
without following a link, and a link is known by its target's name, as git stores it.
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
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class Files:
    """Reads files below one root for one batch of work (a refresh, a note).

    Folders found to be no link are remembered for the reader's life, which is one batch: a
    folder replaced by a link later is caught by the next batch's reader.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        """The workspace folder (links resolved)."""
        self._plain_dirs: dict[str, bool] = {"": True}
        """Folder (relative) → no part of it is a link."""

    def inside(self, rel: str) -> Path | None:
        """`root / rel` when no folder of it below the root is a link; None otherwise."""
        parent = rel.rpartition("/")[0]
        if not self._plain(parent):
            return None
        return self.root / rel

    def read_text(self, rel: str) -> str | None:
        """The text of a regular file of at most `MAX_TEXT_BYTES` (UTF-8, no NUL), else None."""
        data = self._read(rel, MAX_TEXT_BYTES)
        return decode(data) if data is not None else None

    def digests(self, rel: str) -> tuple[str | None, str | None]:
        """git's blob hash of the file's bytes (of a link's target name, for a link; a size and
        time stamp for huge files; None when there is no file), and the hash of the bytes with
        CRLF line ends made LF when they have any (what git stores for a file it checked out
        with CRLF), else None."""
        path = self.inside(rel)
        if path is None:
            return None, None
        try:
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                return blob_digest(os.fsencode(os.readlink(path))), None
            if not stat.S_ISREG(info.st_mode):
                return None, None
            if info.st_size > MAX_HASH_BYTES:
                return f"stat:{info.st_size}:{info.st_mtime_ns}", None
        except OSError:
            return None, None
        data = self._read(rel, MAX_HASH_BYTES)
        if data is None:
            return None, None
        lf = blob_digest(data.replace(b"\r\n", b"\n")) if b"\r\n" in data else None
        return blob_digest(data), lf

    def digest(self, rel: str) -> str | None:
        """The first of `digests`."""
        return self.digests(rel)[0]

    def stamp(self, rel: str) -> str | None:
        """Size and modification time, for files too many to hash; None when absent."""
        path = self.inside(rel)
        try:
            info = path.lstat() if path is not None else None
        except OSError:
            return None
        return f"stat:{info.st_size}:{info.st_mtime_ns}" if info is not None else None

    def _read(self, rel: str, limit: int) -> bytes | None:
        path = self.inside(rel)
        if path is None:
            return None
        try:
            # Not following a link, and not waiting on a FIFO: fstat below keeps regular files.
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            try:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                    return None
                data = handle.read(limit + 1)
            except OSError:
                return None
        return data if len(data) <= limit else None

    def _plain(self, rel_dir: str) -> bool:
        known = self._plain_dirs.get(rel_dir)
        if known is None:
            parent, _, _ = rel_dir.rpartition("/")
            try:
                known = self._plain(parent) and stat.S_ISDIR((self.root / rel_dir).lstat().st_mode)
            except OSError:
                known = False
            self._plain_dirs[rel_dir] = known
        return known


def decode(data: bytes) -> str | None:
    """UTF-8 text without a byte-order mark, or None for binary data."""
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")


def blob_digest(data: bytes) -> str:
    """git's object name for a blob of `data`."""
    sha = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    sha.update(data)
    return sha.hexdigest()


def text_digests(text: str) -> list[str]:
    """Digests `text` has on disk: as UTF-8, and with a byte-order mark."""
    data = text.encode("utf-8", "surrogatepass")
    return [blob_digest(data), blob_digest(b"\xef\xbb\xbf" + data)]
