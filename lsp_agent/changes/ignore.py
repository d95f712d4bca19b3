"""What the tracker never watches nor reports: tool folders, virtualenvs, and what the ignore
files exclude (`.gitignore`, `.git/info/exclude`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pathspec

from lsp_agent.safety.reading import CONFIG_BYTES, read_small

EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
    }
)
"""Directories never watched nor reported, whatever `.gitignore` says."""


def excluded_parts(rel: str) -> bool:
    """Whether `rel` lies in one of `EXCLUDED_DIRS`."""
    return any(part in EXCLUDED_DIRS for part in rel.split("/"))


def under_any(rel: str, dirs: Iterable[str]) -> bool:
    """Whether `rel` is one of `dirs` or below one."""
    return any(rel == d or rel.startswith(d + "/") for d in dirs)


class IgnoreRules:
    """What the tracker never watches nor reports: `EXCLUDED_DIRS`, virtualenvs (a folder with a
    `pyvenv.cfg`), and `.gitignore` files (each below its folder) with `.git/info/exclude`.

    Read lazily, folder by folder, and re-read when a `.gitignore` changes. In a git repository
    git has the last word on what is ignored; these rules keep watches and events off the rest.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        """The workspace folder."""
        self._top = str(root)
        """The same, as text: the walk asks of every folder, and `pathlib` would cost half of
        the walk's time."""
        self._lock = threading.Lock()
        """Watchdog's threads and the loop both ask."""
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        """Folder → its `.gitignore`, parsed (None: it has none)."""
        self._dirs: dict[str, bool] = {}
        """Folder → ignored, memoised."""
        self._exclude: pathspec.GitIgnoreSpec | None = None
        """`.git/info/exclude`."""
        self._venvs: frozenset[str] = frozenset()
        """Virtualenv folders found so far."""

    def add_exclude_file(self, path: Path) -> None:
        """Honour a repository's `info/exclude`."""
        with self._lock:
            self._exclude = _read_spec(path)
            self._dirs.clear()

    def reload(self, rel_dir: str) -> None:
        """The `.gitignore` of `rel_dir` changed."""
        with self._lock:
            self._specs.pop(rel_dir, None)
            self._dirs.clear()

    def skip_dir(self, rel: str) -> bool:
        """Whether the folder `rel` is neither watched nor walked."""
        name = rel.rpartition("/")[2]
        if name in EXCLUDED_DIRS:
            return True
        if os.path.isfile(os.path.join(self._top, rel, "pyvenv.cfg")):
            with self._lock:
                self._venvs |= {rel}
            return True
        return self.ignored(rel, is_dir=True)

    def excluded(self, rel: str, is_dir: bool) -> bool:
        """Whether `rel` is left out of the tracker's view."""
        if excluded_parts(rel):
            return True
        venvs = self._venvs
        if venvs and under_any(rel, venvs):
            return True
        return self.ignored(rel, is_dir=is_dir)

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        """What the ignore files say of `rel`."""
        with self._lock:
            parts = rel.split("/")
            for depth in range(1, len(parts)):
                if self._dir_ignored("/".join(parts[:depth])):
                    return True
            return self._dir_ignored(rel) if is_dir else self._match(rel, is_dir=False)

    def walk_files(self, rel_dir: str = "") -> Iterator[str]:
        """Every file below `rel_dir` that is not left out (links are not followed)."""
        start = self.root / rel_dir if rel_dir else self.root
        for top, dirnames, filenames in os.walk(start):
            top_rel = Path(top).relative_to(self.root).as_posix()
            top_rel = "" if top_rel == "." else top_rel
            dirnames[:] = [
                name for name in dirnames if not self.skip_dir(f"{top_rel}/{name}".lstrip("/"))
            ]
            for name in filenames:
                rel = f"{top_rel}/{name}" if top_rel else name
                if not self.excluded(rel, is_dir=False):
                    yield rel

    def _dir_ignored(self, rel: str) -> bool:
        known = self._dirs.get(rel)
        if known is None:
            known = self._dirs[rel] = self._match(rel, is_dir=True)
        return known

    def _match(self, rel: str, *, is_dir: bool) -> bool:
        suffix = "/" if is_dir else ""
        result: bool | None = None
        if self._exclude is not None:
            result = self._exclude.check_file(rel + suffix).include
        parts = rel.split("/")
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            spec = self._spec(folder)
            if spec is None:
                continue
            verdict = spec.check_file("/".join(parts[depth:]) + suffix).include
            if verdict is not None:
                result = verdict
        return bool(result)

    def _spec(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            self._specs[folder] = _read_spec(os.path.join(self._top, folder, ".gitignore"))
        return self._specs[folder]


def _read_spec(path: str | Path) -> pathspec.GitIgnoreSpec | None:
    """An ignore file's rules; None when it is missing, empty, or not a regular file of a sane
    size (a repository may plant a FIFO or a link to `/dev/zero` as its `.gitignore`)."""
    data = read_small(Path(path), CONFIG_BYTES)
    if data is None:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
