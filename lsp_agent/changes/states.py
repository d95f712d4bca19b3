"""Where a path's state comes from: git (`GitStates`) or content hashes outside git
(`FileStates`). Both answer one question for the tracker: given what the watcher saw, which
paths may have changed, and what is their state now.

In git, a path's state is its XY code as `git status` would print it and the digest of its
content. A refresh with a few changed paths looks them up in the index and HEAD through one
long-lived `git cat-file` (the index is loaded once per change of the index file, not per call),
hashes them here and asks `git check-ignore` about untracked ones. Mode-only changes are not
seen that way (they change no content the model reads). A full `git status` runs at start,
after HEAD moved without a known commit, when the kernel dropped events, past `MAX_LOOKUPS`
paths, or when nothing is watched.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from lsp_agent.changes import git
from lsp_agent.changes.compare import State
from lsp_agent.changes.content import Files
from lsp_agent.changes.ignore import IgnoreRules, excluded_parts, under_any
from lsp_agent.changes.watch import Events
from lsp_agent.git import run as run_git

MAX_LOOKUPS = 10_000
"""Past this many paths to look at, one full `git status` is cheaper."""
MAX_SCANNED_FILES = 100_000
"""Outside git, at most this many files are known."""
MAX_SCANNED_BYTES = 256 * 1024 * 1024
"""Outside git, at most this many bytes are hashed at start; the other files are known by size
and modification time (rewriting one with the same bytes then counts as a change)."""

Refreshed = tuple[dict[str, State], set[str], bool]
"""The new states of the paths looked at (a path without one is clean or gone), those paths,
and whether everything was compared (a full `git status`, or every file outside git)."""


class GitStates:
    """The states of the paths of one work tree that differ from HEAD, and HEAD itself."""

    def __init__(
        self,
        root: Path,
        repository: git.Repository,
        rules: IgnoreRules,
        log_once: Callable[[str, str], None],
    ) -> None:
        self.root = root
        """The workspace folder (the top level or a folder below it)."""
        self.repository = repository
        """Where git keeps it."""
        inside = root.relative_to(repository.top).as_posix()
        self.prefix = "" if inside == "." else inside + "/"
        """The workspace folder relative to the top level, with a trailing slash (or "")."""
        self.head = git.Head(None, None)
        """HEAD as of the last refresh."""
        self.blobs = git.BlobReader(repository.top)
        """HEAD's version of files, for diffs."""
        self._index = git.IndexReader(repository.top)
        """Index and HEAD blobs by path."""
        self._ignore = git.IgnoreChecker(repository.top)
        """git's verdict on untracked paths."""
        self._rules = rules
        """What is never reported."""
        self._log_once = log_once
        """The tracker's log, once per key."""
        rules.add_exclude_file(repository.common_dir / "info" / "exclude")

    def close(self) -> None:
        """End git's long-lived processes (a worker thread: it waits for them)."""
        for reader in (self._index, self._ignore, self.blobs):
            reader.close()

    async def full(self, previous: dict[str, State]) -> dict[str, State]:
        """HEAD, and every path's state from one full `git status`."""
        self.head = await git.read_head(self.repository)
        return await self._status()

    async def refresh(self, events: Events, full: bool, states: dict[str, State]) -> Refreshed:
        """The paths that may have changed since `states` was taken, and their states now."""
        paths = set(events.paths)
        if events.ignore_files:
            await asyncio.to_thread(self._ignore.restart)
        if events.git or full:
            await asyncio.to_thread(self._index.restart)  # the index may have changed
            head = await git.read_head(self.repository)
            then, now = self.head.commit, head.commit
            if then and now and then != now:
                moved = await git.changed_between(self.repository.top, then, now)
                paths |= {p[len(self.prefix) :] for p in moved if p.startswith(self.prefix)}
            elif then != now:
                full = True
            self.head = head
            paths |= set(states)
        if not full and events.dirs:
            paths |= await self._files_under(events.dirs, events.dropped)
            paths |= {rel for rel in states if under_any(rel, events.dirs)}
        paths = {rel for rel in paths if not excluded_parts(rel)}
        if full or len(paths) > MAX_LOOKUPS:
            new_states = await self._status()
            return new_states, set(states) | set(new_states), True
        if not paths:
            return {}, set(), False
        try:
            new_states, unsure = await asyncio.to_thread(self._look, paths)
        except OSError:
            new_states, unsure = {}, paths
        if unsure:
            new_states.update(await self._status(unsure))
        return new_states, paths, False

    async def changed_between(self, old: str, new: str) -> int:
        """How many files of the workspace folder differ between two commits."""
        names = await git.changed_between(self.repository.top, old, new)
        return len([name for name in names if name.startswith(self.prefix)])

    async def _status(self, paths: Iterable[str] | None = None) -> dict[str, State]:
        """`git status`, of everything or of `paths` only."""
        top = self.repository.top
        filters = await git.filter_settings(top)
        if filters is None:
            # Without the list of drivers to neutralise, a status could run one of them.
            self._log_once("filters", f"lsp-agent: git could not list filter drivers in {top}")
            return {}
        limit = [] if paths is None else ["--", *sorted(self.prefix + rel for rel in paths)]
        # Preloading the index checks every entry with threads: for a few paths, slower.
        preload = f"core.preloadIndex={'true' if paths is None else 'false'}"
        done = await run_git(top, "-c", preload, *git.STATUS_ARGS, *limit, config=filters)
        if done.code != 0:
            self._log_once("status", f"lsp-agent: git status failed in {self.root}")
            return {}
        codes: dict[str, tuple[str, str | None]] = {}
        for record in git.parse_status(done.out):
            rel = record.path[len(self.prefix) :]
            if record.path.startswith(self.prefix) and not excluded_parts(rel):
                codes[rel] = (record.code, record.base_blob)
        return await asyncio.to_thread(self._hash, codes)

    def _hash(self, codes: dict[str, tuple[str, str | None]]) -> dict[str, State]:
        files = Files(self.root)
        return {
            rel: State(code, files.digest(rel), base_blob)
            for rel, (code, base_blob) in codes.items()
        }

    async def _files_under(self, dirs: set[str], dropped: set[str]) -> set[str]:
        """Files below folders that appeared (on disk) or went away (in the index); below the
        `dropped` ones, both (made again since, they may have lost tracked files unseen)."""
        present = {d for d in dirs if (self.root / d).is_dir()}
        gone = (dirs - present) | (dirs & dropped)
        found: set[str] = set()
        if present:
            found.update(await asyncio.to_thread(self._walk, present))
        if gone:
            done = await run_git(
                self.repository.top, "ls-files", "-z", "--", *(self.prefix + d for d in gone)
            )
            for raw in done.out.split(b"\0"):
                path = os.fsdecode(raw)
                if raw and path.startswith(self.prefix):
                    found.add(path[len(self.prefix) :])
        return found

    def _walk(self, dirs: Iterable[str]) -> set[str]:
        return {rel for rel_dir in dirs for rel in self._rules.walk_files(rel_dir)}

    def _look(self, paths: set[str]) -> tuple[dict[str, State], set[str]]:
        """The states of `paths` from the index, HEAD and the files (a worker thread), and the
        paths only `git status` can settle (conflicts)."""
        prefix = self.prefix
        found = self._index.lookup((prefix + rel for rel in paths), self.head.commit)
        files = Files(self.root)
        digests = {rel: files.digests(rel) for rel in paths}
        maybe_untracked = [
            rel
            for rel in paths
            if (entry := found.get(prefix + rel)) is not None
            and entry.staged is None
            and not entry.unmerged
            and digests[rel][0] is not None
        ]
        ignored = self._ignore.ignored(prefix + rel for rel in maybe_untracked)
        states: dict[str, State] = {}
        unsure: set[str] = set()
        for rel in paths:
            entry = found.get(prefix + rel)
            if entry is None or entry.unmerged:
                unsure.add(rel)
                continue
            if not entry.plain:
                continue  # a submodule's: git status leaves them out here too
            digest, lf = digests[rel]
            if entry.staged is None and digest is not None and prefix + rel not in ignored:
                states[rel] = State("??", digest, None)
                continue
            if entry.head is None and entry.staged is None:
                continue
            code = _letter(entry.head, entry.staged) + _worktree_letter(entry.staged, digest, lf)
            if code != "..":
                states[rel] = State(code, digest, entry.head or entry.staged)
        return states, unsure


def _worktree_letter(staged: str | None, digest: str | None, lf: str | None) -> str:
    """The Y of git's XY code: how the file (`digest`, or `lf` with CRLF made LF) differs from
    the index."""
    if staged is None:
        return "."
    if digest is None:
        return "D"
    return "." if staged in (digest, lf) else "M"


def _letter(head: str | None, staged: str | None) -> str:
    """The X of git's XY code: how the index differs from HEAD."""
    if head == staged:
        return "."
    if head is None:
        return "A"
    return "D" if staged is None else "M"


class FileStates:
    """Outside git: every file's content digest (files past `MAX_SCANNED_FILES` are unknown)."""

    head = git.Head(None, None)
    """No HEAD outside git."""
    blobs = None
    """No blobs outside git."""

    def __init__(self, root: Path, rules: IgnoreRules, log_once: Callable[[str, str], None]):
        self.root = root
        """The workspace folder."""
        self._rules = rules
        """What is left out."""
        self._log_once = log_once
        """The tracker's log, once per key."""

    def close(self) -> None:
        """Nothing to end."""

    async def full(self, previous: dict[str, State]) -> dict[str, State]:
        """Every file's state; an unchanged size and time keeps a digest without a read."""
        return await asyncio.to_thread(self._scan, previous)

    async def refresh(self, events: Events, full: bool, states: dict[str, State]) -> Refreshed:
        """The paths that may have changed since `states` was taken, and their states now."""
        if full or events.lost:
            new_states = await self.full(states)
            return new_states, set(states) | set(new_states), True
        new_states = await asyncio.to_thread(self._hash, events.paths, events.dirs)
        affected = set(new_states) | events.paths
        affected |= {rel for rel in states if under_any(rel, events.dirs)}
        return new_states, affected, False

    def _scan(self, previous: dict[str, State]) -> dict[str, State]:
        files = Files(self.root)
        states: dict[str, State] = {}
        budget = MAX_SCANNED_BYTES
        for rel in self._rules.walk_files():
            if len(states) >= MAX_SCANNED_FILES:
                self._log_once(
                    "scan",
                    f"lsp-agent: more than {MAX_SCANNED_FILES} files in {self.root} (not a git "
                    "repository): changes to the others are reported as new files",
                )
                break
            now = files.stamp(rel)
            if now is None:
                continue
            old = previous.get(rel)
            if old is not None and old.stamp == now:
                states[rel] = old
                continue
            digest = files.digest(rel) if budget > 0 else now
            if digest is not None:
                states[rel] = State("", digest, stamp=now)
                budget -= int(now.split(":")[1])
        return states

    def _hash(self, paths: set[str], dirs: set[str]) -> dict[str, State]:
        wanted = set(paths)
        for rel_dir in dirs:
            if (self.root / rel_dir).is_dir():
                wanted.update(self._rules.walk_files(rel_dir))
        files = Files(self.root)
        states: dict[str, State] = {}
        for rel in wanted:
            digest = files.digest(rel)
            if digest is not None:
                states[rel] = State("", digest, stamp=files.stamp(rel))
        return states
