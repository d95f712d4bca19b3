"""The model's `edit_file(path, old, new)`: the file's new text.

`plan_edit` computes a file's new text: `old` must occur exactly once, and line endings,
indentation and typographic punctuation are forgiven only when that still leaves exactly one
place (`plain_punctuation` is the punctuation rule, shared with `apply_patch`). The editor gets it
as minimal text edits (`lsp_agent.lsp.positions`). Everything here is pure: no I/O, no pygls.
"""

from __future__ import annotations

import bisect
import difflib
import math
import re
import unicodedata
from collections.abc import Callable

from lsp_agent.errors import ToolError
from lsp_agent.text import (
    EOL,
    changed_lines,
    equal_ends,
    inside_crlf,
    line_content,
    line_offsets,
    line_starts,
    split_lines,
)

_LONE_LF = re.compile(r"(?<!\r)\n")
_LONE_CR = re.compile(r"\r(?!\n)")

_MAX_LINE_NUMBERS = 20
"""How many line numbers an `ambiguous` message lists."""
_NEAR_LINES = 8
"""How many lines a `not_found` message quotes at most."""
_NEAR_LINE_CHARS = 200
"""Quoted lines (and lines compared for similarity) are cut to this many characters."""
_NEAR_PROBES = 5
"""How many lines of `old` are looked up when searching for the most similar place."""
_NEAR_CUTOFF = 0.5
"""Lines less similar than this (difflib ratio) are not counted as near."""

_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u2007\u202f", " "),
        **dict.fromkeys("\u200b\ufeff", ""),
        "\u2026": "...",
    }
)
"""Typographic quotes, dashes, ellipsis and spaces as the ASCII a model types for them."""


def plain_punctuation(text: str) -> str:
    """`text` as a model retypes it: curly quotes, dashes, `…` and odd spaces as ASCII, in NFC.

    Quotes ‘’‚‛′ become `'` and “”„‟″«» `"`; the dashes and the minus sign `-`; the ellipsis
    `...`; non-breaking and figure spaces a space; zero-width spaces and BOMs disappear. NFC
    comes last, so a base letter and its accent compose even when a zero-width space split them.
    """
    return unicodedata.normalize("NFC", text.translate(_PUNCTUATION))


def plan_edit(text: str, old: str, new: str, *, path: str = "the file") -> str:
    """Return `text` with the single occurrence of `old` replaced by `new`.

    Tried in order, and used only when exactly one place matches at that level: the exact text;
    the exact text with the model's LF line endings turned into the file's CRLF (or CR); whole
    lines compared without trailing whitespace; whole lines compared without any surrounding
    whitespace (then `new` is re-indented to the file's indentation); whole lines compared that
    way after `plain_punctuation` (curly quotes, dashes, `…`, non-breaking spaces as ASCII). An
    ambiguous level stops the search: a looser one is never tried. The replacement keeps the
    file's line endings.

    At the punctuation level the model could not see the file's own characters, so a line of
    `new` that equals its line of `old` once both are made plain (same indentation, same text)
    is written as the file has it: only the lines the model changed are written as it typed
    them (re-indented), and a `new` equal to `old` changes nothing. Raises `ToolError`
    (`not_found`, `ambiguous`, `empty_old`) with a message that tells the model what to do next.
    """
    if not old:
        raise ToolError(
            f"old is empty: pass the exact text to replace in {path}, copied from read_file "
            "without the line numbers; to create a new file use write_file instead.",
            reason="empty_old",
        )

    found = _occurrences(text, old)
    if len(found) == 1:
        start, end = found[0], found[0] + len(old)
        return text[:start] + _with_local_eol(new, old, text, start, end) + text[end:]
    if found:
        raise _ambiguous(text, found, path, how=None)

    if "\n" in old and "\r" not in old:
        for eol in _other_eols(text):
            converted = old.replace("\n", eol)
            found = _occurrences(text, converted)
            if len(found) == 1:
                start, end = found[0], found[0] + len(converted)
                return text[:start] + _LONE_LF.sub(eol, new) + text[end:]
            if found:
                name = "CRLF" if eol == "\r\n" else "CR"
                raise _ambiguous(text, found, path, how=f"once its line endings are made {name}")

    if old.strip():
        lines = split_lines(text)
        contents = [line_content(line) for line in lines]
        old_lines = EOL.split(old)
        old_ends_with_eol = len(old_lines) > 1 and old_lines[-1] == ""
        if old_ends_with_eol:
            old_lines.pop()
        # (compare lines by, re-indent new, keep the lines the model left alone, how it matched)
        levels: list[tuple[Callable[[str], str], bool, bool, str]] = [
            (str.rstrip, False, False, "when trailing whitespace is ignored"),
            (str.strip, True, False, "when indentation is ignored"),
        ]
        # On ASCII both sides the punctuation level would repeat the indentation level.
        if not (text.isascii() and old.isascii()):
            levels.append(
                (_plain_key, True, True, "when typographic quotes, dashes and spaces are plain")
            )
        for key, reindent, keep, how in levels:
            if not any(key(line) for line in old_lines):
                continue  # old made only of zero-width characters: it would match blank lines
            matches = _line_matches(contents, old_lines, key)
            if len(matches) == 1:
                return _replace_lines(
                    text,
                    lines,
                    matches[0],
                    old_lines,
                    old_ends_with_eol,
                    new,
                    reindent=reindent,
                    keep_unchanged=keep,
                )
            if matches:
                offsets = line_offsets(lines)
                raise _ambiguous(text, [offsets[i] for i in matches], path, how=how)

    raise _not_found(text, old, path)


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


def _line_matches(
    contents: list[str], old_lines: list[str], key: Callable[[str], str]
) -> list[int]:
    """Indexes of the lines where `old_lines` match whole lines, once both are passed to `key`."""
    want = [key(line) for line in old_lines]
    keys = [key(line) for line in contents]
    count = len(want)
    return [
        i
        for i in range(len(keys) - count + 1)
        if keys[i] == want[0] and keys[i : i + count] == want
    ]


def _plain_key(line: str) -> str:
    """How the punctuation level compares lines: plain punctuation, no surrounding whitespace."""
    return plain_punctuation(line).strip()


def _replace_lines(
    text: str,
    lines: list[str],
    first: int,
    old_lines: list[str],
    old_ends_with_eol: bool,
    new: str,
    *,
    reindent: bool,
    keep_unchanged: bool = False,
) -> str:
    """Replace the lines matched by `old_lines` at `first`, in the file's line endings.

    With `keep_unchanged`, the lines of `new` that the model left as they were in `old` are the
    file's own lines (see `_kept_lines`).
    """
    region = lines[first : first + len(old_lines)]
    start = line_offsets(lines)[first]
    last_eol = region[-1][len(line_content(region[-1])) :]
    end = start + sum(len(line) for line in region)
    if not old_ends_with_eol:
        end -= len(last_eol)
    eol = next(
        (line[len(line_content(line)) :] for line in region if line != line_content(line)),
        _eol_near(text, start, end),
    )
    new_lines = EOL.split(new)
    new_ends_with_eol = len(new_lines) > 1 and new_lines[-1] == ""
    if new_ends_with_eol:
        new_lines.pop()
    model_lines = new_lines
    region_contents = [line_content(line) for line in region]
    if reindent:
        new_lines = _reindent(new_lines, old_lines, region_contents, lines)
    if keep_unchanged:
        for j, i in _kept_lines(old_lines, model_lines).items():
            new_lines[j] = region_contents[i]
    replacement = eol.join(new_lines)
    # A file without a final newline keeps none, even when the model's old and new end in one.
    if new_ends_with_eol and not (old_ends_with_eol and not last_eol):
        replacement += eol
    return text[:start] + replacement + text[end:]


def _kept_lines(old_lines: list[str], new_lines: list[str]) -> dict[int, int]:
    """Which lines of `new` (index → index in `old`) the model left unchanged.

    Lines are compared after `plain_punctuation` without trailing whitespace, indentation
    included: both are in the model's indentation, and a line it moved deeper did change.
    Equal leading and trailing lines pair up in place first, so a repeated line pairs with its
    own copy; the middle is aligned as `text_edits` aligns lines.
    """
    a = [plain_punctuation(line).rstrip() for line in old_lines]
    b = [plain_punctuation(line).rstrip() for line in new_lines]
    head, tail = equal_ends(a, b)
    kept = {j: j for j in range(head)}
    kept.update({len(b) - 1 - k: len(a) - 1 - k for k in range(tail)})
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    i = j = 0
    for i1, i2, _, j2 in [
        *changed_lines(middle_a, middle_b),
        (len(middle_a), 0, len(middle_b), 0),
    ]:
        # Between two changed ranges the lines are equal, pair by pair.
        for step in range(i1 - i):
            kept[head + j + step] = head + i + step
        i, j = i2, j2
    return kept


def _leading(line: str) -> str:
    """A line's indentation (spaces and tabs)."""
    return line[: len(line) - len(line.lstrip(" \t"))]


def _reindent(
    new_lines: list[str], old_lines: list[str], region: list[str], lines: list[str]
) -> list[str]:
    """Move `new_lines` by the indentation difference between the file and `old`.

    The difference is taken at the first non-blank line of `old`; the result uses the file's
    indentation character (tabs or spaces). Whitespace-only lines become empty.
    """
    first = next(i for i, line in enumerate(old_lines) if line.strip())
    old_base, file_base = _leading(old_lines[first]), _leading(region[first])
    file_tabs = _uses_tabs(region, lines)
    model_indents = [_leading(line) for line in (*old_lines, *new_lines) if line.strip()]
    model_tabs = any("\t" in indent for indent in model_indents)
    unit = _indent_unit(old_lines, region, model_indents, lines, file_tabs, model_tabs)
    same_style = file_tabs == model_tabs

    def columns(indent: str) -> int:
        return sum(unit if char == "\t" else 1 for char in indent)

    def render(width: int) -> str:
        if file_tabs:
            return "\t" * (width // unit) + " " * (width % unit)
        return " " * width

    old_width, file_width = columns(old_base), columns(file_base)
    out: list[str] = []
    for line in new_lines:
        body = line.lstrip(" \t")
        if not body:
            out.append("")
            continue
        indent = line[: len(line) - len(body)]
        target = file_width + columns(indent) - old_width
        if target >= file_width:
            if same_style and indent.startswith(old_base):
                extra = indent[len(old_base) :]
            else:
                extra = render(target - file_width)
            out.append(file_base + extra + body)
        else:
            out.append(render(max(target, 0)) + body)
    return out


def _uses_tabs(region: list[str], lines: list[str]) -> bool:
    """Whether the file indents with tabs: the matched lines decide, else the first indented one."""
    for line in (*region, *lines):
        indent = _leading(line)
        if indent and line.strip():
            return indent[0] == "\t"
    return False


def _indent_unit(
    old_lines: list[str],
    region: list[str],
    model_indents: list[str],
    lines: list[str],
    file_tabs: bool,
    model_tabs: bool,
) -> int:
    """How many spaces one tab stands for when the model and the file indent differently."""
    if file_tabs == model_tabs:
        return 4
    pairs = [
        (_leading(o), _leading(f))
        for o, f in zip(old_lines, region, strict=True)
        if o.strip() and f.strip()
    ]
    if pairs:
        old_base, file_base = pairs[0]
        for old_indent, file_indent in pairs[1:]:
            spaces, tabs = (
                (len(old_indent) - len(old_base), file_indent.count("\t") - file_base.count("\t"))
                if file_tabs
                else (
                    len(file_indent) - len(file_base),
                    old_indent.count("\t") - old_base.count("\t"),
                )
            )
            if tabs and spaces % tabs == 0 and 0 < spaces // tabs <= 8:
                return spaces // tabs
    spaced = model_indents if file_tabs else [_leading(line) for line in lines]
    widths = [len(indent) for indent in spaced if indent and "\t" not in indent]
    common = math.gcd(*widths) if widths else 0
    # Widths 8 and 16 alone could be one level of 8 or two of 4; the usual unit wins.
    return next((unit for unit in (4, 2, 3) if common and common % unit == 0), 4)


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
    message = (
        f"old text not found in {path}: read the file again; whitespace and indentation must match."
    )
    near = _nearest_lines(text, old)
    if near:
        message += f"\nThe most similar lines in {path} are:\n{near}"
    else:
        message += f"\nNo line of {path} looks like the lines of old."
    return ToolError(message, reason="not_found")


def _nearest_lines(text: str, old: str) -> str:
    """The lines of `text` most like `old`, numbered from 1; empty when nothing is close."""
    contents = [line_content(line) for line in split_lines(text)]
    old_lines = EOL.split(old.strip("\r\n"))
    probes = sorted(
        ((i, line.strip()[:_NEAR_LINE_CHARS]) for i, line in enumerate(old_lines) if line.strip()),
        key=lambda probe: -len(probe[1]),
    )[:_NEAR_PROBES]
    candidates = [line.strip()[:_NEAR_LINE_CHARS] for line in contents]
    scores: dict[int, float] = {}
    matcher = difflib.SequenceMatcher(autojunk=False)
    for index, probe in probes:
        # seq2 is the one difflib caches: set it once per probe, as get_close_matches does.
        matcher.set_seq2(probe)
        # A line much longer than the probe is compared by its beginning: old may be part of it.
        width = len(probe) + max(10, len(probe) // 2)
        for number, candidate in enumerate(candidates):
            matcher.set_seq1(candidate[:width])
            if (
                matcher.real_quick_ratio() >= _NEAR_CUTOFF
                and matcher.quick_ratio() >= _NEAR_CUTOFF
                and (ratio := matcher.ratio()) >= _NEAR_CUTOFF
            ):
                anchor = number - index
                scores[anchor] = scores.get(anchor, 0.0) + ratio
    if not scores:
        return ""
    anchor = max(scores, key=lambda a: (scores[a], -a))
    first = max(anchor, 0)
    last = min(anchor + len(old_lines), len(contents), first + _NEAR_LINES)
    quoted: list[str] = []
    for number in range(first, max(last, first + 1)):
        line = contents[number]
        if len(line) > _NEAR_LINE_CHARS:
            line = line[:_NEAR_LINE_CHARS] + "…"
        quoted.append(f"{number + 1:>6}\t{line}")
    return "\n".join(quoted)
