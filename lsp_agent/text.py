"""Lines as LSP counts them, and line diffs: shared by the edit tools, the change tracker and the
editor adapters.

An LSP line ends at `\\n`, `\\r\\n` or a lone `\\r` (and at nothing else: not at a form feed, a
vertical tab or the Unicode separators `str.splitlines` also splits on); git's lines end at `\\n`
only. Everything here is pure.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
from collections.abc import Sequence

EOL = re.compile(r"\r\n|\r|\n")
"""An LSP line break."""


def split_lines(text: str) -> list[str]:
    """Lines with their terminators, split on `\\n`, `\\r\\n` and lone `\\r` as LSP does."""
    starts = line_starts(text)
    lines = [text[a:b] for a, b in itertools.pairwise(starts)]
    if starts[-1] < len(text):
        lines.append(text[starts[-1] :])
    return lines


def split_lf(text: str) -> list[str]:
    """Lines with their terminators, split on `\\n` only (as git does)."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def line_starts(text: str) -> list[int]:
    """Where each LSP line starts; a text ending in a line break has an empty last line."""
    return [0, *(match.end() for match in EOL.finditer(text))]


def line_offsets(lines: Sequence[str]) -> list[int]:
    """Offsets of the start of each line, plus the end of the text."""
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return offsets


def line_content(line: str) -> str:
    """A line without its terminator."""
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith(("\n", "\r")):
        return line[:-1]
    return line


def inside_crlf(text: str, offset: int) -> bool:
    """Whether `offset` falls between the CR and the LF of a CRLF pair."""
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


def equal_ends(a: Sequence[str], b: Sequence[str]) -> tuple[int, int]:
    """How many leading, then trailing, lines `a` and `b` share (not overlapping)."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def changed_lines(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The line ranges (a[i1:i2] becomes b[j1:j2]) that differ, in order.

    Lines found exactly once on each side are matched first (as patience diff does) and
    SequenceMatcher runs only between them: on a long stretch full of repeated lines (blank
    lines, closing braces) SequenceMatcher takes time quadratic in its length.
    """
    changed: list[tuple[int, int, int, int]] = []
    prev_i = prev_j = 0
    for i, j in [*unique_anchors(a, b), (len(a), len(b))]:
        if prev_i < i or prev_j < j:
            matcher = difflib.SequenceMatcher(None, a[prev_i:i], b[prev_j:j], autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                if tag != "equal":
                    changed.append((prev_i + i1, prev_i + i2, prev_j + j1, prev_j + j2))
        prev_i, prev_j = i + 1, j + 1
    return changed


def unique_anchors(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs (i, j) with a[i] == b[j] unique on both sides, the longest run increasing in both."""
    count_a: dict[str, int] = {}
    for line in a:
        count_a[line] = count_a.get(line, 0) + 1
    count_b: dict[str, int] = {}
    where_b: dict[str, int] = {}
    for j, line in enumerate(b):
        count_b[line] = count_b.get(line, 0) + 1
        where_b[line] = j
    pairs = [
        (i, where_b[line])
        for i, line in enumerate(a)
        if count_a[line] == 1 and count_b.get(line) == 1
    ]
    # Longest increasing subsequence of the j's (patience sorting), O(k log k).
    tops: list[int] = []
    top_index: list[int] = []
    back: list[int] = []
    for k, (_, j) in enumerate(pairs):
        pile = bisect.bisect_left(tops, j)
        back.append(top_index[pile - 1] if pile else -1)
        if pile == len(tops):
            tops.append(j)
            top_index.append(k)
        else:
            tops[pile] = j
            top_index[pile] = k
    chain: list[tuple[int, int]] = []
    k = top_index[-1] if top_index else -1
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    chain.reverse()
    return chain


def unified_diff(path: str, before: str, after: str) -> str:
    """A `git diff`-style unified diff of one file (a/ and b/ headers, 3 lines of context).

    Empty when nothing changed. A last line without a newline is followed by
    `\\ No newline at end of file`, as git and patch expect.
    """
    if before == after:
        return ""
    out: list[str] = []
    for line in difflib.unified_diff(
        split_lf(before), split_lf(after), f"a/{path}", f"b/{path}", n=3
    ):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)
