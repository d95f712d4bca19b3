"""The model's `edit_file(path, old, new)`: the file's new text.

`plan_edit` replaces the one place `old` names. `old` is first looked for as exact text
(anywhere, the middle of a line included), then with the model's LF line breaks read as the
file's CRLF (or CR); when it is not there as typed, its lines go through the matcher that
`apply_patch` uses too (`matching`: the same forgiving levels, the same refusals, the same
re-indent and line endings). Two more slips are taken when they give one result: a Markdown
fence around `old` (and `new`), and `...` lines standing for unchanged lines left out. The
editor gets the result as minimal text edits (`lsp_agent.lsp.positions`). Everything here is
pure: no I/O, no LSP.
"""

from __future__ import annotations

import bisect
import re

from lsp_agent.errors import ToolError
from lsp_agent.text import EOL, changed_lines, equal_ends, inside_crlf, line_starts
from lsp_agent.tools import matching
from lsp_agent.tools.matching import Ambiguous, FileLines, Level, NotFound, Op, locate

_LONE_LF = re.compile(r"(?<!\r)\n")
_LONE_CR = re.compile(r"\r(?!\n)")

_MAX_LINE_NUMBERS = 20
"""How many line numbers an `ambiguous` message lists."""


def plan_edit(text: str, old: str, new: str, *, path: str = "the file") -> str:
    """Return `text` with the single occurrence of `old` replaced by `new`.

    Tried in order, and used only when exactly one place matches at that level: the exact
    text; the exact text with the model's LF line endings turned into the file's CRLF (or CR);
    then `old`'s lines through `matching.locate` (exact lines, trailing whitespace ignored,
    indentation ignored, whitespace runs ignored, typographic punctuation as ASCII; a stray
    blank first line dropped). An ambiguous level stops the search: a looser one is never
    tried. Only when nothing matched: `old` without a Markdown fence around it, then `old`'s
    parts between `...` lines, each found once and in order. Raises `ToolError` (`not_found`,
    `ambiguous`, `empty_old`) with a message that tells the model what to do next.
    """
    if not old:
        raise ToolError(
            f"old is empty: pass the exact text to replace in {path}, copied from read_file "
            "without the line numbers; to create a new file use write_file instead.",
            reason="empty_old",
        )
    try:
        return _plan(text, old, new, path)
    except NotFound:
        pass
    unfenced = _unfenced(old)
    if unfenced is not None:
        new = _unfenced(new) or new
        try:
            return _plan(text, unfenced, new, path)
        except NotFound:
            old = unfenced
    elided = _elided(text, old, new, path)
    if elided is not None:
        return elided
    raise _not_found(text, old, path)


def _plan(text: str, old: str, new: str, path: str) -> str:
    """`plan_edit` without the slips taken last; raises `NotFound` when nothing matched."""
    found = _occurrences(text, old)
    if len(found) == 1:
        start, end = found[0], found[0] + len(old)
        skip = _spurious_break(text, start, old, new)
        start, old = start + skip, old[skip:]
        return text[:start] + _with_local_eol(new, old, text, start, end) + text[end:]
    if found:
        raise _ambiguous(text, found, path, how=None)

    if "\n" in old and "\r" not in old:
        for eol in _other_eols(text):
            converted = old.replace("\n", eol)
            found = _occurrences(text, converted)
            if len(found) == 1:
                start, end = found[0], found[0] + len(converted)
                start += _spurious_break(text, start, converted, _LONE_LF.sub(eol, new))
                return text[:start] + _LONE_LF.sub(eol, new) + text[end:]
            if found:
                name = "CRLF" if eol == "\r\n" else "CR"
                raise _ambiguous(text, found, path, how=f"once its line endings are made {name}")

    if not old.strip():
        raise NotFound  # blank old is matched exactly or not at all: it fits any blank line
    file = FileLines(text)
    old_lines, old_eol = _model_lines(old)
    new_lines, new_eol = _model_lines(new)
    try:
        match = locate(file, old_lines)
    except Ambiguous as many:
        offsets = [file.offset(place) for place in many.places]
        raise _ambiguous(text, offsets, path, how=many.level.how) from None
    if match.skipped:
        old_lines = old_lines[match.skipped :]
        if new_lines and not new_lines[0].strip():
            new_lines = new_lines[1:]
    return _replace(file, match.start, match.level, old_lines, old_eol, new_lines, new_eol)


def _spurious_break(text: str, start: int, old: str, new: str) -> int:
    """How many characters of `old`'s start to leave out of the replaced text: its leading line
    break, when that break is the end of a line above (not a blank line of the file) and `new`
    does not start with one. The model wrote a blank first line that is not there (aider's
    "spurious leading blank line"); taken literally, the edit would join that line to `new`'s
    first line."""
    if start == 0 or text[start - 1] in "\r\n":
        return 0
    rest = old.lstrip("\r\n")
    brk = "\r\n" if old.startswith("\r\n") else old[:1]
    if rest == old or not rest or new.startswith(brk):
        return 0  # no leading break, or only breaks (then the break itself is the edit)
    return len(brk)


def _model_lines(text: str) -> tuple[list[str], bool]:
    """The model's text as lines without endings, and whether it ends with a line break."""
    if not text:
        return [], False
    lines = EOL.split(text)
    if len(lines) > 1 and lines[-1] == "":
        return lines[:-1], True
    return lines, False


def _replace(
    file: FileLines,
    start: int,
    level: Level,
    old_lines: list[str],
    old_eol: bool,
    new_lines: list[str],
    new_eol: bool,
) -> str:
    """The file's text with its lines from `start` (matched by `old_lines`) rewritten.

    As with an exact match, a final line break on one side only counts: `new` without one
    where `old` had one joins its last line to the line that follows, and the other way round
    leaves a line break more. A file without a final line break keeps none.
    """
    end = start + len(old_lines)
    lines = matching.rewrite(
        file, start, _body(old_lines, new_lines, level), level, model=[*old_lines, *new_lines]
    )
    if old_eol and not new_eol and lines:
        lines[-1] = (lines[-1][0], "")
    elif not old_eol and (new_eol or not lines):
        lines.append(("", file.endings[end - 1]))
    matching.seal(lines, file.ending_near(start))
    first = file.offset(start)
    stop = first + sum(len(c) + len(e) for c, e in file.lines(start, end))
    return file.text[:first] + "".join(c + e for c, e in lines) + file.text[stop:]


def _body(old: list[str], new: list[str], level: Level) -> list[Op]:
    """`old` → `new` as unchanged, removed and added lines.

    A line of `new` is unchanged when the model left its line of `old` as it was, as `level`
    reads lines (`Level.unchanged_key`): it is then written as the file has it. Equal leading
    and trailing lines pair up in place first, so a repeated line pairs with its own copy; the
    middle is aligned as `text_edits` aligns lines.
    """
    a = [level.unchanged_key(line) for line in old]
    b = [level.unchanged_key(line) for line in new]
    head, tail = equal_ends(a, b)
    kept = [(k, k) for k in range(head)]
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    i = j = 0
    for i1, i2, _, j2 in [
        *changed_lines(middle_a, middle_b),
        (len(middle_a), 0, len(middle_b), 0),
    ]:
        # Between two changed ranges the lines are equal, pair by pair.
        kept += [(head + i + step, head + j + step) for step in range(i1 - i)]
        i, j = i2, j2
    kept += [(len(a) - tail + k, len(b) - tail + k) for k in range(tail)]
    body: list[Op] = []
    i = j = 0
    for ki, kj in kept:
        body += [("-", line) for line in old[i:ki]]
        body += [("+", line) for line in new[j:kj]]
        body.append((" ", old[ki]))
        i, j = ki + 1, kj + 1
    body += [("-", line) for line in old[i:]]
    body += [("+", line) for line in new[j:]]
    return body


def _unfenced(text: str) -> str | None:
    """The text inside a Markdown code fence that wraps all of it; None when there is none."""
    lines = text.strip("\r\n").split("\n")
    if len(lines) < 2:
        return None
    opening, closing = lines[0].strip(), lines[-1].strip()
    if not (opening.startswith("```") and closing == "```" and "```" not in opening[3:]):
        return None
    inner = [line.removesuffix("\r") for line in lines[1:-1]]
    return "\n".join(inner) + "\n" if inner else None


def _elided(text: str, old: str, new: str, path: str) -> str | None:
    """`old` and `new` cut at their `...` lines (unchanged lines the model left out), each part
    of `old` found once, in order, and replaced by the same part of `new`; None when `old`
    has no such line. Raises `ToolError` when the parts do not fit."""
    old_lines, old_eol = _model_lines(old)
    new_lines, new_eol = _model_lines(new)
    old_parts = matching.split_elisions(old_lines)
    if old_parts is None:
        return None
    new_parts = matching.split_elisions(new_lines) or [(0, len(new_lines))]
    if len(new_parts) != len(old_parts):
        raise ToolError(
            f"old text not found in {path}; old has {len(old_parts) - 1} `...` line(s) standing "
            f"for unchanged lines, and new has {len(new_parts) - 1}: write `...` at the same "
            "places in both, or copy the whole text without `...`.",
            reason="not_found",
        )
    file = FileLines(text)
    placed: list[tuple[int, Level, list[str], list[str]]] = []
    for (a, b), (c, d) in zip(old_parts, new_parts, strict=True):
        part, replacement = old_lines[a:b], new_lines[c:d]
        if not any(line.strip() for line in part):
            if any(line.strip() for line in replacement):
                raise ToolError(
                    f"old text not found in {path}; a `...` line at the start or end of old "
                    "leaves no line to say where the new lines go: add the lines next to them.",
                    reason="not_found",
                )
            continue
        try:
            match = locate(file, part)
        except NotFound:
            return None
        except Ambiguous as many:
            offsets = [file.offset(place) for place in many.places]
            how = "for a part of old between its `...` lines"
            raise _ambiguous(text, offsets, path, how=how) from None
        if placed and match.start < placed[-1][0] + len(placed[-1][2]):
            raise ToolError(
                f"the parts of old between its `...` lines are not in this order in {path}: "
                "read the file again and send the parts in the order the file has them.",
                reason="not_found",
            )
        placed.append((match.start, match.level, part, replacement))
    for index in range(len(placed) - 1, -1, -1):
        start, level, part, replacement = placed[index]
        last = index == len(placed) - 1
        text = _replace(
            FileLines(text),
            start,
            level,
            part,
            old_eol if last else True,
            replacement,
            new_eol if last else True,
        )
    return text


def _occurrences(text: str, needle: str) -> list[int]:
    """Start offsets of every occurrence of `needle`, overlapping ones included.

    An occurrence that starts or ends between the CR and the LF of a CRLF pair does not count:
    `"\\nfoo"` is not in `"a\\r\\nfoo"` as far as a model is concerned, and replacing it there
    would leave a lone CR.
    """
    found: list[int] = []
    at = text.find(needle)
    while at >= 0:
        if not (inside_crlf(text, at) or inside_crlf(text, at + len(needle))):
            found.append(at)
        at = text.find(needle, at + 1)
    return found


def _other_eols(text: str) -> list[str]:
    """The line endings other than LF that `text` uses, CRLF first."""
    eols: list[str] = []
    if "\r\n" in text:
        eols.append("\r\n")
    if _LONE_CR.search(text):
        eols.append("\r")
    return eols


def _with_local_eol(new: str, old: str, text: str, start: int, end: int) -> str:
    """`new` with its LF line breaks written in the line ending used where it lands.

    Only when `old` had no line break at all: an `old` with line breaks matched exactly, so its
    line endings (and those of `new`) are the ones the model meant.
    """
    if "\n" not in new or "\n" in old or "\r" in old:
        return new
    eol = _eol_near(text, start, end)
    return new if eol == "\n" else _LONE_LF.sub(eol, new)


def _eol_near(text: str, start: int, end: int) -> str:
    """The line ending after `end`, or else the last one before `start`; LF in a one-line text."""
    match = EOL.search(text, end)
    if match:
        return match.group()
    last = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start))
    if last < 0:
        return "\n"
    if text[last] == "\r":
        return "\r\n" if text.startswith("\n", last + 1) else "\r"
    return "\r\n" if last > 0 and text[last - 1] == "\r" else "\n"


def _ambiguous(text: str, offsets: list[int], path: str, *, how: str | None) -> ToolError:
    """The error for an `old` that matches in several places."""
    starts = line_starts(text)
    numbers = sorted({bisect.bisect_right(starts, offset) for offset in offsets})
    shown = ", ".join(str(n) for n in numbers[:_MAX_LINE_NUMBERS])
    if len(numbers) > _MAX_LINE_NUMBERS:
        shown += f" and {len(numbers) - _MAX_LINE_NUMBERS} more"
    where = "line" if len(numbers) == 1 else "lines"
    message = (
        f"old text appears {len(offsets)} times in {path}: add surrounding lines to make it "
        f"unique. It starts at {where} {shown}."
    )
    if how:
        message += f" (It is not in the file exactly; these places match {how}.)"
    return ToolError(message, reason="ambiguous")


def _not_found(text: str, old: str, path: str) -> ToolError:
    """The error for an `old` that matches nowhere, quoting the most similar lines."""
    old_lines, _ = _model_lines(old.strip("\r\n") or old)
    near = matching.near_lines(FileLines(text), old_lines, what="old")
    return ToolError(
        f"old text not found in {path}: read the file again; whitespace and indentation must "
        f"match.\n{near}",
        reason="not_found",
    )
