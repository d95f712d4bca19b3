"""How the server reads a file of the workspace by itself (AGENTS.md, skills, ignore files, the
configuration files the permission checks look at, git's own small files).

Such a file is whatever the repository made it: a symlink to `/proc/self/environ` or to a key
outside, a FIFO that never ends an `open()`, a link to `/dev/zero`, 400 MB. `read_confined`
reads it only when it is a regular file that resolves inside the folder it is confined to:

- the path is resolved with its symlinks, and must stay inside the folder (a link from one file
  of the workspace to another is fine: `CLAUDE.md → AGENTS.md`);
- the resolved path is then opened from the folder down, one component at a time, none of them
  followed if it is a symlink (`O_NOFOLLOW`): a link swapped in after the check is refused, not
  followed;
- the open does not wait (`O_NONBLOCK`: a FIFO without a writer opens at once) and `fstat` on
  the open descriptor must say "regular file" (not a FIFO, socket or device);
- at most `limit` bytes are read, whatever the size says; `Read.cut` tells whether there was
  more.

A refusal is a `Refused` carrying one sentence for the log (or for the user, for AGENTS.md).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from lsp_agent.safety.symlinks import resolved

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

CONFIG_BYTES = 1024 * 1024
"""What the permission checks read of a configuration or ignore file (`pyproject.toml`,
`.gitignore`): more than any real one holds."""


class Refused(Exception):
    """The file was not read; the message says why in one sentence."""


@dataclass(frozen=True)
class Read:
    """What was read of a file."""

    data: bytes
    """At most the limit asked for."""
    cut: bool
    """The file held more than that."""
    path: Path
    """Where it really is (its symlinks followed)."""


def read_confined(folder: Path, path: Path, limit: int, *, name: str | None = None) -> Read:
    """The first `limit` bytes of `path`, a regular file inside `folder` once its symlinks are
    followed; raises `FileNotFoundError` when there is no such file, `Refused` otherwise.

    `name` is how a refusal names the file (default: its path relative to `folder`).
    """
    top = Path(os.path.abspath(folder))
    shown = name or _shown(top, path)
    try:
        real_top = resolved(top)
        target = resolved(Path(os.path.abspath(path)))
    except (OSError, RuntimeError, ValueError):
        raise Refused(f"{shown} is a symlink loop: not read") from None
    if target != real_top and not target.is_relative_to(real_top):
        if os.path.lexists(path):
            raise Refused(f"{shown} links outside the workspace: not read")
        raise FileNotFoundError(str(path))
    if target == real_top:
        raise Refused(f"{shown} is the workspace folder itself: not read")
    parts = target.relative_to(real_top).parts
    return _read_below(real_top, parts, limit, shown, target)


def read_regular(path: Path, limit: int) -> Read:
    """The first `limit` bytes of `path` when it is a regular file (symlinks followed: for the
    user's own files, such as `~/.agents/AGENTS.md`); `FileNotFoundError` or `Refused`."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise Refused(f"{path} cannot be opened ({error.strerror or error}): not read") from None
    return _take(fd, limit, str(path), Path(path))


def read_small(path: Path, limit: int) -> bytes | None:
    """`read_regular`'s bytes, or None when the file is missing, refused or larger than `limit`
    (git's own small files: `.git`, `commondir`, a config, the index)."""
    with contextlib.suppress(OSError, Refused):
        found = read_regular(path, limit)
        return None if found.cut else found.data
    return None


def _read_below(top: Path, parts: tuple[str, ...], limit: int, shown: str, where: Path) -> Read:
    """Open `top/parts…` one component at a time, following no symlink, and read it."""
    try:
        current = os.open(top, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as error:
        why = error.strerror or error
        raise Refused(f"{shown}: its folder cannot be opened ({why}): not read") from None
    try:
        for part in parts[:-1]:
            try:
                following = os.open(
                    part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=current
                )
            except FileNotFoundError:
                raise
            except OSError:
                raise Refused(
                    f"{shown} changed while it was read (a folder became a link): not read"
                ) from None
            os.close(current)
            current = following
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=current)
        except FileNotFoundError:
            raise
        except OSError as error:
            why = error.strerror or error
            raise Refused(f"{shown} cannot be opened ({why}): not read") from None
    finally:
        os.close(current)
    return _take(fd, limit, shown, where)


def _take(fd: int, limit: int, shown: str, where: Path) -> Read:
    """Read at most `limit` bytes of the open `fd` when it is a regular file; closes it."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _kind(info.st_mode)
            raise Refused(f"{shown} is {kind}, not a regular file: not read")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as error:
        raise Refused(f"{shown} cannot be read ({error.strerror or error}): not read") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return Read(data[:limit], len(data) > limit, where)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


def _shown(top: Path, path: Path) -> str:
    absolute = Path(os.path.abspath(path))
    if absolute.is_relative_to(top):
        return absolute.relative_to(top).as_posix()
    return str(path)
