"""The change tracker's git: porcelain v2, blobs, the index, ignore rules, HEAD and the branch.

Every git here runs through `lsp_agent/git.py` (a scrubbed environment, options that run
nothing). On top of that: `--no-ext-diff --no-textconv` wherever a diff is made, only plumbing
diffs, and for `status`, which hashes files through their clean filter, the filter drivers that
the repository (not the user's global config) defines are emptied, which git reads as "no
filter". Their names are the repository's to choose (`a=b`, quotes, dots, spaces, any script):
they are read with `git config -z`, and handed back whole through the environment, never
parsed or joined into a `-c` option.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lsp_agent.git import command, environment, run
from lsp_agent.safety.reading import read_small

MAX_BLOB_BYTES = 1024 * 1024
"""Larger blobs are not read (no diff is shown for them)."""


_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_FILTER_PREFIX = b"filter."
_DRIVER_KEYS = {b"clean": "", b"smudge": "", b"process": "", b"required": "false"}
"""What makes a filter driver run something, and the value that makes it run nothing."""
_USERS = (b"global", b"system")
"""Scopes that are the user's own (their `~/.gitconfig`), not the repository's."""


async def filter_settings(cwd: Path) -> list[tuple[str, str]] | None:
    """Settings (key, value) that neutralise every filter driver the repository itself defines;
    None when git could not list them (then `git status` must not run).

    `git status` runs a file through its clean filter when its stat data changed; an empty
    command is "no filter" to git. A driver the user's global config defines keeps the user's
    values, even where the repository redefines some of them; with a git too old to say where a
    setting comes from (before 2.26), every driver is neutralised.
    """
    pattern = r"^filter\."
    done = await run(cwd, "config", "-z", "--show-scope", "--get-regexp", pattern)
    if done.code in (0, 1):  # 1 is "no such setting"
        entries = _scoped_entries(done.out)
    else:  # --show-scope is unknown: every driver counts as the repository's
        unscoped = await run(cwd, "config", "-z", "--get-regexp", pattern)
        if unscoped.code not in (0, 1):
            return None
        entries = [(b"local", key, value) for key, value in _entries(unscoped.out)]
    users: dict[bytes, str] = {}
    planted: set[bytes] = set()
    for scope, key, value in entries:
        name, _, field = key[len(_FILTER_PREFIX) :].rpartition(b".")
        if not key.startswith(_FILTER_PREFIX) or not name or field not in _DRIVER_KEYS:
            continue
        if scope in _USERS:
            users[key] = value
        else:
            planted.add(name)
    settings: list[tuple[str, str]] = []
    for name in sorted(planted):
        for field, neutral in _DRIVER_KEYS.items():
            key = _FILTER_PREFIX + name + b"." + field
            text = key.decode("utf-8", "surrogateescape")
            settings.append((text, users.get(key, neutral)))
    return settings


def _scoped_entries(out: bytes) -> list[tuple[bytes, bytes, str]]:
    """`(scope, key, value)` of `git config -z --show-scope --get-regexp` output: each entry is
    `scope NUL key [LF value] NUL`."""
    fields = out.split(b"\0")
    return [(scope, *_entry(item)) for scope, item in zip(fields[::2], fields[1::2], strict=False)]


def _entries(out: bytes) -> list[tuple[bytes, str]]:
    """`(key, value)` of `git config -z --get-regexp` output (`key [LF value] NUL`)."""
    return [_entry(item) for item in out.split(b"\0") if item]


def _entry(item: bytes) -> tuple[bytes, str]:
    key, _, value = item.partition(b"\n")
    return key, value.decode("utf-8", "surrogateescape")


STATUS_ARGS = (
    "status",
    "--porcelain=v2",
    "-z",
    "--untracked-files=all",
    "--no-renames",
    "--ignore-submodules=all",
)
"""`git status` as the tracker reads it."""


@dataclass(frozen=True)
class StatusRecord:
    """One entry of `git status --porcelain=v2 -z`."""

    kind: str
    """`1` changed, `2` renamed or copied, `u` unmerged, `?` untracked."""
    code: str
    """The XY code (`.M`, `A.`, `D.`, `UU`, …); `??` for untracked."""
    base_blob: str | None
    """HEAD's blob (`hH`), or the index's (`hI`) when HEAD has none; None for `u` and `?`."""
    path: str
    """Relative to the repository's top level, with forward slashes."""


def parse_status(out: bytes) -> Iterator[StatusRecord]:
    """The records of `git status --porcelain=v2 -z` output."""
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        kind = chr(record[0])
        if kind in "12":
            parts = record.split(b" ", 8 if kind == "1" else 9)
            if kind == "2":
                i += 1  # the original path follows in its own field
            blob = _object(parts[6]) or _object(parts[7])
            yield StatusRecord(kind, parts[1].decode(), blob, os.fsdecode(parts[-1]))
        elif kind == "u":
            parts = record.split(b" ", 10)
            yield StatusRecord(kind, parts[1].decode(), None, os.fsdecode(parts[10]))
        elif kind == "?":
            yield StatusRecord(kind, "??", None, os.fsdecode(record[2:]))


def _object(field: bytes) -> str | None:
    """An object name from git, or None for the all-zero "no object"."""
    name = field.decode()
    return None if set(name) == {"0"} else name


@dataclass(frozen=True)
class Repository:
    """Where git keeps a work tree's repository."""

    top: Path
    """The work tree's top folder."""
    git_dir: Path
    """This work tree's git folder (a linked worktree has its own)."""
    common_dir: Path
    """The folder shared by all worktrees: objects, refs, `info/exclude`."""


async def find_repository(root: Path) -> Repository | None:
    """The repository `root` belongs to, or None (not in git, git missing, or refused)."""
    done = await run(root, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    lines = done.out.decode("utf-8", "surrogateescape").splitlines()
    if done.code != 0 or len(lines) < 3:
        return None
    return await asyncio.to_thread(_resolved, root, lines[0], lines[1], lines[2])


def _resolved(root: Path, top: str, git_dir: str, common_dir: str) -> Repository:
    """The repository of git's answer, its folders resolved (reads the file system)."""
    common = Path(common_dir)
    return Repository(
        Path(top).resolve(),
        Path(git_dir).resolve(),
        (common if common.is_absolute() else root / common).resolve(),
    )


async def changed_between(cwd: Path, old: str, new: str) -> set[str]:
    """Paths (relative to the top level) that differ between two commits."""
    done = await run(
        cwd, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--no-ext-diff",
        "--no-textconv", old, new,
    )  # fmt: skip
    if done.code != 0:
        return set()
    return {os.fsdecode(raw) for raw in done.out.split(b"\0") if raw}


@dataclass(frozen=True)
class Head:
    """What is checked out."""

    commit: str | None
    """The commit id; None on an unborn branch."""
    branch: str | None
    """The branch name; None when detached."""

    def describe(self) -> str:
        """The branch, or "(detached at abc1234)"."""
        if self.branch is not None:
            return self.branch
        return f"(detached at {self.commit[:7]})" if self.commit else "(detached)"


async def read_head(repository: Repository) -> Head:
    """HEAD's commit and branch: from the files when they settle it, else from git."""
    quick = _head_from_files(repository.git_dir, repository.common_dir)
    if quick is not None:
        return quick
    commit, branch = await asyncio.gather(
        run(repository.top, "rev-parse", "--verify", "-q", "HEAD"),
        run(repository.top, "symbolic-ref", "-q", "--short", "HEAD"),
    )
    return Head(
        commit.out.decode().strip() if commit.code == 0 else None,
        branch.out.decode("utf-8", "replace").strip() if branch.code == 0 else None,
    )


async def current_branch(root: Path) -> str | None:
    """The checked-out branch of the repository `root` is in, "(detached)", or None outside
    git. Reads `.git/HEAD` (no process) when it can: the reminder asks before every call."""
    head = _cached_head(root)
    if head is not None:
        return head.branch or "(detached)"
    done = await run(root, "rev-parse", "--abbrev-ref", "HEAD")
    if done.code != 0:
        return None
    name = done.out.decode("utf-8", "replace").strip()
    return "(detached)" if name == "HEAD" else name


_GIT_DIRS: dict[Path, tuple[Path, bool]] = {}
"""The git folder found for each root `current_branch` was asked about (walking up from the root
and resolving it cost more than reading HEAD), and whether the root has its own `.git`; dropped
when its HEAD cannot be read."""


def _cached_head(root: Path) -> Head | None:
    """What HEAD says in the git folder of `root`, found once and kept while its HEAD reads."""
    found = _GIT_DIRS.get(root)
    if found is None or (not found[1] and os.path.lexists(root / ".git")):
        # The first time, or a repository made inside the one found above the root.
        git_dir = _find_git_dir(root)
        found = None if git_dir is None else (git_dir, os.path.lexists(root / ".git"))
    head = _head_file(found[0]) if found is not None else None
    if found is not None and head is not None:
        _GIT_DIRS[root] = found
    else:
        _GIT_DIRS.pop(root, None)
    return head


def _find_git_dir(root: Path) -> Path | None:
    """The git folder, found the way git looks for it (up from `root`); a `.git` file names it."""
    try:
        folder = root.resolve()
    except OSError:
        return None
    for candidate in (folder, *folder.parents):
        dotgit = candidate / ".git"
        if dotgit.is_dir():
            return dotgit
        if dotgit.is_file():  # a worktree or submodule: "gitdir: <path>"
            text = _read_small(dotgit)
            if text is None:
                return None
            if not text.startswith("gitdir:"):
                return None
            return (candidate / text[len("gitdir:") :].strip()).resolve()
    return None


def _head_file(git_dir: Path) -> Head | None:
    """What `HEAD` itself says: a detached commit, or a branch (its commit not read yet); None
    when git must be asked (a symbolic ref elsewhere than a branch, a half-written file)."""
    head = _read_small(git_dir / "HEAD")
    if head is None:
        return None
    if _COMMIT.fullmatch(head):
        return Head(head, None)
    if head.startswith("ref: refs/heads/"):
        return Head(None, head[len("ref: refs/heads/") :])
    return None


def _head_from_files(git_dir: Path, common_dir: Path) -> Head | None:
    """HEAD from the files (a loose or packed ref); None when only git can tell (reftable, an
    unreadable ref)."""
    head = _head_file(git_dir)
    if head is None or head.branch is None:
        return head
    ref = f"refs/heads/{head.branch}"
    loose = _read_small(common_dir / ref)
    if loose is not None:
        return Head(loose, head.branch) if _COMMIT.fullmatch(loose) else None
    if (common_dir / ref).exists():
        return None  # there but unreadable
    packed = _read_small(common_dir / "packed-refs", limit=64 * 1024 * 1024)
    if packed is not None:
        for line in packed.splitlines():
            commit, _, name = line.partition(" ")
            if name == ref and _COMMIT.fullmatch(commit):
                return Head(commit, head.branch)
    if (common_dir / "reftable").exists():
        return None
    return head  # an unborn branch


def _read_small(path: Path, limit: int = 4096) -> str | None:
    """A small file of git's, stripped; None when it is missing, not a regular file (a FIFO
    planted as `.git/HEAD` must not hang the tracker), larger than `limit` or not UTF-8."""
    data = read_small(path, limit)
    if data is None:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


class _LongLived:
    """One long-lived git process spoken to over pipes, from worker threads (one at a time).

    Started on first use; a dead or confused process is dropped and the next call starts a new
    one. `restart()` drops it on purpose (what it cached went stale). Requests go in chunks of
    `CHUNK` and each chunk's answers are read before the next is written: both pipes stay
    under their buffer size, so neither side can block the other for ever.
    """

    args: tuple[str, ...] = ()
    """git's arguments."""
    fields = 1
    """NUL- or newline-ended fields in one answer."""
    separator = "\n"
    """What ends a request (git before 2.38 has no `-z` for cat-file: no NUL there)."""
    CHUNK = 128

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        """Where git runs."""
        self._lock = threading.Lock()
        """One exchange at a time."""
        self._process: subprocess.Popen[bytes] | None = None
        """The running git, once started."""

    def restart(self) -> None:
        """Drop the process; the next call starts a fresh one."""
        with self._lock:
            self._close()

    def close(self) -> None:
        """End the process (waits for it)."""
        self.restart()

    def _exchange(self, requests: Sequence[str]) -> list[list[bytes]]:
        """Each request's answer, as its fields (the lock is held by the caller)."""
        answers: list[list[bytes]] = []
        try:
            for start in range(0, len(requests), self.CHUNK):
                chunk = requests[start : start + self.CHUNK]
                process = self._running()
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write("".join(line + self.separator for line in chunk).encode())
                process.stdin.flush()
                for _ in chunk:
                    answers.append([self._field(process.stdout) for _ in range(self.fields)])
        except (OSError, ValueError):
            self._close()
            raise OSError(f"git {self.args[0]} failed") from None
        return answers

    def _field(self, stream: IO[bytes]) -> bytes:
        line = stream.readline()
        if not line:
            raise ValueError("git ended")
        return line.rstrip(b"\n")

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._close()
            self._process = subprocess.Popen(
                command(*self.args),
                cwd=self.cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=environment(),
                start_new_session=sys.platform != "win32",
            )
        return self._process

    def _close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


class BlobReader(_LongLived):
    """`git cat-file --batch`: blob contents for diffs without a process per model call."""

    args = ("cat-file", "--batch")

    def read(self, blobs: Sequence[str]) -> dict[str, bytes]:
        """Blob id → content, for the blobs that exist and are at most `MAX_BLOB_BYTES`."""
        wanted = [blob for blob in blobs if _COMMIT.fullmatch(blob)]
        contents: dict[str, bytes] = {}
        with self._lock:
            try:
                # The ids of a chunk fit in a pipe whatever git answers: written at once.
                for start in range(0, len(wanted), self.CHUNK):
                    chunk = wanted[start : start + self.CHUNK]
                    process = self._running()
                    assert process.stdin is not None and process.stdout is not None
                    process.stdin.write("".join(f"{blob}\n" for blob in chunk).encode())
                    process.stdin.flush()
                    for _ in chunk:
                        header = process.stdout.readline().split()
                        if len(header) != 3:
                            if not header:
                                raise ValueError("git cat-file ended")
                            continue  # "<id> missing"
                        size = int(header[2])
                        data = process.stdout.read(size + 1)[:size]
                        if size <= MAX_BLOB_BYTES:
                            contents[header[0].decode()] = data
            except (OSError, ValueError):
                self._close()
        return contents


@dataclass(frozen=True)
class IndexEntry:
    """What git holds for one path, read from the index and HEAD."""

    staged: str | None
    """The index's blob at stage 0; None when the index has none."""
    head: str | None
    """HEAD's blob; None when HEAD has none (or no HEAD yet)."""
    unmerged: bool
    """The index holds conflict stages for it (a merge in progress)."""
    plain: bool
    """Both are blobs (not a submodule's commit, not a tree)."""


class IndexReader(_LongLived):
    """`git cat-file --batch-check` answering `:0:path` and `<commit>:path`.

    git loads the index once per process and keeps it: a lookup costs microseconds whatever the
    size of the repository, which `git status -- path` cannot do (it reads the whole index
    every time). The caller restarts it whenever the index file changes.
    """

    args = ("cat-file", "--batch-check=%(objectname) %(objecttype)")

    def lookup(self, paths: Iterable[str], head: str | None) -> dict[str, IndexEntry]:
        """Each path (relative to the top level) → what the index and `head` hold for it."""
        listed = [path for path in paths if "\0" not in path and "\n" not in path]
        if not listed:
            return {}
        specs = [f":0:{path}" for path in listed]
        if head:
            specs += [f"{head}:{path}" for path in listed]
        with self._lock:
            answers = [_found(answer[0]) for answer in self._exchange(specs)]
            staged = answers[: len(listed)]
            at_head = answers[len(listed) :] if head else [(None, None)] * len(listed)
            # Conflict stages are asked only of what the index has no plain entry for.
            missing = [path for path, (oid, _) in zip(listed, staged, strict=True) if oid is None]
            stages = [f":{n}:{path}" for path in missing for n in (1, 2, 3)]
            found = [_found(answer[0])[0] for answer in self._exchange(stages)]
        unmerged = {path for n, path in enumerate(missing) if any(found[n * 3 : n * 3 + 3])}
        entries: dict[str, IndexEntry] = {}
        for path, (index_oid, index_kind), (head_oid, head_kind) in zip(
            listed, staged, at_head, strict=True
        ):
            kinds = {kind for kind in (index_kind, head_kind) if kind is not None}
            entries[path] = IndexEntry(index_oid, head_oid, path in unmerged, kinds <= {"blob"})
        return entries


def _found(answer: bytes) -> tuple[str | None, str | None]:
    """(object id, type) from a `--batch-check` answer; (None, None) for "missing"."""
    parts = answer.decode("utf-8", "surrogateescape").rsplit(" ", 1)
    if len(parts) != 2 or parts[1] in ("missing", "ambiguous") or not _COMMIT.fullmatch(parts[0]):
        return None, None
    return parts[0], parts[1]


class IgnoreChecker(_LongLived):
    """`git check-ignore --stdin`: git's own verdict on untracked paths (`.gitignore` files,
    `info/exclude`, the user's global excludes). Restart it when an ignore file changes."""

    args = ("check-ignore", "--stdin", "-z", "-v", "-n", "--no-index")
    fields = 4  # source, line number, pattern, path
    separator = "\0"

    def ignored(self, paths: Iterable[str]) -> set[str]:
        """The paths (relative to the top level) git ignores."""
        listed = [path for path in paths if "\0" not in path]
        if not listed:
            return set()
        with self._lock:
            answers = self._exchange(listed)
        return {
            path
            for path, (source, _, pattern, _) in zip(listed, answers, strict=True)
            if source and not pattern.startswith(b"!")
        }

    def _field(self, stream: IO[bytes]) -> bytes:
        data = bytearray()
        while (byte := stream.read(1)) != b"\0":
            if not byte:
                raise ValueError("git check-ignore ended")
            data += byte
        return bytes(data)
