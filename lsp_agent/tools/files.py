"""The read-only tools: `read_file` formatting, `search` and `list_files` through ripgrep.

`search` and `list_files` run the `rg` binary that the `ripgrep` package installs next to the
Python interpreter. Both respect `.gitignore` (in git repositories and plain folders alike),
search dotfiles such as `.github/`, and never look inside `.git`, virtualenvs, `node_modules` or
`.env*` files. Output is bounded: past the cap the result says how much was left out and how to
narrow the request, and ripgrep is stopped once the count is far past the cap.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import pathspec

from lsp_agent.errors import ToolError
from lsp_agent.tools.workspace import Workspace

READ_LIMIT = 200
"""Lines per `read_file` page by default."""
READ_LINE_CHARS = 2000
"""A longer line is cut in `read_file` output."""
MATCH_LINE_CHARS = 300
"""A longer matched line is cut in `search` output, around the match."""
COUNT_LIMIT = 10_000
"""Past the cap, results are counted up to this many more; then ripgrep is stopped."""
RG_TIMEOUT = 60.0
"""Seconds a search or listing may take before ripgrep is stopped."""

EXCLUDED_GLOBS = ("!.git", "!.venv", "!venv", "!node_modules", "!.env*")
"""Never searched or listed, whatever `.gitignore` says (ripgrep `--glob` syntax)."""
_EXCLUDED_NOTE = ".gitignored files, .git, .venv, venv, node_modules and .env* are skipped"
_READ_ERRORS_SHOWN = 3
_STDERR_KEEP = 16 * 1024
_CHUNK = 256 * 1024
_MATCH_PREFIX = b'{"type":"match"'


def content_hash(text: str) -> str:
    """The SHA-256 hex digest of `text` encoded as UTF-8: what "the file as read" means."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def format_read(rel: str, text: str, start: int = 1, limit: int = READ_LIMIT) -> str:
    """One page of `text` as numbered lines (`cat -n` style), for the model.

    `start` is 1-based (0 is taken as 1); at most `limit` lines are shown. The first line says
    which lines these are (`lines a–b of N`); when more remain, the last line says which
    `start` continues. Lines are split on `\\n` and a CRLF file's `\\r` is not shown; lines
    longer than `READ_LINE_CHARS` are cut with a marker. A `start` past the end is a ToolError
    that says how many lines there are.
    """
    if limit < 1:
        raise ToolError(f"limit must be at least 1 (got {limit}); the default is {READ_LIMIT}")
    if text == "":
        return f"{rel}: empty file (0 lines)"
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    total = len(lines)
    if start == 0:
        start = 1
    if start < 1 or start > total:
        raise ToolError(
            f"start={start} is outside {rel}, which has {total} line{_s(total)}; use a start "
            f"from 1 to {total}",
            reason="range",
        )
    end = min(start + limit - 1, total)
    out = [f"{rel}: lines {start}–{end} of {total}"]
    for number in range(start, end + 1):
        line = lines[number - 1]
        if line.endswith("\r"):
            line = line[:-1]
        if len(line) > READ_LINE_CHARS:
            line = (
                f"{line[:READ_LINE_CHARS]}… [line cut: {len(line)} chars, "
                f"first {READ_LINE_CHARS} shown]"
            )
        out.append(f"{number:>6}\t{line}")
    if end < total:
        out.append(
            f"… {total - end} more line{_s(total - end)}; call read_file with start={end + 1} "
            "to continue"
        )
    return "\n".join(out)


def find_rg() -> str:
    """The path of the `rg` binary: next to the Python interpreter first, then on PATH.

    The `ripgrep` wheel puts `rg` in the environment's scripts directory, beside
    `sys.executable`; the server may be launched without that directory on PATH.
    """
    name = "rg.exe" if os.name == "nt" else "rg"
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("rg")
    if found is not None:
        return found
    raise ToolError(
        "ripgrep (rg) is not installed, so search and list_files cannot run; tell the user to "
        "install the `ripgrep` package in lsp-agent's environment (pip install ripgrep), and "
        "meanwhile use bash with grep or find",
        reason="missing_tool",
    )


def search_argv(rg: str, pattern: str, targets: Sequence[str], glob: str | None) -> list[str]:
    """The ripgrep command `search()` runs, from the workspace root, for `targets` (relative)."""
    return [rg, "--json", *_common_flags(glob), "--regexp", pattern, "--", *targets]


def list_argv(rg: str, target: str, glob: str | None) -> list[str]:
    """The ripgrep command `list_files()` runs, from the workspace root, for `target`."""
    # Sorted traversal makes the first page stable, and lets us stop early on a huge tree.
    return [rg, "--files", "--sort", "path", *_common_flags(glob), "--", target]


async def search(
    ws: Workspace,
    pattern: str,
    path: str = "",
    glob: str | None = None,
    *,
    max_matches: int = 50,
    timeout: float = RG_TIMEOUT,
) -> str:
    """Matches of the regex `pattern` under `path`, one `path:line:text` per line.

    Regex syntax is ripgrep's (Rust `regex`), matched line by line. `path` is a file or folder
    (the workspace root when empty), resolved through `Workspace.resolve`; `glob` keeps only
    files matching it (e.g. `*.py`, or `src/**/*.ts` relative to the root). `.gitignore` is
    respected even outside a git repository, and `.git`, `.venv`, `venv`, `node_modules` and
    `.env*` are never searched; other dotfiles are. The first line of the result says how many
    matches there are; at most `max_matches` follow, sorted by path and line, then a note
    saying how many were left out. Long lines are cut around the match. No match is a plain
    result, not an error; an invalid regex or glob is a ToolError quoting ripgrep; ripgrep is
    stopped after `timeout` seconds.

    Limitation: files are searched as saved on disk. Unsaved changes in editor buffers are not
    seen (read_file does see them), and a file that exists only in a buffer is not found.
    """
    if pattern == "":
        raise ToolError("empty search pattern: give a regex such as 'def main' or 'TODO'")
    target, rel = _target(ws, path)
    scope = _scope(rel, glob)
    if not target.is_dir() and not _glob_matches(rel, glob):
        return f"no matches for {pattern!r} in {scope}: the file does not match the glob"
    kept, scan = await _matches(ws, pattern, [_rg_path(rel)], glob, max_matches, timeout)
    if scan.found == 0:
        if scan.stopped:
            raise ToolError(
                f"{scan.stopped} with no match for {pattern!r} in {scope}; search a smaller "
                "path or use a glob",
                reason="timeout",
            )
        return f"no matches for {pattern!r} in {scope} ({_EXCLUDED_NOTE})" + _read_errors(
            scan.errors
        )
    kept.sort(key=lambda match: (match[0], match[1]))
    lines = [f"{file}:{number}:{text}" for file, number, text in kept]
    return _bounded(
        "match",
        "matches",
        f"for {pattern!r} in {scope}",
        lines,
        scan,
        "the pattern or path (or use glob)",
    )


async def matches(
    ws: Workspace,
    pattern: str,
    *,
    paths: Sequence[str] = (),
    max_matches: int,
    timeout: float = RG_TIMEOUT,
) -> list[tuple[str, int, str]]:
    """The first `max_matches` matches of `pattern` in `paths` (relative to the root; the whole
    workspace when empty), as (path, line, text) sorted by path and line, with `search()`'s
    exclusions. An invalid pattern is a ToolError quoting ripgrep."""
    targets = [_rg_path(rel) for rel in paths] or ["."]
    kept, _ = await _matches(ws, pattern, targets, None, max_matches, timeout, counted=1)
    kept.sort(key=lambda match: (match[0], match[1]))
    return kept


async def files_matching(
    ws: Workspace, pattern: str, *, max_files: int, timeout: float = RG_TIMEOUT
) -> tuple[list[str], bool]:
    """The files of the workspace with a line matching `pattern` (relative, sorted; at most
    `max_files`), with `search()`'s exclusions, and whether more were left out."""
    kept: list[str] = []

    def take(line: bytes) -> None:
        if len(kept) < max_files:
            kept.append(_relative_output(line.decode("utf-8", "replace")))

    argv = [find_rg(), "--files-with-matches", *_common_flags(None), "--regexp", pattern, "--", "."]
    scan = await _scan(argv, ws.root, take, select=b"", limit=max_files + 1, timeout=timeout)
    if scan.failed and scan.found == 0:
        raise _rg_failure(scan.errors, pattern, None)
    return sorted(kept), scan.found > max_files or bool(scan.stopped)


async def _matches(
    ws: Workspace,
    pattern: str,
    targets: Sequence[str],
    glob: str | None,
    max_matches: int,
    timeout: float,
    *,
    counted: int | None = None,
) -> tuple[list[tuple[str, int, str]], _Scan]:
    """The first `max_matches` matches in `targets`; past them ripgrep is stopped after
    `counted` more (`COUNT_LIMIT` by default: how many there are, for `search()`'s count)."""
    kept: list[tuple[str, int, str]] = []

    def take(line: bytes) -> None:
        if len(kept) < max_matches:
            kept.append(_parse_match(line))

    scan = await _scan(
        search_argv(find_rg(), pattern, targets, glob),
        ws.root,
        take,
        select=_MATCH_PREFIX,
        limit=max_matches + (COUNT_LIMIT if counted is None else counted),
        timeout=timeout,
    )
    if scan.failed and scan.found == 0:
        raise _rg_failure(scan.errors, pattern, glob)
    return kept, scan


async def list_files(
    ws: Workspace,
    path: str = "",
    glob: str | None = None,
    *,
    max_entries: int = 200,
    timeout: float = RG_TIMEOUT,
) -> str:
    """The files under `path` (the workspace root when empty), sorted, one relative path a line.

    The same exclusions as `search()` apply (`.gitignore`, `.git`, virtualenvs, `node_modules`,
    `.env*`); folders show through the files they hold, so empty folders are not listed. The
    first line says how many files there are; at most `max_entries` follow, then a note saying
    how many were left out. A file path gives that file; a missing path is a ToolError.
    """
    target, rel = _target(ws, path)
    if not target.is_dir():
        if not _glob_matches(rel, glob):
            return f"no files in {_scope(rel, glob)}: the file does not match the glob"
        return f"1 file:\n{rel}"
    scope = _scope(rel, glob)
    kept: list[str] = []

    def take(line: bytes) -> None:
        if len(kept) < max_entries:
            kept.append(_relative_output(line.decode("utf-8", "replace")))

    scan = await _scan(
        list_argv(find_rg(), _rg_path(rel), glob),
        ws.root,
        take,
        select=b"",
        limit=max_entries + COUNT_LIMIT,
        timeout=timeout,
    )
    if scan.failed and scan.found == 0:
        raise _rg_failure(scan.errors, None, glob)
    if scan.found == 0:
        if scan.stopped:
            raise ToolError(
                f"{scan.stopped} before any file was found in {scope}; list a smaller path",
                reason="timeout",
            )
        return f"no files in {scope} ({_EXCLUDED_NOTE})" + _read_errors(scan.errors)
    return _bounded("file", "files", f"in {scope}", kept, scan, "with path or glob")


def _common_flags(glob: str | None) -> list[str]:
    """Flags shared by search and listing: ignore rules, dotfiles, exclusions."""
    flags = ["--no-config", "--no-require-git", "--hidden"]
    # Later globs win in ripgrep, so the exclusions come after the user's glob.
    if glob:
        flags += ["--glob", glob]
    for excluded in EXCLUDED_GLOBS:
        flags += ["--glob", excluded]
    return flags


def _target(ws: Workspace, path: str) -> tuple[Path, str]:
    """The resolved `path` and its root-relative form; a missing path is a ToolError."""
    target = ws.resolve(path)
    rel = ws.relative(target)
    if not target.exists():
        raise ToolError(
            f"no such file or folder: {rel}; use list_files on its parent folder to see what "
            "exists",
            reason="not_found",
        )
    return target, rel


def _glob_matches(rel: str, glob: str | None) -> bool:
    """Whether a file named explicitly passes the glob (ripgrep applies globs to walks only)."""
    return not glob or pathspec.GitIgnoreSpec.from_lines([glob]).match_file(rel)


def _rg_path(rel: str) -> str:
    """The path argument for ripgrep run from the root (`./x` keeps a leading `-` harmless)."""
    return "." if rel == "." else f"./{rel}"


def _relative_output(path: str) -> str:
    """A path ripgrep printed (run from the root) as a POSIX path relative to the root."""
    if path.startswith("./") or (os.name == "nt" and path.startswith(".\\")):
        path = path[2:]
    return PurePath(path).as_posix()


def _scope(rel: str, glob: str | None) -> str:
    """Where a search or listing looked, in words."""
    where = "the workspace" if rel == "." else rel
    return f"{where} (glob {glob})" if glob else where


def _parse_match(line: bytes) -> tuple[str, int, str]:
    """(path, line number, text to show) from one `--json` match message."""
    data: dict[str, Any] = json.loads(line)["data"]
    path = _relative_output(_json_text(data["path"]))
    text = _json_text(data["lines"]).rstrip("\r\n")
    if len(text) > MATCH_LINE_CHARS:
        submatches = data.get("submatches") or [{"start": 0}]
        text = _cut_around(text, _json_bytes(data["lines"]), submatches[0]["start"])
    return path, int(data.get("line_number") or 0), text


def _json_text(value: dict[str, str]) -> str:
    """ripgrep's `{"text": ...}`, or `{"bytes": base64}` for data that is not UTF-8, as text."""
    if "text" in value:
        return value["text"]
    return base64.b64decode(value["bytes"]).decode("utf-8", "replace")


def _json_bytes(value: dict[str, str]) -> bytes:
    """ripgrep's `{"text": ...}` or `{"bytes": base64}` as the original bytes."""
    if "text" in value:
        return value["text"].encode("utf-8", "surrogatepass")
    return base64.b64decode(value["bytes"])


def _cut_around(text: str, raw: bytes, byte_start: int) -> str:
    """`text` cut to `MATCH_LINE_CHARS` around the match that starts at byte `byte_start`."""
    at = len(raw[:byte_start].decode("utf-8", "replace"))
    begin = max(0, min(at - MATCH_LINE_CHARS // 4, len(text) - MATCH_LINE_CHARS))
    end = begin + MATCH_LINE_CHARS
    head = "…" if begin > 0 else ""
    tail = "…" if end < len(text) else ""
    return f"{head}{text[begin:end]}{tail} [line cut: {len(text)} chars]"


def _bounded(noun: str, nouns: str, where: str, shown: list[str], scan: _Scan, narrow: str) -> str:
    """A header with the count, the lines shown, and a note on what was left out."""
    more = scan.found - len(shown)
    if scan.stopped:
        header = f"{len(shown)} of at least {scan.found} {nouns} {where} ({scan.stopped}):"
        note = f"… at least {more} more {nouns} not shown; narrow {narrow}"
    elif more:
        header = f"{len(shown)} of {scan.found} {nouns} {where}:"
        note = f"… {more} more {noun if more == 1 else nouns} not shown; narrow {narrow}"
    else:
        header = f"{scan.found} {noun if scan.found == 1 else nouns} {where}:"
        note = ""
    out = [header, *shown]
    if note:
        out.append(note)
    return "\n".join(out) + _read_errors(scan.errors)


def _rg_failure(errors: Sequence[str], pattern: str | None, glob: str | None) -> ToolError:
    """The ToolError for a ripgrep run that failed before finding anything."""
    message = "\n".join(errors).strip() or "ripgrep failed without a message"
    if pattern is not None and "regex" in message:
        return ToolError(
            f"invalid regex {pattern!r}; ripgrep says:\n{message}\nThe pattern is a Rust regex "
            "matched line by line: escape special characters such as ( ) [ ] { } . * + ? | \\ "
            "with a backslash to match them literally",
            reason="pattern",
        )
    if glob and "glob" in message:
        return ToolError(
            f"invalid glob {glob!r}; ripgrep says: {message}\nUse a glob such as '*.py' or "
            "'src/**/*.ts'",
            reason="pattern",
        )
    return ToolError(f"ripgrep failed: {message}", reason="search")


def _read_errors(errors: Sequence[str]) -> str:
    """A short note when ripgrep could not read some files but the run went on."""
    if not errors:
        return ""
    shown = "; ".join(errors[:_READ_ERRORS_SHOWN])
    if len(errors) > _READ_ERRORS_SHOWN:
        shown += f"; and {len(errors) - _READ_ERRORS_SHOWN} more"
    return f"\n(some files could not be read: {shown})"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


@dataclass
class _Scan:
    """What one ripgrep run produced, apart from the lines themselves."""

    found: int = 0
    """Selected stdout lines seen (matches or files)."""
    stopped: str = ""
    """Why ripgrep was stopped before it finished, or empty when it finished."""
    failed: bool = False
    """ripgrep exited with an error that is not about one unreadable file."""
    errors: list[str] = field(default_factory=list)
    """Its error messages, without the `rg: ` prefix."""


async def _scan(
    argv: list[str],
    cwd: Path,
    take: Callable[[bytes], None],
    *,
    select: bytes,
    limit: int,
    timeout: float,
) -> _Scan:
    """Run ripgrep from `cwd`, passing each stdout line starting with `select` to `take`.

    Counting stops at `limit` lines or after `timeout` seconds; ripgrep is then killed. The
    process is always reaped, also when the caller is cancelled.
    """
    scan = _Scan()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise ToolError(
            f"could not run ripgrep ({argv[0]}): {exc}; use bash with grep or find instead",
            reason="missing_tool",
        ) from exc
    assert process.stdout is not None and process.stderr is not None
    stdout = process.stdout
    # Drained alongside stdout, so a flood of messages cannot fill the pipe and stall rg.
    stderr = asyncio.ensure_future(_read_bounded(process.stderr, _STDERR_KEEP))

    async def read() -> None:
        pending = b""
        while chunk := await stdout.read(_CHUNK):
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line.startswith(select):
                    scan.found += 1
                    take(line)
                    if scan.found >= limit:
                        scan.stopped = "stopped counting"
                        return
        if pending.startswith(select) and pending:
            scan.found += 1
            take(pending)

    finished = False
    try:
        await asyncio.wait_for(read(), timeout)
        finished = not scan.stopped
    except TimeoutError:
        scan.stopped = f"stopped after {timeout:g} s"
    finally:
        # Stopped early, timed out, or cancelled: rg is killed rather than left running.
        if not finished and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        # Until stdout is read to its end, asyncio keeps the transport open and wait() hangs.
        while await stdout.read(_CHUNK):
            pass
        returncode = await process.wait()
        output = await stderr
    scan.errors = [
        line.removeprefix("rg: ")
        for line in output.decode("utf-8", "replace").splitlines()
        if line.strip()
    ]
    # Exit code 2 also reports files that could not be read; only other errors are failures.
    scan.failed = returncode == 2 and not all("(os error" in line for line in scan.errors)
    return scan


async def _read_bounded(stream: asyncio.StreamReader, keep: int) -> bytes:
    """Everything from `stream` until EOF, keeping only the first `keep` bytes."""
    kept = b""
    while chunk := await stream.read(_CHUNK):
        if len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return kept
