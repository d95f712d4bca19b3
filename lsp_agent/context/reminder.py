"""The reminder: a user message appended to each request, never stored.

It carries what changes between requests so the system prompt and the stored history stay
byte-identical from one request to the next (the prefix cache hits): `<context>` (time, git
branch, workspace root), `<todos>` when the model keeps a plan, and `<file_changes>` listing files
someone else changed since the agent's last turn, with the instruction to read them again.

The file changes come from the change tracker when the loop has one; `GitStatusChanges` is the
fallback: a `git status` snapshot at the end of each turn, compared with the tree once at the
first request of the next turn (edits the agent makes during its own turn are not someone
else's, so the comparison is not repeated mid-turn).

Cheap by design, since it runs before every model call: the branch is read from `.git/HEAD`
(git itself is asked only for what that file does not settle), and `git status` runs once a turn.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePath
from typing import Protocol

from lsp_agent.tools.todo import TodoItem, render_plan

CHANGE_STATUSES = ("modified", "added", "deleted", "renamed", "modified in editor, unsaved")
"""The statuses `<file_changes>` uses (DESIGN §5)."""

MAX_LISTED_CHANGES = 50
"""More changed files than this are counted, not listed."""

_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


class ChangeEntry(Protocol):
    """One changed file, as the change tracker (or `GitStatusChanges`) reports it."""

    @property
    def path(self) -> str | PurePath:
        """The file, relative to the workspace root or absolute inside it."""
        ...

    @property
    def status(self) -> str:
        """One of `CHANGE_STATUSES`."""
        ...


class FileChangeSource(Protocol):
    """Where a session's `<file_changes>` come from: the change tracker or `GitStatusChanges`."""

    async def snapshot(self) -> None:
        """The agent's turn ended: later changes are someone else's."""
        ...

    async def changes(self) -> Sequence[ChangeEntry] | str:
        """What changed since the snapshot: entries, or the rendered block."""
        ...


@dataclass(frozen=True)
class ChangedFile:
    """A file someone else changed since the agent's last turn."""

    path: str
    """Relative to the workspace root, with forward slashes."""
    status: str
    """One of `CHANGE_STATUSES`."""
    old_path: str | None = None
    """For a rename: the path it had."""


async def git_branch(root: Path) -> str | None:
    """The checked-out branch, "(detached)", or None outside a git repository."""
    quick = _branch_from_head(root)
    if quick is not None:
        return quick
    out = await _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    if out is None:
        return None
    name = out.decode("utf-8", "replace").strip()
    return "(detached)" if name == "HEAD" else name


def render(
    root: Path,
    branch: str | None,
    now: datetime | None = None,
    *,
    todos: Sequence[TodoItem] = (),
    file_changes: Sequence[ChangeEntry] | str = (),
    notes: Sequence[str] = (),
) -> str:
    """The reminder text. Minute resolution: finer would only churn the tail of the request.

    `file_changes` is a list of entries, or the whole `<file_changes>` block already rendered
    (the change tracker's `render_file_changes`); empty means nothing to report. `notes` are
    lines for `<context>` (e.g. that AGENTS.md changed).
    """
    moment = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M %Z").strip()
    lines = [
        "<context>",
        f"time: {moment}",
        f"git branch: {branch}" if branch else "git: not a git repository",
        f"workspace root: {root}",
        *notes,
        "</context>",
    ]
    if todos:
        lines += ["<todos>", render_plan(todos), "</todos>"]
    if isinstance(file_changes, str):
        if file_changes.strip():
            lines.append(file_changes.strip())
    elif file_changes:
        lines += [
            "<file_changes>",
            "These files were changed by someone else since your last turn. "
            "Read them again before editing them:",
        ]
        shown = file_changes[:MAX_LISTED_CHANGES]
        lines += [_change_line(root, change) for change in shown]
        if len(file_changes) > len(shown):
            lines.append(f"… and {len(file_changes) - len(shown)} more")
        lines.append("</file_changes>")
    return "\n".join(lines)


async def reminder_message(
    root: Path,
    *,
    todos: Sequence[TodoItem] = (),
    file_changes: Sequence[ChangeEntry] | str = (),
    notes: Sequence[str] = (),
    now: datetime | None = None,
) -> dict[str, str]:
    """The user message that ends every request (see `render` for the arguments)."""
    branch = await git_branch(root)
    text = render(root, branch, now, todos=todos, file_changes=file_changes, notes=notes)
    return {"role": "user", "content": text}


class GitStatusChanges:
    """`<file_changes>` from `git status` snapshots, for a loop without a change tracker (the
    terminal's `lsp-agent run`, where nobody edits during the one turn).

    Call `snapshot()` when a turn ends (whatever its status) and `changes()` before each model
    call: the first call after a snapshot compares the tree with it, later calls return the
    same list until the next snapshot. A file counts as changed when its status, size or
    modification time differs; a commit or `git add` alone changes nothing that is reported.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        """The workspace root; only changes under it are reported, relative to it."""
        self._top: Path | None = None
        self._snapshot: dict[str, _Seen] | None = None
        self._changes: list[ChangedFile] | None = None

    async def snapshot(self) -> None:
        """Remember the tree as the agent leaves it at the end of a turn."""
        self._snapshot = await self._status()
        self._changes = None

    async def changes(self) -> list[ChangedFile]:
        """Files changed since the last snapshot, by someone else; empty before any snapshot."""
        if self._snapshot is None:
            return []
        if self._changes is None:
            current = await self._status()
            if current is None or self._top is None:
                self._changes = []
            else:
                gone = [path for path in self._snapshot if path not in current]
                stats = await asyncio.to_thread(_stat_paths, self._top, gone)
                found = _compare(self._snapshot, current, stats)
                self._changes = [self._relative(change) for change in found]
        return self._changes

    async def _status(self) -> dict[str, _Seen] | None:
        """Every path under the root that git reports as not clean; None outside a repository."""
        if self._top is None:
            self._top = await _toplevel(self.root)
            if self._top is None:
                return None
        out = await _git(
            self.root,
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=dirty",
            "--",
            ".",
        )
        if out is None:
            return None
        entries = _parse_porcelain(out)
        stats = await asyncio.to_thread(_stat_paths, self._top, [path for _, path, _ in entries])
        return {path: _Seen(code, stats[path], previous) for code, path, previous in entries}

    def _relative(self, change: ChangedFile) -> ChangedFile:
        assert self._top is not None
        old_path = change.old_path
        if old_path is not None:
            old_path = _under(self._top, self.root, old_path)
        return ChangedFile(_under(self._top, self.root, change.path), change.status, old_path)


@dataclass(frozen=True)
class _Seen:
    """A path in `git status`: its two-letter code and what `stat` said about it."""

    code: str
    stat: tuple[int, int] | None
    """(size, mtime in ns); None when the file does not exist."""
    previous: str | None = None
    """For a rename, the old path."""


async def _git(root: Path, *args: str) -> bytes | None:
    """The output of a git command run in `root`; None when it fails or git is missing."""
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            str(root),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            stdin=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    out, _ = await process.communicate()
    return out if process.returncode == 0 else None


async def _toplevel(root: Path) -> Path | None:
    """The repository's top folder: porcelain paths are relative to it."""
    out = await _git(root, "rev-parse", "--show-toplevel")
    if out is None:
        return None
    return Path(out.decode("utf-8", "surrogateescape").strip())


def _parse_porcelain(out: bytes) -> list[tuple[str, str, str | None]]:
    """`(code, path, previous path)` from `git status --porcelain=v1 -z` output."""
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    entries: list[tuple[str, str, str | None]] = []
    index = 0
    while index < len(fields):
        field = fields[index]
        index += 1
        if len(field) < 4:
            continue
        code, path = field[:2], field[3:]
        previous = None
        if "R" in code or "C" in code:
            previous = fields[index] if index < len(fields) else None
            index += 1
        entries.append((code, path, previous))
    return entries


def _stat_paths(top: Path, paths: Sequence[str]) -> dict[str, tuple[int, int] | None]:
    stats: dict[str, tuple[int, int] | None] = {}
    for path in paths:
        try:
            info = os.stat(top / path)
            stats[path] = (info.st_size, info.st_mtime_ns)
        except OSError:
            stats[path] = None
    return stats


def _compare(
    before: dict[str, _Seen],
    after: dict[str, _Seen],
    gone: dict[str, tuple[int, int] | None],
) -> list[ChangedFile]:
    """What changed between two snapshots; `gone` has the current stat of paths git no longer
    lists (clean again: reverted, committed, or an untracked file removed)."""
    changes: list[ChangedFile] = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if new is None:
            assert old is not None
            now = gone.get(path)
            if now == old.stat:
                continue  # committed or staged: the content is what it was
            changes.append(ChangedFile(path, "deleted" if now is None else "modified"))
            continue
        if old is not None and old.stat == new.stat and _kind(old.code) == _kind(new.code):
            continue
        status = _kind(new.code)
        if status == "renamed" and new.previous:
            changes.append(ChangedFile(path, status, old_path=new.previous))
        else:
            changes.append(ChangedFile(path, status))
    return changes


def _kind(code: str) -> str:
    """The `<file_changes>` status for a porcelain XY code."""
    if "R" in code:
        return "renamed"
    if "D" in code:
        return "deleted"
    if code == "??" or "A" in code:
        return "added"
    return "modified"


def _change_line(root: Path, change: ChangeEntry) -> str:
    detail = getattr(change, "detail", None)
    if not str(change.path) and isinstance(detail, str):
        return f"- {detail}"  # a line about the whole tree (the branch changed)
    line = f"- {change.status}: {_display(root, change.path)}"
    old_path = getattr(change, "old_path", None)
    if isinstance(old_path, (str, PurePath)):
        line += f" (was {_display(root, old_path)})"
    return line


def _under(top: Path, root: Path, path: str) -> str:
    """A path git reported (relative to the repository's top) relative to the workspace root."""
    try:
        return (top / path).relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return path


def _display(root: Path, path: str | PurePath) -> str:
    candidate = PurePath(path)
    if candidate.is_absolute():
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            return str(candidate)
    return candidate.as_posix() if isinstance(path, PurePath) else path


def _git_dir(root: Path) -> Path | None:
    """The repository's git folder, found the way git looks for it (up from `root`)."""
    try:
        folder = root.resolve()
    except OSError:
        return None
    for candidate in (folder, *folder.parents):
        dotgit = candidate / ".git"
        if dotgit.is_dir():
            return dotgit
        if dotgit.is_file():  # a worktree or submodule: "gitdir: <path>"
            try:
                text = dotgit.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            return (candidate / text[len("gitdir:") :].strip()).resolve()
    return None


def _branch_from_head(root: Path) -> str | None:
    """The branch named by `.git/HEAD`, "(detached)", or None when git must be asked."""
    if "GIT_DIR" in os.environ:
        return None  # git would look elsewhere: let it
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if head.startswith("ref: refs/heads/"):
        return head[len("ref: refs/heads/") :]
    if _COMMIT.fullmatch(head):
        return "(detached)"
    return None
