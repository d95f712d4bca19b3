"""Following symlinks the same way on every Python the project supports.

`Path.resolve(strict=False)` raises `RuntimeError` for a symlink loop up to Python 3.12; from 3.13
on it returns the path with the looping link left in it, and code that took the result for a
symlink-free path (where a file really leads) would judge the link's own name instead. The walls
call `resolved`, which refuses a loop on every version. The kernel refuses to follow a loop too
(ELOOP), so refusing it early loses nothing.
"""

from __future__ import annotations

from pathlib import Path


def resolved(path: Path) -> Path:
    """`path` absolute with every symlink followed (it need not exist); `RuntimeError` for a
    symlink loop, `OSError` when the file system cannot be asked."""
    result = path.resolve(strict=False)  # RuntimeError for a loop before Python 3.13
    for part in (result, *result.parents):
        if part.is_symlink():  # 3.13 and later: a link the resolution could not get through
            raise RuntimeError(f"Symlink loop from {str(path)!r}")
    return result
