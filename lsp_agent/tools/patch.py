"""From the model's `apply_patch(patch)` to the new text of every file it touches.

`parse_patch` reads a multi-file patch in either shape models write: a unified diff (git style,
`a/` `b/` prefixes, `/dev/null` for added and deleted files, `\\ No newline at end of file`), or the
`*** Begin Patch` envelope (`*** Add File:`, `*** Update File:` with `*** Move to:`, `*** Delete
File:`, hunks under `@@` lines that may carry a line of context instead of numbers, `*** End of
File`). `plan_patch` locates every hunk exactly once and returns the planned changes, or raises one
`PatchError` that lists every hunk it could not place: the whole patch is validated before anything
is proposed. `format_patch` writes patches back as text. Everything here is pure: the caller reads
the files (`read_current`) and proposes the result.

How a hunk is located, never guessed. Its old lines (context and removed lines) are compared with
the file's lines at four levels, in order: exactly; ignoring trailing whitespace; ignoring all
whitespace runs (indentation included); and with typographic punctuation (curly quotes, dashes,
non-breaking spaces) read as ASCII. The first level with any candidate decides: a place is used
when it is the only candidate there, or, at the exact level only, when it is where the hunk's
`@@ -l,n` header says. `@@` context lines narrow several candidates to those below them. Line
breaks never count in the comparison, so an LF patch applies to a CRLF file, and the lines it adds
take the file's line ending.
"""

from __future__ import annotations

import difflib
import heapq
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lsp_agent.errors import ToolError
from lsp_agent.tools.edits import plain_punctuation

Kind = Literal["add", "update", "delete"]
Line = tuple[str, str]
"""One line of a hunk: (op, text); op is " " (context), "-" (removed) or "+" (added)."""
ReadCurrent = Callable[[str], tuple[Path, str | None]]
"""Given a path as written in the patch: the resolved file and its current text (None: absent)."""

NO_EOL_MARKER = "\\ No newline at end of file"

APPLY_PATCH_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "apply_patch",
        "description": (
            "Change several files at once: update, create, delete or move them. Send either a "
            "unified diff (--- a/path and +++ b/path, then @@ hunks; --- /dev/null creates a "
            "file, +++ /dev/null deletes one) or this envelope:\n"
            "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n"
            "-    return 'hello'\n+    return 'hi'\n*** Add File: src/new.py\n+print(1)\n"
            "*** Delete File: old.txt\n*** End Patch\n"
            "Hunk lines start with a space (unchanged, copied exactly from the file), - "
            "(removed) or + (added); an @@ line may name the function or class above the hunk. "
            "Read every file before you update or delete it. The whole patch is checked first: "
            "if any hunk does not fit exactly one place, nothing changes and the error says why. "
            "The user previews all files as one edit."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "patch": {
                    "type": "string",
                    "description": "The whole patch text, every file in one call.",
                }
            },
            "required": ["patch"],
        },
    },
}
"""The `apply_patch` tool in OpenAI function format."""

_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?: ?(.*))?$")
_FILE_EOL = re.compile(r"\r\n|\r|\n")
_MAX_LISTED = 10
"""How many candidate line numbers an `ambiguous` message lists."""
_NEAR_LINES = 8
_NEAR_LINE_CHARS = 160
_NEAR_PROBES = 5
_NEAR_CUTOFF = 0.5
_NEAR_TOP = 20
"""How many file lines sharing the most words with a line of the hunk are compared closely."""
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


@dataclass(frozen=True)
class Hunk:
    """One `@@` section of a file's patch."""

    lines: tuple[Line, ...]
    old_start: int | None = None
    """`l` of `@@ -l,n`: the first old line (1-based), or for a pure insertion (n = 0) the line
    after which it goes; None when the hunk has no numbers (the envelope's usual shape)."""
    old_count: int | None = None
    """`n` of `@@ -l,n` (1 when the header omits it); None without numbers."""
    anchors: tuple[str, ...] = ()
    """Envelope `@@ text` lines: lines found somewhere above the hunk, outermost first."""
    heading: str = ""
    """Text after a numbered header's closing `@@` (git's function name); shown, not matched."""
    old_no_eol: bool = False
    """The old side's last line is the end of the file, without a final line break."""
    new_no_eol: bool = False
    """The new side's last line ends the file without a final line break."""
    at_end: bool = False
    """`*** End of File`: the hunk's old lines end where the file ends."""

    @property
    def old(self) -> list[str]:
        """The lines the file must have where the hunk applies (context and removed)."""
        return [text for op, text in self.lines if op != "+"]

    @property
    def new(self) -> list[str]:
        """The lines there after the hunk is applied (context and added)."""
        return [text for op, text in self.lines if op != "-"]

    def label(self) -> str:
        """How messages name the hunk: its header, else its first old line."""
        if self.old_start is not None:
            count = self.old_count if self.old_count is not None else len(self.old)
            return f"@@ -{self.old_start},{count} @@"
        if self.anchors:
            return "@@ " + " / ".join(self.anchors)
        first = next((text.strip() for text in self.old if text.strip()), "")
        return f"starting {_clip(first, 60)!r}" if first else "without context lines"


@dataclass(frozen=True)
class FilePatch:
    """What a patch does to one file."""

    kind: Kind
    path: str
    """The file as the patch names it (`a/`/`b/` prefixes removed); for a move, the source."""
    hunks: tuple[Hunk, ...] = ()
    """For `add`: the file's lines as `+` lines; for `delete`: optional `-` lines to verify."""
    move_to: str | None = None
    """For `update`: the new path when the file is also renamed."""


@dataclass(frozen=True)
class PlannedChange:
    """One file's part of a planned patch: the whole text before and after."""

    path: Path
    """The resolved file, as `read_current` returned it."""
    rel: str
    """The path as the patch wrote it, for messages and labels."""
    before: str | None
    """The current text the change was computed against; None: the file is created."""
    after: str | None
    """The text to write; None: the file is deleted."""

    @property
    def kind(self) -> Kind:
        """`add`, `update` or `delete`."""
        if self.before is None:
            return "add"
        return "delete" if self.after is None else "update"


@dataclass(frozen=True)
class HunkFailure:
    """Why one file or hunk of a patch could not be planned."""

    path: str
    hunk: int | None
    """1-based hunk number within its file section; None for a failure of the whole file."""
    reason: str
    """`not_found`, `ambiguous`, `overlap`, `exists`, `bad_patch`, or a `read_current` reason."""
    message: str


class PatchError(ToolError):
    """The patch cannot be applied as a whole; nothing may be proposed."""

    def __init__(self, message: str, *, reason: str, failures: Sequence[HunkFailure] = ()) -> None:
        super().__init__(message, reason=reason)
        self.failures: tuple[HunkFailure, ...] = tuple(failures)
        """Every file or hunk that failed (empty for a patch that could not be parsed)."""


def parse_patch(text: str) -> list[FilePatch]:
    """The file patches of a unified diff or a `*** Begin Patch` envelope, in order.

    A surrounding Markdown code fence is ignored. Raises `PatchError` (reason `bad_patch`) with
    the line number and what was expected when the text is neither shape or is malformed.
    """
    lines = _patch_lines(text)
    if any(line.strip() == "*** Begin Patch" for line in lines):
        patches = _EnvelopeParser(lines).parse()
    else:
        patches = _DiffParser(lines).parse()
    if not patches:
        raise _bad(
            "no file changes found: send a unified diff (--- a/path, +++ b/path, @@ hunks) or "
            "a patch between *** Begin Patch and *** End Patch"
        )
    return patches


def paths(patches: Sequence[FilePatch]) -> list[str]:
    """Every path the patches name (sources and move targets), once each, in order."""
    seen: dict[str, None] = {}
    for patch in patches:
        seen.setdefault(patch.path)
        if patch.move_to is not None:
            seen.setdefault(patch.move_to)
    return list(seen)


def describe(changes: Sequence[PlannedChange]) -> str:
    """The changes in words, for a proposal's description: `edit a.py, create b.py, delete c`."""
    verbs = {"add": "create", "update": "edit", "delete": "delete"}
    return ", ".join(f"{verbs[change.kind]} {change.rel}" for change in changes)


def plan_patch(patches: Sequence[FilePatch], read_current: ReadCurrent) -> list[PlannedChange]:
    """The changes the patches make, every hunk placed exactly once, or a `PatchError`.

    `read_current(path)` returns the resolved file and its current text, None when it does not
    exist; a `ToolError` it raises (a refused path, a stale read) counts as that file's failure.
    Several sections for one file apply one after the other. Added files must not exist, updated
    and deleted ones must; a deletion with `-` lines must remove the file's whole text. Files the
    patch leaves unchanged are left out; a patch that changes nothing is refused (`no_change`).
    """
    planner = _Planner(read_current)
    for patch in patches:
        planner.apply(patch)
    return planner.result()


def format_patch(patches: Sequence[FilePatch], *, envelope: bool = False) -> str:
    """The patches as a git-style unified diff, or as a `*** Begin Patch` envelope.

    `parse_patch` reads the text back to equal patches (git-style text has no `*** End of File`:
    that flag is only kept by the envelope).
    """
    return _format_envelope(patches) if envelope else _format_diff(patches)


# Parsing


def _patch_lines(text: str) -> list[str]:
    """The patch's lines (CRLF read as LF), without a Markdown fence around the whole text."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    if (
        first is not None
        and last is not None
        and first < last
        and lines[first].startswith("```")
        and lines[last].strip() == "```"
    ):
        lines = lines[first + 1 : last]
    return lines


def _bad(message: str) -> PatchError:
    return PatchError(
        f"apply_patch: the patch could not be read: {message}. Nothing was changed.",
        reason="bad_patch",
    )


def _clean_path(raw: str, prefix: str) -> str:
    """A path from a header: unquoted, timestamp and `a/`/`b/`/`./` prefix removed."""
    path = raw.strip()
    if path.startswith('"') and path.endswith('"') and len(path) >= 2:
        path = _unquote(path[1:-1])
    elif "\t" in path:
        path = path.split("\t", 1)[0].rstrip()
    if prefix and path.startswith(prefix):
        path = path[len(prefix) :]
    while path.startswith("./"):
        path = path[2:]
    return path


def _unquote(quoted: str) -> str:
    """Git's C-style quoting of unusual paths (`"a/t\\303\\251st.py"`) undone."""
    raw = bytearray()
    escapes = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b"}
    i = 0
    while i < len(quoted):
        char = quoted[i]
        if char == "\\" and i + 1 < len(quoted):
            nxt = quoted[i + 1]
            if nxt in "01234567" and re.fullmatch(r"[0-7]{3}", quoted[i + 1 : i + 4]):
                raw.append(int(quoted[i + 1 : i + 4], 8))
                i += 4
                continue
            raw += escapes.get(nxt, nxt.encode())
            i += 2
            continue
        raw += char.encode()
        i += 1
    return raw.decode("utf-8", "replace")


@dataclass
class _HunkBuilder:
    """A hunk being read: header fields and body lines."""

    old_start: int | None = None
    old_count: int | None = None
    new_count: int | None = None
    anchors: list[str] = field(default_factory=list)
    heading: str = ""
    lines: list[Line] = field(default_factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False
    at_end: bool = False

    def header(self, line: str) -> bool:
        """Take one `@@` line; False when a body has started (the line opens a new hunk)."""
        if self.lines:
            return False
        match = _HEADER.match(line)
        if match:
            if self.old_start is not None:
                return False
            old_start, old_count, _new_start, new_count, heading = match.groups()
            self.old_start = int(old_start)
            self.old_count = 1 if old_count is None else int(old_count)
            self.new_count = 1 if new_count is None else int(new_count)
            self.heading = (heading or "").strip()
            return True
        if self.old_start is not None:
            return False
        anchor = line[2:].strip()
        if anchor.endswith("@@") and anchor.strip("@ ") == "":
            anchor = ""
        if anchor:
            self.anchors.append(anchor)
        return True

    def marker(self) -> None:
        """`\\ No newline at end of file` after the line before it."""
        if not self.lines:
            return
        op = self.lines[-1][0]
        if op in " -":
            self.old_no_eol = True
        if op in " +":
            self.new_no_eol = True

    def build(self) -> Hunk:
        return Hunk(
            lines=tuple(self.lines),
            old_start=self.old_start,
            old_count=self.old_count,
            anchors=tuple(self.anchors),
            heading=self.heading,
            old_no_eol=self.old_no_eol,
            new_no_eol=self.new_no_eol,
            at_end=self.at_end,
        )


class _BodyReader:
    """Reads hunk bodies; the two patch shapes differ only in what ends a hunk."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.i = 0

    def boundary(self, i: int) -> bool:
        """Whether line `i` starts something other than a hunk line."""
        raise NotImplementedError

    def hunk_line(self, i: int) -> bool:
        """Whether line `i` can continue a hunk read without counts."""
        line = self.lines[i]
        return line[:1] in (" ", "-", "+", "\\") and not self.boundary(i)

    def body(self, hunk: _HunkBuilder) -> None:
        """Read the lines of `hunk` after its header, up to what ends it."""
        old_left, new_left = hunk.old_count, hunk.new_count
        lines = self.lines
        while self.i < len(lines):
            line = lines[self.i]
            counted = old_left is not None and new_left is not None and (old_left or new_left)
            if counted:
                # Inside the header's counts a line belongs to the hunk whatever it looks like
                # (`--- x` is a removed line there); a line that cannot be one means the model
                # counted too many, and the hunk ends.
                if line.startswith("\\"):
                    hunk.marker()
                    self.i += 1
                    continue
                op = line[:1] if line else " "
                if op not in (" ", "-", "+"):
                    break
            else:
                if line.startswith("\\") and not self.boundary(self.i):
                    hunk.marker()
                    self.i += 1
                    continue
                if line == "":
                    # A blank line is an empty context line only when the hunk goes on after it.
                    j = self.i
                    while j < len(lines) and lines[j] == "":
                        j += 1
                    if j >= len(lines) or not self.hunk_line(j) or lines[j].startswith("\\"):
                        break
                    op = " "
                elif not self.hunk_line(self.i) or _is_signature(lines, self.i):
                    break
                else:
                    op = line[0]
            text = line[1:] if line else ""
            hunk.lines.append((op, text))
            if old_left is not None and new_left is not None:
                if op != "+":
                    old_left = max(old_left - 1, 0)
                if op != "-":
                    new_left = max(new_left - 1, 0)
            self.i += 1


def _is_signature(lines: list[str], i: int) -> bool:
    """`-- ` followed by a version line: the signature `git format-patch` ends a mail with."""
    return (
        lines[i] == "-- "
        and i + 1 < len(lines)
        and bool(re.fullmatch(r"\d+(\.\d+)+.*", lines[i + 1].strip()))
    )


class _DiffParser(_BodyReader):
    """Unified diffs: `diff --git` blocks or bare `---`/`+++` pairs, each with `@@` hunks."""

    def boundary(self, i: int) -> bool:
        line = self.lines[i]
        if line.startswith(("@@", "diff --git ")):
            return True
        return (
            line.startswith("--- ")
            and i + 1 < len(self.lines)
            and self.lines[i + 1].startswith("+++ ")
        )

    def parse(self) -> list[FilePatch]:
        patches: list[FilePatch] = []
        lines = self.lines
        while self.i < len(lines):
            line = lines[self.i]
            if line.startswith("diff --git "):
                patches.append(self._git_block())
            elif self.boundary(self.i) and line.startswith("--- "):
                patches.append(self._file(None))
            elif line.startswith("@@"):
                raise _bad(
                    f"line {self.i + 1}: a hunk ({_clip(line, 40)}) before any file header; "
                    "start each file with --- a/path and +++ b/path lines"
                )
            else:
                self.i += 1  # prose or `Index:` lines between files
        return patches

    def _git_block(self) -> FilePatch:
        """A `diff --git` block: extended header lines, then `---`/`+++` and hunks if any."""
        lines = self.lines
        start = self.i
        names = lines[self.i][len("diff --git ") :]
        self.i += 1
        info: dict[str, str] = {}
        while self.i < len(lines):
            line = lines[self.i]
            if line.startswith(("diff --git ", "@@")) or (
                line.startswith("--- ") and self.boundary(self.i)
            ):
                break
            if line.startswith(("Binary files ", "GIT binary patch")):
                raise _bad(
                    f"line {self.i + 1}: binary patches are not supported; change text files only"
                )
            for key in (
                "new file mode",
                "deleted file mode",
                "rename from",
                "rename to",
                "copy from",
                "copy to",
            ):
                if line.startswith(key + " "):
                    info[key] = line[len(key) + 1 :]
            if not line.strip() or not re.match(r"^[a-z]", line):
                break
            self.i += 1
        if "copy from" in info:
            raise _bad(
                f"line {start + 1}: copies are not supported; add the new file with its content"
            )
        if self.i < len(lines) and self.boundary(self.i) and lines[self.i].startswith("--- "):
            return self._file(info)
        old, new = _git_names(names)
        if "rename from" in info and "rename to" in info:
            old, new = _clean_path(info["rename from"], ""), _clean_path(info["rename to"], "")
        if not old or not new:
            raise _bad(f"line {start + 1}: cannot read the file names of {_clip(names, 80)!r}")
        if "new file mode" in info:
            return FilePatch("add", new)
        if "deleted file mode" in info:
            return FilePatch("delete", old)
        if old != new:
            return FilePatch("update", old, move_to=new)
        raise _bad(
            f"line {start + 1}: {old} has no --- and +++ lines and no hunks; mode changes alone "
            "are not supported"
        )

    def _file(self, info: dict[str, str] | None) -> FilePatch:
        """`--- old` / `+++ new` and the hunks after them."""
        lines = self.lines
        header_line = self.i + 1
        old_raw, new_raw = lines[self.i][4:], lines[self.i + 1][4:]
        self.i += 2
        old_dev = old_raw.split("\t", 1)[0].strip() == "/dev/null"
        new_dev = new_raw.split("\t", 1)[0].strip() == "/dev/null"
        old, new = _header_names(None if old_dev else old_raw, None if new_dev else new_raw)
        hunks: list[Hunk] = []
        while self.i < len(lines) and lines[self.i].startswith("@@"):
            hunk = _HunkBuilder()
            while (
                self.i < len(lines)
                and lines[self.i].startswith("@@")
                and hunk.header(lines[self.i])
            ):
                self.i += 1
            self.body(hunk)
            if not hunk.lines:
                raise _bad(f"line {self.i}: hunk {len(hunks) + 1} of {new or old} has no lines")
            hunks.append(hunk.build())
        if old is None and new is None:
            raise _bad(f"line {header_line}: both sides are /dev/null")
        if old is None:
            assert new is not None
            return FilePatch("add", new, tuple(hunks))
        if new is None:
            return FilePatch("delete", old, tuple(hunks))
        if info is not None and "new file mode" in info:
            return FilePatch("add", new, tuple(hunks))
        if old != new and not (info and "rename from" in info):
            raise _bad(
                f"line {header_line - 1}: --- names {old} but +++ names {new}; to rename a file "
                "add rename from / rename to lines after diff --git, or use *** Move to:"
            )
        if not hunks and old == new:
            raise _bad(f"line {header_line}: {new} has a header but no @@ hunks")
        return FilePatch("update", old, tuple(hunks), move_to=new if new != old else None)


def _header_names(old_raw: str | None, new_raw: str | None) -> tuple[str | None, str | None]:
    """The paths of a `---`/`+++` pair (None for /dev/null), without git's a/ and b/.

    The prefixes go when both sides use them, or when one side does and removing it makes the
    names equal; a folder may really be called `a`, so they are not removed blindly.
    """
    old = None if old_raw is None else _clean_path(old_raw, "")
    new = None if new_raw is None else _clean_path(new_raw, "")
    old_prefixed = old is None or old.startswith("a/")
    new_prefixed = new is None or new.startswith("b/")
    if old_prefixed and new_prefixed:
        return (old and old[2:]), (new and new[2:])
    if old is not None and new is not None:
        if old_prefixed and old[2:] == new:
            return new, new
        if new_prefixed and new[2:] == old:
            return old, old
    return old, new


def _git_names(names: str) -> tuple[str, str]:
    """The two paths of `diff --git a/x b/y` (the halves are equal unless the file moved)."""
    names = names.strip()
    if names.startswith('"'):
        match = re.match(r'^"((?:[^"\\]|\\.)*)" (.*)$', names)
        if match:
            return _clean_path(f'"{match.group(1)}"', "a/"), _clean_path(match.group(2), "b/")
    half = len(names) // 2
    if len(names) % 2 == 1 and names[half] == " " and names[:half][2:] == names[half + 1 :][2:]:
        return _clean_path(names[:half], "a/"), _clean_path(names[half + 1 :], "b/")
    at = names.find(" b/")
    if at > 0:
        return _clean_path(names[:at], "a/"), _clean_path(names[at + 1 :], "b/")
    return "", ""


class _EnvelopeParser(_BodyReader):
    """`*** Begin Patch` … `*** End Patch` with `*** Add/Update/Delete File:` sections."""

    def boundary(self, i: int) -> bool:
        return self.lines[i].startswith(("*** ", "@@"))

    def parse(self) -> list[FilePatch]:
        lines = self.lines
        while lines[self.i].strip() != "*** Begin Patch":
            self.i += 1
        self.i += 1
        patches: list[FilePatch] = []
        while True:
            if self.i >= len(lines):
                raise _bad(
                    "the patch ends without *** End Patch, so it may have been cut off; send "
                    "the whole patch again"
                )
            line = lines[self.i]
            stripped = line.strip()
            if stripped == "*** End Patch":
                return patches
            if not stripped:
                self.i += 1
            elif line.startswith("*** Add File:"):
                patches.append(self._add(_clean_path(line[len("*** Add File:") :], "")))
            elif line.startswith("*** Delete File:"):
                patches.append(FilePatch("delete", _clean_path(line[16:], "")))
                self.i += 1
            elif line.startswith("*** Update File:"):
                patches.append(self._update(_clean_path(line[len("*** Update File:") :], "")))
            else:
                raise _bad(
                    f"line {self.i + 1} ({_clip(line, 60)!r}): expected *** Add File:, "
                    "*** Update File:, *** Delete File: or *** End Patch"
                )

    def _add(self, path: str) -> FilePatch:
        lines = self.lines
        self.i += 1
        body = _HunkBuilder()
        while self.i < len(lines) and not lines[self.i].startswith("*** "):
            line = lines[self.i]
            if line.startswith("+"):
                body.lines.append(("+", line[1:]))
            elif line.startswith("\\"):
                body.marker()
            elif line == "":
                j = self.i
                while j < len(lines) and lines[j] == "":
                    j += 1
                if j >= len(lines) or not lines[j].startswith("+"):
                    self.i = j
                    break
                body.lines.append(("+", ""))
            else:
                raise _bad(
                    f"line {self.i + 1}: in *** Add File: {path}, every line of the new file "
                    f"starts with + (got {_clip(line, 40)!r})"
                )
            self.i += 1
        if not path:
            raise _bad("*** Add File: without a path")
        return FilePatch("add", path, (body.build(),) if body.lines else ())

    def _update(self, path: str) -> FilePatch:
        lines = self.lines
        header_line = self.i + 1
        self.i += 1
        move_to = None
        if self.i < len(lines) and lines[self.i].startswith("*** Move to:"):
            move_to = _clean_path(lines[self.i][len("*** Move to:") :], "")
            self.i += 1
        hunks: list[Hunk] = []
        while self.i < len(lines):
            line = lines[self.i]
            if line.startswith("*** End of File"):
                if not hunks:
                    raise _bad(f"line {self.i + 1}: *** End of File before any hunk of {path}")
                hunks[-1] = _with_end(hunks[-1])
                self.i += 1
                continue
            if line.startswith("*** "):
                break
            if line == "":
                self.i += 1
                continue
            hunk = _HunkBuilder()
            while (
                self.i < len(lines)
                and lines[self.i].startswith("@@")
                and hunk.header(lines[self.i])
            ):
                self.i += 1
            before = self.i
            self.body(hunk)
            if not hunk.lines:
                if self.i == before and self.i < len(lines) and not self.boundary(self.i):
                    raise _bad(
                        f"line {self.i + 1} ({_clip(lines[self.i], 60)!r}) in *** Update File: "
                        f"{path}: every hunk line starts with a space (unchanged), - (removed) "
                        "or + (added)"
                    )
                if self.i < len(lines) and lines[self.i].startswith("@@"):
                    continue
                if hunk.anchors or hunk.old_start is not None:
                    raise _bad(f"line {self.i}: hunk {len(hunks) + 1} of {path} has no lines")
                break
            hunks.append(hunk.build())
        if not path:
            raise _bad(f"line {header_line}: *** Update File: without a path")
        if not hunks and move_to is None:
            raise _bad(f"line {header_line}: *** Update File: {path} has no hunks")
        return FilePatch("update", path, tuple(hunks), move_to=move_to)


def _with_end(hunk: Hunk) -> Hunk:
    return Hunk(
        hunk.lines,
        hunk.old_start,
        hunk.old_count,
        hunk.anchors,
        hunk.heading,
        hunk.old_no_eol,
        hunk.new_no_eol,
        at_end=True,
    )


# Planning


@dataclass
class _File:
    """A file as the planner sees it while the patch's sections apply one after another."""

    path: Path
    rel: str
    original: str | None
    current: str | None
    failed: bool = False


class _Planner:
    def __init__(self, read_current: ReadCurrent) -> None:
        self.read_current = read_current
        self.by_name: dict[str, _File | None] = {}
        self.files: dict[Path, _File] = {}
        self.failures: list[HunkFailure] = []

    def file(self, name: str) -> _File | None:
        """The file named `name`, read once; None (and a failure) when it cannot be read."""
        if name in self.by_name:
            return self.by_name[name]
        try:
            path, text = self.read_current(name)
        except ToolError as error:
            self.fail(name, None, error.reason, error.message)
            self.by_name[name] = None
            return None
        state = self.files.get(path)
        if state is None:
            state = self.files[path] = _File(path, name, text, text)
        self.by_name[name] = state
        return state

    def fail(self, rel: str, hunk: int | None, reason: str, message: str) -> None:
        self.failures.append(HunkFailure(rel, hunk, reason, message))

    def apply(self, patch: FilePatch) -> None:
        state = self.file(patch.path)
        if state is None or state.failed:
            return
        rel = patch.path
        if patch.kind == "add":
            if state.current is not None:
                self.fail(
                    rel,
                    None,
                    "exists",
                    f"{rel} already exists: read it, then change it with *** Update File: "
                    f"{rel} (or a diff from a/{rel})",
                )
                state.failed = True
                return
            content = _added_content(patch, self)
            if content is not None:
                state.current = content
            else:
                state.failed = True
            return
        if state.current is None:
            verb = "delete" if patch.kind == "delete" else "update"
            self.fail(
                rel,
                None,
                "not_found",
                f"cannot {verb} {rel}: the file does not exist; use list_files to find the "
                "right path (a new file is created with *** Add File: or --- /dev/null)",
            )
            state.failed = True
            return
        try:
            after = _apply_hunks(state.current, patch.hunks, rel) if patch.hunks else state.current
        except _HunkFailures as failures:
            self.failures.extend(failures.failures)
            state.failed = True
            return
        if patch.kind == "delete":
            if patch.hunks and after.strip():
                self.fail(
                    rel,
                    None,
                    "not_found",
                    f"{rel}: the lines the patch removes are not the whole file, so it was not "
                    "deleted; read it again, or use *** Delete File: " + rel,
                )
                state.failed = True
                return
            state.current = None
            return
        if patch.move_to is not None:
            target = self.file(patch.move_to)
            if target is None:
                state.failed = True
                return
            if target is not state:
                if target.current is not None:
                    self.fail(
                        patch.move_to,
                        None,
                        "exists",
                        f"cannot move {rel} to {patch.move_to}: that file already exists",
                    )
                    state.failed = True
                    return
                target.current = after
                state.current = None
                return
        state.current = after

    def result(self) -> list[PlannedChange]:
        if self.failures:
            raise _patch_error(self.failures)
        changes = [
            PlannedChange(state.path, state.rel, state.original, state.current)
            for state in self.files.values()
            if state.original != state.current
        ]
        if not changes:
            raise PatchError(
                "apply_patch: the patch changes nothing (every file would stay as it is); "
                "check that the + lines differ from the - lines",
                reason="no_change",
            )
        return changes


def _added_content(patch: FilePatch, planner: _Planner) -> str | None:
    """The text of an added file, or None after recording why it cannot be made."""
    lines: list[str] = []
    no_eol = False
    for number, hunk in enumerate(patch.hunks, 1):
        if any(op != "+" for op, _ in hunk.lines):
            planner.fail(
                patch.path,
                number,
                "bad_patch",
                f"{patch.path} is a new file, so its hunks may only add lines (+)",
            )
            return None
        lines.extend(hunk.new)
        no_eol = hunk.new_no_eol
    if not lines:
        return ""
    return "\n".join(lines) + ("" if no_eol else "\n")


class _HunkFailures(Exception):
    def __init__(self, failures: list[HunkFailure]) -> None:
        super().__init__(failures)
        self.failures = failures


@dataclass(frozen=True)
class _Placed:
    start: int
    end: int
    order: int
    hunk: Hunk
    level: int


def _split_file(text: str) -> list[tuple[str, str]]:
    """The file's lines as (content, line ending); the last ending is "" without a final one."""
    out: list[tuple[str, str]] = []
    at = 0
    for match in _FILE_EOL.finditer(text):
        out.append((text[at : match.start()], match.group()))
        at = match.end()
    if at < len(text):
        out.append((text[at:], ""))
    return out


def _dominant_eol(lines: list[tuple[str, str]]) -> str:
    """The file's most frequent line ending (the first seen on a tie); LF when it has none."""
    counts: dict[str, int] = {}
    for _, eol in lines:
        if eol:
            counts[eol] = counts.get(eol, 0) + 1
    return max(counts, key=lambda eol: counts[eol]) if counts else "\n"


def _collapse(line: str) -> str:
    return " ".join(line.split())


def _punctuation(line: str) -> str:
    return _collapse(plain_punctuation(line))


_LEVELS: tuple[tuple[Callable[[str], str], str], ...] = (
    (lambda line: line, ""),
    (str.rstrip, "when trailing whitespace is ignored"),
    (_collapse, "when whitespace and indentation are ignored"),
    (_punctuation, "when whitespace and typographic quotes and dashes are ignored"),
)


def _apply_hunks(text: str, hunks: Sequence[Hunk], rel: str) -> str:
    """`text` with every hunk applied, each placed once; raises `_HunkFailures`."""
    lines = _split_file(text)
    contents = [content for content, _ in lines]
    keys: dict[int, list[str]] = {}  # the file's lines as each level compares them
    ascii_file = text.isascii()
    placed: list[_Placed] = []
    failures: list[HunkFailure] = []
    for number, hunk in enumerate(hunks, 1):
        where = f"{rel}, hunk {number} of {len(hunks)} ({hunk.label()})"
        try:
            start, level = _locate(contents, keys, hunk, placed, where, ascii_file=ascii_file)
        except _Miss as miss:
            failures.append(HunkFailure(rel, number, miss.reason, miss.message))
            continue
        placed.append(_Placed(start, start + len(hunk.old), number, hunk, level))
    if failures:
        raise _HunkFailures(failures)
    return _rebuild(lines, placed)


class _Miss(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _locate(
    contents: list[str],
    keys: dict[int, list[str]],
    hunk: Hunk,
    placed: list[_Placed],
    where: str,
    *,
    ascii_file: bool,
) -> tuple[int, int]:
    """Where the hunk's old lines start, and the level they matched at; raises `_Miss`."""
    old = hunk.old
    at_end = hunk.at_end or hunk.old_no_eol

    def free(start: int, end: int) -> bool:
        return all(not (p.start < end and start < p.end) for p in placed)

    if not old:
        return _insertion_point(contents, hunk, free, where), 0

    plain = ascii_file and all(line.isascii() for line in old)
    for level, (key, how) in enumerate(_LEVELS):
        if level == len(_LEVELS) - 1 and plain:
            break  # ASCII on both sides: typographic punctuation cannot differ
        if level not in keys:
            keys[level] = contents if level == 0 else [key(line) for line in contents]
        file_keys = keys[level]
        want = [key(line) for line in old]
        found = [
            i
            for i in range(len(file_keys) - len(want) + 1)
            if file_keys[i] == want[0] and file_keys[i : i + len(want)] == want
        ]
        if at_end:
            found = [i for i in found if i + len(want) == len(file_keys)]
        if not found:
            continue
        usable = [i for i in found if free(i, i + len(want))]
        if not usable:
            raise _Miss(
                "overlap",
                f"{where} changes lines that an earlier hunk of this file already changes "
                f"(line {found[0] + 1}): merge the two into one hunk",
            )
        if level == 0 and hunk.old_start is not None:
            expected = hunk.old_start - 1 if hunk.old_start > 0 else 0
            if expected in usable:
                return expected, level
        if len(usable) > 1 and hunk.anchors:
            floor = _below_anchors(contents, hunk.anchors)
            if floor is not None:
                below = [i for i in usable if i >= floor]
                usable = below or usable
        if len(usable) == 1:
            return usable[0], level
        shown = ", ".join(str(i + 1) for i in usable[:_MAX_LISTED])
        if len(usable) > _MAX_LISTED:
            shown += f" and {len(usable) - _MAX_LISTED} more"
        note = f" ({how})" if how else ""
        raise _Miss(
            "ambiguous",
            f"{where} matches {len(usable)} places{note}, starting at lines {shown}: add "
            "context lines that exist only at the place you mean, or an @@ line with the "
            "function or class above it",
        )
    raise _Miss("not_found", _not_found_message(contents, old, where, at_end))


def _insertion_point(
    contents: list[str], hunk: Hunk, free: Callable[[int, int], bool], where: str
) -> int:
    """Where a hunk without old lines inserts its lines."""
    if not contents:
        return 0
    if hunk.at_end:
        return len(contents)
    if hunk.anchors:
        floor = _below_anchors(contents, hunk.anchors, unique=True)
        if floor is not None and free(floor, floor):
            return floor
    start = hunk.old_start
    if (
        start is not None
        and hunk.old_count == 0
        and 0 <= start <= len(contents)
        and free(start, start)
    ):
        return start
    raise _Miss(
        "not_found",
        f"{where} only adds lines and says nowhere where they go: include a few unchanged "
        "lines (starting with a space) from just before or after the new ones",
    )


def _below_anchors(
    contents: list[str], anchors: Sequence[str], *, unique: bool = False
) -> int | None:
    """The line after the first chain of `anchors` in order; None when they are not all there.

    With `unique`, None also when the last anchor occurs more than once after the others.
    """
    at = 0
    stripped = [_collapse(line) for line in contents]
    for depth, anchor in enumerate(anchors):
        want = _collapse(anchor)
        hits = [i for i in range(at, len(stripped)) if stripped[i] == want]
        if not hits:
            return None
        if unique and depth == len(anchors) - 1 and len(hits) > 1:
            return None
        at = hits[0] + 1
    return at


def _rebuild(lines: list[tuple[str, str]], placed: list[_Placed]) -> str:
    """The file's text with every placed hunk applied (positions refer to `lines`)."""
    eol = _dominant_eol(lines)
    out: list[tuple[str, str]] = []
    cursor = 0
    touched_end = False
    final: tuple[bool, bool] = (False, False)
    for item in sorted(placed, key=lambda p: (p.start, p.order)):
        out.extend(lines[cursor : item.start])
        region = lines[item.start : item.end]
        out.extend(_replacement(item.hunk, region, eol, reindent=item.level >= 2))
        cursor = item.end
        if item.end == len(lines):
            touched_end = True
            final = (item.hunk.old_no_eol, item.hunk.new_no_eol)
    out.extend(lines[cursor:])
    # A line that lost its place at the end of the file needs the line break it never had.
    for index in range(len(out) - 1):
        if not out[index][1]:
            out[index] = (out[index][0], eol)
    if touched_end and out:
        old_no_eol, new_no_eol = final
        had_final = not lines or lines[-1][1] != ""
        want_final = False if new_no_eol else True if old_no_eol else had_final
        content, last_eol = out[-1]
        if not want_final:
            out[-1] = (content, "")
        elif not last_eol:
            out[-1] = (content, eol)
    return "".join(content + ending for content, ending in out)


def _replacement(
    hunk: Hunk, region: list[tuple[str, str]], eol: str, *, reindent: bool
) -> list[tuple[str, str]]:
    """The lines a placed hunk leaves: the file's own context lines, the model's added ones."""
    indents = _indent_map(hunk, region) if reindent else {}
    out: list[tuple[str, str]] = []
    at = 0
    for op, text in hunk.lines:
        if op == "+":
            out.append((_reindent(text, indents) if reindent else text, eol))
            continue
        if op == " ":
            out.append(region[at])
        at += 1
    return out


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_map(hunk: Hunk, region: list[tuple[str, str]]) -> dict[str, str]:
    """The model's indentation → the file's, from the old lines matched against the file."""
    mapping: dict[str, str] = {}
    for text, (content, _) in zip(hunk.old, region, strict=True):
        if text.strip() and content.strip():
            mapping.setdefault(_leading(text), _leading(content))
    return mapping


def _reindent(line: str, mapping: dict[str, str]) -> str:
    """An added line with the model's indentation translated into the file's."""
    if not line.strip() or not mapping:
        return line if line.strip() else ""
    indent = _leading(line)
    body = line[len(indent) :]
    if indent in mapping:
        return mapping[indent] + body
    prefixes = [known for known in mapping if indent.startswith(known)]
    if prefixes:
        known = max(prefixes, key=len)
        extra = indent[len(known) :]
        target = mapping[known]
        if "\t" in target and "\t" not in extra and known and "\t" not in known:
            # The file indents with tabs where the model used spaces: one tab per model level.
            width = len(known) // max(target.count("\t"), 1) or 4
            extra = "\t" * (len(extra) // width) + " " * (len(extra) % width)
        return target + extra + body
    # Less indented than any line the model matched: keep its depth relative to the shallowest.
    shallow = min(mapping, key=len)
    cut = len(shallow) - len(indent)
    target = mapping[shallow]
    return target[: max(len(target) - cut, 0)] + body


def _not_found_message(contents: list[str], old: list[str], where: str, at_end: bool) -> str:
    message = (
        f"{where}: its context and removed lines (those starting with a space or -) are not "
        "in the file"
        + (" at its end" if at_end else "")
        + "; read the file again and copy them exactly."
    )
    anchor = _nearest(contents, old)
    if anchor is None:
        return message + " No line of the file looks like them."
    first = max(anchor, 0)
    last = min(anchor + len(old), len(contents), first + _NEAR_LINES)
    quoted = [
        f"{number + 1:>6}\t{_clip(contents[number], _NEAR_LINE_CHARS)}"
        for number in range(first, max(last, first + 1))
    ]
    message += " The most similar lines are:\n" + "\n".join(quoted)
    for offset, text in enumerate(old):
        number = anchor + offset
        if 0 <= number < len(contents) and _collapse(contents[number]) != _collapse(text):
            message += (
                f"\nFirst difference, line {number + 1}: the file has "
                f"{_clip(contents[number], 100)!r}, the hunk has {_clip(text, 100)!r}"
            )
            break
    return message


def _nearest(contents: list[str], old: list[str]) -> int | None:
    """The line where the lines most like `old` would start, or None when nothing is close.

    Each line of `old` votes for a start: 1 for every file line equal to it once whitespace is
    collapsed, and, for a few of its longest lines, the difflib ratio of the file lines that
    share its rarest words (identifiers split at `_` and case changes, weighted by how few lines
    hold them). Words narrow the field before difflib runs, so a large file stays cheap.
    """
    probes = [(index, _collapse(line)) for index, line in enumerate(old) if line.strip()]
    if not probes:
        return None
    scores: dict[int, float] = {}
    wanted: dict[str, list[int]] = {}
    for index, key in probes:
        wanted.setdefault(key, []).append(index)
    collapsed = [_collapse(line) for line in contents]
    for number, key in enumerate(collapsed):
        for index in wanted.get(key, ()):
            scores[number - index] = scores.get(number - index, 0.0) + 1.0
    words = [_words(line) for line in collapsed]
    frequency: dict[str, int] = {}
    for have in words:
        for word in have:
            frequency[word] = frequency.get(word, 0) + 1
    total = len(words) + 1
    longest = sorted(probes, key=lambda probe: -len(probe[1]))[:_NEAR_PROBES]
    for index, probe in longest:
        weights = {word: math.log(total / (frequency.get(word, 0) + 1)) for word in _words(probe)}
        if not weights:
            continue
        ranked = heapq.nlargest(
            _NEAR_TOP,
            (
                (sum(weights[word] for word in have & weights.keys()), -number)
                for number, have in enumerate(words)
                if not have.isdisjoint(weights)
            ),
        )
        matcher = difflib.SequenceMatcher(None, "", probe[:_NEAR_LINE_CHARS], autojunk=False)
        for _, negative in ranked:
            number = -negative
            if collapsed[number] == probe:
                continue  # already counted as equal
            matcher.set_seq1(collapsed[number][:_NEAR_LINE_CHARS])
            ratio = matcher.ratio()
            if ratio >= _NEAR_CUTOFF:
                scores[number - index] = scores.get(number - index, 0.0) + ratio
    if not scores:
        return None
    return max(scores, key=lambda start: (scores[start], -start))


def _words(line: str) -> frozenset[str]:
    """The words of a line, identifiers split into their parts, lower case."""
    return frozenset(map(str.lower, _WORD.findall(line)))


def _patch_error(failures: Sequence[HunkFailure]) -> PatchError:
    if len(failures) == 1:
        head = "apply_patch: nothing was changed, because one part of the patch failed:"
    else:
        head = (
            f"apply_patch: nothing was changed, because {len(failures)} parts of the patch failed:"
        )
    body = "\n".join(f"- {failure.message}" for failure in failures)
    tail = "Fix these and send the whole patch again (every file, not only the failed hunks)."
    return PatchError(f"{head}\n{body}\n{tail}", reason=failures[0].reason, failures=failures)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Formatting


def _hunk_lines(hunk: Hunk) -> list[str]:
    """A hunk's body lines with their ops and `\\ No newline` markers."""
    last_old = max((i for i, (op, _) in enumerate(hunk.lines) if op != "+"), default=-1)
    last_new = max((i for i, (op, _) in enumerate(hunk.lines) if op != "-"), default=-1)
    out: list[str] = []
    for i, (op, text) in enumerate(hunk.lines):
        out.append(op + text)
        if (i == last_old and hunk.old_no_eol) or (i == last_new and hunk.new_no_eol):
            out.append(NO_EOL_MARKER)
    return out


def _hunk_header(hunk: Hunk, delta: int) -> list[str]:
    out = [f"@@ {anchor}" for anchor in hunk.anchors]
    if hunk.old_start is not None:
        old_count = hunk.old_count if hunk.old_count is not None else len(hunk.old)
        new_count = len(hunk.new)
        first_new = hunk.old_start + (1 if old_count == 0 else 0) + delta
        new_start = first_new if new_count else max(first_new - 1, 0)
        heading = f" {hunk.heading}" if hunk.heading else ""
        out.append(f"@@ -{hunk.old_start},{old_count} +{new_start},{new_count} @@{heading}")
    elif not out:
        out.append("@@")
    return out


def _format_diff(patches: Sequence[FilePatch]) -> str:
    out: list[str] = []
    for patch in patches:
        new_path = patch.move_to or patch.path
        out.append(f"diff --git a/{patch.path} b/{new_path}")
        if patch.kind == "add":
            out.append("new file mode 100644")
        elif patch.kind == "delete":
            out.append("deleted file mode 100644")
        elif patch.move_to is not None:
            out += [f"rename from {patch.path}", f"rename to {patch.move_to}"]
        if not patch.hunks:
            continue
        out.append("--- /dev/null" if patch.kind == "add" else f"--- a/{patch.path}")
        out.append("+++ /dev/null" if patch.kind == "delete" else f"+++ b/{new_path}")
        delta = 0
        for hunk in patch.hunks:
            out += _hunk_header(hunk, delta)
            out += _hunk_lines(hunk)
            delta += len(hunk.new) - len(hunk.old)
    return "".join(line + "\n" for line in out)


def _format_envelope(patches: Sequence[FilePatch]) -> str:
    out = ["*** Begin Patch"]
    for patch in patches:
        if patch.kind == "add":
            out.append(f"*** Add File: {patch.path}")
            for hunk in patch.hunks:
                out += _hunk_lines(hunk)
            continue
        if patch.kind == "delete":
            out.append(f"*** Delete File: {patch.path}")
            continue
        out.append(f"*** Update File: {patch.path}")
        if patch.move_to is not None:
            out.append(f"*** Move to: {patch.move_to}")
        delta = 0
        for hunk in patch.hunks:
            out += _hunk_header(hunk, delta)
            out += _hunk_lines(hunk)
            if hunk.at_end:
                out.append("*** End of File")
            delta += len(hunk.new) - len(hunk.old)
    out.append("*** End Patch")
    return "".join(line + "\n" for line in out)
