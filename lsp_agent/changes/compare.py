"""From what the tracker knows to the entries of `<file_changes>`: which files changed since a
snapshot, who changed them, renames, unsaved buffers and the diffs.

`entries()` runs in a worker thread on a `Context` copied on the event loop, so it reads no live
state; it reads files (never through a link) and HEAD's blobs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lsp_agent.changes.content import Files, decode, text_digests
from lsp_agent.changes.git import BlobReader
from lsp_agent.changes.note import (
    ADDED,
    AGENT,
    DELETED,
    FORMATTER,
    MODIFIED,
    RENAMED,
    UNSAVED,
    USER,
    FileChangeEntry,
)
from lsp_agent.safety.protected import off_limits
from lsp_agent.text import unified_diff

DIFF_MAX_LINES = 40
"""An entry carries its diff when at most this many lines were added or removed."""
MAX_DIFFS = 20
"""Diffs computed per call at most (the note is bounded anyway)."""
FORMATTER_WINDOW_S = 5.0
"""A whitespace-only change this close to an agent edit or a save of it is the formatter's."""

_WHITESPACE = re.compile(r"\s+")

Mode = Literal["git", "hashes"]


@dataclass(frozen=True)
class State:
    """A path that differs from HEAD (git) or any file (outside git), as last refreshed."""

    code: str
    """git's XY status (`.M`, `A.`, `D.`, `??`, …); empty outside git."""
    digest: str | None
    """git blob hash of the file's bytes (or a size/time stamp when huge); None: no file."""
    base_blob: str | None = None
    """For a tracked path, the blob it had when clean: HEAD's (the index's when HEAD has none)."""
    stamp: str | None = None
    """Outside git: size and modification time when hashed, so an unchanged file is not hashed
    again by a comparison without watcher."""


@dataclass(frozen=True)
class Buffer:
    """An open editor buffer."""

    text: str
    """Its text, as the editor last sent it."""
    version: int | None
    """The editor's version number."""
    changed_at: float
    """`time.monotonic()` of the last change."""


@dataclass(frozen=True)
class Context:
    """What `entries` needs, copied on the loop so the worker thread reads no live state."""

    root: Path
    """The workspace folder."""
    mode: Mode
    """`git` or `hashes`."""
    states: dict[str, State]
    """The current state of each path that matters here."""
    old: dict[str, State | None]
    """Each path changed since the snapshot → its state then (None: clean or absent)."""
    moves: list[tuple[str, str]]
    """File moves the watcher reported since the snapshot."""
    seen: dict[str, frozenset[str]]
    """Digests the agent read or wrote since the snapshot, per path."""
    agent: dict[str, frozenset[str]]
    """Digests of the agent's own landed edits, per path."""
    agent_texts: dict[str, tuple[str, float]]
    """The agent's last landed text of each path, and when."""
    saves: dict[str, float]
    """When the editor last saved each path."""
    event_times: dict[str, float]
    """When the watcher last saw each path change."""
    texts: dict[str, str]
    """The text the agent last read or wrote, per path (bounded cache)."""
    buffers: dict[str, tuple[Buffer, str | None]]
    """Open buffers changed since the snapshot → (buffer, digest of the buffer then or None)."""
    include_agent: bool
    """Whether to keep the agent's own changes."""
    blob_texts: dict[str, str]
    """Texts of blobs read before (blobs never change)."""
    blobs: BlobReader | None
    """Reads HEAD's blobs (git mode)."""


def entries(context: Context) -> tuple[list[FileChangeEntry], dict[str, str]]:
    """The file entries for one baseline, and the blobs read for their diffs."""
    files = Files(context.root)
    found: dict[str, tuple[str, str | None, str | None]] = {}
    """rel → (status, digest now, digest before) for paths whose content or existence changed."""
    for rel, old in context.old.items():
        judged = judge(context, files, rel, old, context.states.get(rel))
        if judged is not None:
            found[rel] = judged
    renames = pair_renames(found, context.moves)
    unsaved = {
        rel: _unsaved(context, files, rel, found.get(rel)) for rel in sorted(context.buffers)
    }
    kept = _kept(context, files, found, renames, unsaved)
    result, fetched = _with_diffs(context, kept)
    for entry in unsaved.values():
        if entry is not None and (entry.source != AGENT or context.include_agent):
            result.append(entry)
    return result, fetched


_Kept = tuple[str, str, str, str | None, str | None]
"""A changed file to report: (rel, status, source, old path, current text)."""


def _kept(
    context: Context,
    files: Files,
    found: dict[str, tuple[str, str | None, str | None]],
    renames: dict[str, str],
    unsaved: dict[str, FileChangeEntry | None],
) -> list[_Kept]:
    """The changed files to report: a rename once (under its new path), not a file whose
    unsaved buffer is reported instead, nor one whose content the agent read or wrote since."""
    kept: list[_Kept] = []
    for rel in sorted(found):
        status, digest_now, _ = found[rel]
        if rel in renames.values():
            continue
        if unsaved.get(rel) is not None:
            continue  # reported as an unsaved buffer: the buffer is what the agent reads
        old_path = renames.get(rel)
        if old_path is not None:
            status = RENAMED
        current = files.read_text(rel) if status in (MODIFIED, ADDED, RENAMED) else None
        source = _source(context, rel, digest_now, current, context.event_times.get(rel))
        if source == AGENT:
            if not context.include_agent:
                continue
        elif digest_now is not None and digest_now in context.seen.get(rel, ()):
            continue  # the agent read this very content since
        kept.append((rel, status, source, old_path, current))
    return kept


def _with_diffs(
    context: Context, kept: list[_Kept]
) -> tuple[list[FileChangeEntry], dict[str, str]]:
    """The entries of the kept files, each with a small diff from the text the agent knew (or
    HEAD's blob) when one is shown; and the blobs read for them."""
    bases: dict[str, str | None] = {}
    for rel, status, _, _, current in kept:
        if current is None or status == RENAMED or len(bases) >= MAX_DIFFS or private(rel):
            continue
        bases[rel] = context.texts.get(rel, "" if status == ADDED else None)
    blobs, fetched = _index_texts(context, [rel for rel, base in bases.items() if base is None])
    result: list[FileChangeEntry] = []
    for rel, status, source, old_path, current in kept:
        base = bases.get(rel)
        before = base if base is not None else blobs.get(rel)
        diff = None
        if current is not None and before is not None:
            diff = small_diff(rel, before, current)
        result.append(FileChangeEntry(rel, status, source, old_path, diff))
    return result, fetched


def judge(
    context: Context, files: Files, rel: str, old: State | None, new: State | None
) -> tuple[str, str | None, str | None] | None:
    """(status, digest now, digest before) when `rel`'s content or existence changed."""
    if context.mode == "hashes":
        before = old.digest if old else None
        now = new.digest if new else None
        if before == now:
            return None
        status = ADDED if before is None else DELETED if now is None else MODIFIED
        return status, now, before
    if new is None:
        # Clean (same as HEAD) or absent now.
        now = files.digest(rel)
        if old is None or old.digest == now:
            return None
        if now is None:
            return (DELETED, None, old.digest) if old.digest is not None else None
        return (ADDED if old.digest is None else MODIFIED), now, old.digest
    if old is None:
        # Clean or absent at the snapshot: git's status now says which.
        if new.digest is None:
            return None if new.code.startswith("A") else (DELETED, None, new.base_blob)
        if new.code == "??" or new.code.startswith("A"):
            return ADDED, new.digest, None
        return MODIFIED, new.digest, new.base_blob
    if old.digest == new.digest:
        return None
    if new.digest is None:
        return DELETED, None, old.digest
    return (ADDED if old.digest is None else MODIFIED), new.digest, old.digest


def pair_renames(
    found: dict[str, tuple[str, str | None, str | None]], moves: Sequence[tuple[str, str]]
) -> dict[str, str]:
    """New path → old path for deletions and additions that are one file moved."""
    deleted = {rel for rel, (status, _, _) in found.items() if status == DELETED}
    added = {rel for rel, (status, _, _) in found.items() if status == ADDED}
    renames: dict[str, str] = {}
    # Same content first: a watcher that pairs moves by inode can join unrelated files, since a
    # file system reuses the inode of a deleted file at once.
    by_digest: dict[str, str] = {}
    for rel in sorted(deleted):
        before = found[rel][2]
        if before is not None:
            by_digest.setdefault(before, rel)
    for rel in sorted(added):
        now = found[rel][1]
        source_rel = by_digest.pop(now, None) if now is not None else None
        if source_rel is not None:
            renames[rel] = source_rel
            deleted.discard(source_rel)
            added.discard(rel)
    # Then moves whose content changed on the way (renamed, then edited).
    for source, target in moves:
        if source in deleted and target in added:
            renames[target] = source
            deleted.discard(source)
            added.discard(target)
    return renames


def _unsaved(
    context: Context, files: Files, rel: str, on_disk: tuple[str, str | None, str | None] | None
) -> FileChangeEntry | None:
    """The entry for an open buffer that differs from the disk and changed since the snapshot.

    Its diff is against what the agent knows of the file: the text it last read, nothing for a
    file new on disk since the snapshot, else the disk's text.
    """
    buffer, before = context.buffers[rel]
    disk = files.read_text(rel)
    if disk is not None and disk == buffer.text:
        return None
    digests = text_digests(buffer.text)
    if before is not None and before in digests:
        return None
    source = _source(context, rel, digests[0], buffer.text, buffer.changed_at)
    if source != AGENT and any(d in context.seen.get(rel, ()) for d in digests):
        return None
    base = context.texts.get(rel)
    if base is None:
        base = "" if disk is None or (on_disk is not None and on_disk[0] == ADDED) else disk
    diff = None if private(rel) else small_diff(rel, base, buffer.text)
    return FileChangeEntry(rel, UNSAVED, source, None, diff)


def private(rel: str) -> bool:
    """Whether `rel` is a path whose content never goes to the model (`.env*`, `.git`, `.venv`,
    credential files):
    it is listed, without its diff."""
    return any(off_limits(part) for part in rel.split("/"))


def _source(
    context: Context, rel: str, digest: str | None, text: str | None, changed_at: float | None
) -> str:
    """`agent` for the agent's own text, `formatter` for whitespace-only changes right after an
    agent edit or its save, else `user`."""
    if digest is not None and digest in context.agent.get(rel, ()):
        return AGENT
    applied = context.agent_texts.get(rel)
    if applied is None or text is None:
        return USER
    agent_text, applied_at = applied
    moments = [applied_at]
    if rel in context.saves:
        moments.append(context.saves[rel])
    when = changed_at if changed_at is not None else time.monotonic()
    close = min(abs(when - moment) for moment in moments) <= FORMATTER_WINDOW_S
    if close and _WHITESPACE.sub("", text) == _WHITESPACE.sub("", agent_text):
        return FORMATTER
    return USER


def small_diff(rel: str, before: str, after: str) -> str | None:
    """The diff hunks (no file header) when at most `DIFF_MAX_LINES` lines changed."""
    diff = unified_diff(rel, before, after)
    if not diff:
        return None
    lines = diff.splitlines()[2:]
    changed = sum(1 for line in lines if line[:1] in "+-")
    if changed > DIFF_MAX_LINES:
        return None
    return "\n".join(lines)


def _index_texts(context: Context, rels: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The text each path had when it was clean at the snapshot (its HEAD blob), for small
    text files; and the blobs that had to be read for it."""
    wanted: dict[str, str] = {}
    for rel in rels:
        state = context.states.get(rel)
        if context.mode != "git" or context.old.get(rel) is not None:
            continue
        if state is None or not state.base_blob:
            continue
        wanted[rel] = state.base_blob
    missing = sorted({blob for blob in wanted.values() if blob not in context.blob_texts})
    fetched: dict[str, str] = {}
    if missing and context.blobs is not None:
        for blob, data in context.blobs.read(missing).items():
            text = decode(data)
            if text is not None:
                fetched[blob] = text
    known = {**context.blob_texts, **fetched}
    texts = {rel: known[blob] for rel, blob in wanted.items() if blob in known}
    return texts, fetched
