"""Reading the model's patch: a unified diff or a `*** Begin Patch` envelope, into `FilePatch`es.

A unified diff is read git's way (`a/` `b/` prefixes, `/dev/null` for added and deleted files,
`diff --git` blocks with `rename from`/`rename to`, `\\ No newline at end of file`, hunk counts
trusted only as far as the lines fit). The envelope is read Codex's way: `*** Add File:`,
`*** Update File:` with `*** Move to:`, `*** Delete File:`, hunks under `@@` lines that may
carry a line of context instead of numbers, `*** End of File`; marker lines count with spaces
around them, and anything before `*** Begin Patch` or after `*** End Patch` (a heredoc line, a
Markdown fence) is not part of the patch. Pure: text in, patches or a `PatchError` out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from lsp_agent.tools.matching import clip
from lsp_agent.tools.patch.model import FilePatch, Hunk, Line, PatchError

_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?: ?(.*))?$")
_FILE_MARKERS = ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:")
_MARKERS = ("*** Begin Patch", "*** End Patch", "*** End of File")


def parse_patch(text: str) -> list[FilePatch]:
    """The file patches of a unified diff or a `*** Begin Patch` envelope, in order.

    A surrounding Markdown code fence is ignored. Raises `PatchError` (reason `bad_patch`) with
    the line number and what was expected when the text is neither shape or is malformed.
    """
    lines, endings = _patch_lines(text)
    if any(line.strip() == "*** Begin Patch" for line in lines):
        patches = _EnvelopeParser(lines, endings).parse()
    else:
        patches = _DiffParser(lines, endings).parse()
    if not patches:
        raise _bad(
            "no file changes found: send a unified diff (--- a/path, +++ b/path, @@ hunks) or "
            "a patch between *** Begin Patch and *** End Patch"
        )
    return patches


def _patch_lines(text: str) -> tuple[list[str], list[str]]:
    """The patch's lines without their endings, and each line's own ending.

    A patch whose lines all end in CRLF was sent that way (its endings say nothing, and are
    read as LF); in a patch that mixes them (git's diff of a file that mixes them), each line
    keeps its own ending, for the lines it adds. A Markdown fence around the whole text goes.
    """
    raw = text.split("\n")
    last = raw.pop()
    carriage = [line.endswith("\r") for line in raw]
    lines = [line[:-1] if cr else line for line, cr in zip(raw, carriage, strict=True)]
    mixed = any(carriage) and not all(carriage)
    endings = ["\r\n" if cr else "\n" for cr in carriage] if mixed else [""] * len(lines)
    if last:
        lines.append(last)
        endings.append("")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    end = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    if (
        first is not None
        and end is not None
        and first < end
        and lines[first].startswith("```")
        and lines[end].strip() == "```"
    ):
        lines, endings = lines[first + 1 : end], endings[first + 1 : end]
    return lines, endings


def _bad(message: str) -> PatchError:
    return PatchError(
        f"apply_patch: the patch could not be read: {message}. Nothing was changed.",
        reason="bad_patch",
    )


def _marker(line: str) -> str | None:
    """The envelope marker on `line`, spaces around it ignored (as Codex reads them)."""
    stripped = line.strip()
    if stripped in _MARKERS or stripped.startswith(_FILE_MARKERS):
        return stripped
    return None


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
    endings: list[str] = field(default_factory=list)
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
            endings=tuple(self.endings) if any(self.endings) else (),
        )

    def add(self, op: str, text: str, ending: str) -> None:
        self.lines.append((op, text))
        self.endings.append(ending)


class _BodyReader:
    """Reads hunk bodies; the two patch shapes differ only in what ends a hunk."""

    def __init__(self, lines: list[str], endings: list[str]) -> None:
        self.lines = lines
        self.endings = endings
        """Each line's own ending, "" unless the patch mixes them (see `_patch_lines`)."""
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
            hunk.add(op, text, self.endings[self.i])
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
                    f"line {self.i + 1}: a hunk ({clip(line, 40)}) before any file header; "
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
            raise _bad(f"line {start + 1}: cannot read the file names of {clip(names, 80)!r}")
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
        line = self.lines[i]
        return _marker(line) is not None or line.startswith(("*** ", "@@"))

    def parse(self) -> list[FilePatch]:
        lines = self.lines
        while lines[self.i].strip() != "*** Begin Patch":
            self.i += 1
        self.i += 1
        patches: list[FilePatch] = []
        while True:
            if self.i >= len(lines):
                raise _bad(self._no_end())
            line = lines[self.i]
            marker = _marker(line) or ""
            if marker == "*** End Patch":
                return patches
            if not line.strip():
                self.i += 1
            elif marker.startswith("*** Add File:"):
                patches.append(self._add(_clean_path(marker[len("*** Add File:") :], "")))
            elif marker.startswith("*** Delete File:"):
                patches.append(FilePatch("delete", _clean_path(marker[16:], "")))
                self.i += 1
            elif marker.startswith("*** Update File:"):
                patches.append(self._update(_clean_path(marker[len("*** Update File:") :], "")))
            else:
                raise _bad(
                    f"line {self.i + 1} ({clip(line, 60)!r}): expected *** Add File:, "
                    "*** Update File:, *** Delete File: or *** End Patch"
                )

    def _no_end(self) -> str:
        """Why a patch without `*** End Patch` is refused, without inviting the same patch
        again: it may be whole and only miss its last line, or cut off on the way."""
        last = next((i for i in range(len(self.lines) - 1, -1, -1) if self.lines[i].strip()), 0)
        return (
            f"there is no *** End Patch line (the text stops at line {last + 1}: "
            f"{clip(self.lines[last].strip(), 60)!r}). If that is the end of your patch, "
            "end it with a line *** End Patch. If it is not, the patch was cut off on the way: "
            "send the changes again in smaller patches (a few files or hunks per call) rather "
            "than the same patch"
        )

    def _add(self, path: str) -> FilePatch:
        lines = self.lines
        self.i += 1
        body = _HunkBuilder()
        while self.i < len(lines) and not self.boundary(self.i):
            line = lines[self.i]
            if line.startswith("+"):
                body.add("+", line[1:], self.endings[self.i])
            elif line.startswith("\\"):
                body.marker()
            elif line == "":
                j = self.i
                while j < len(lines) and lines[j] == "":
                    j += 1
                if j >= len(lines) or not lines[j].startswith("+"):
                    self.i = j
                    break
                body.add("+", "", self.endings[self.i])
            else:
                raise _bad(
                    f"line {self.i + 1}: in *** Add File: {path}, every line of the new file "
                    f"starts with + (got {clip(line, 40)!r})"
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
        moved = _marker(lines[self.i]) if self.i < len(lines) else None
        if moved is not None and moved.startswith("*** Move to:"):
            move_to = _clean_path(moved[len("*** Move to:") :], "")
            self.i += 1
        hunks: list[Hunk] = []
        while self.i < len(lines):
            line = lines[self.i]
            if _marker(line) == "*** End of File":
                if not hunks:
                    raise _bad(f"line {self.i + 1}: *** End of File before any hunk of {path}")
                hunks[-1] = replace(hunks[-1], at_end=True)
                self.i += 1
                continue
            if self.boundary(self.i) and not line.startswith("@@"):
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
                        f"line {self.i + 1} ({clip(lines[self.i], 60)!r}) in *** Update File: "
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
