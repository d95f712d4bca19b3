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
from collections import Counter
from collections.abc import Sequence

EOL = re.compile(r"\r\n|\r|\n")
"""An LSP line break."""
_NOT_LSP_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""What `str.splitlines` also splits on, and LSP does not."""


def split_lines(text: str) -> list[str]:
    """Lines with their terminators, split on `\\n`, `\\r\\n` and lone `\\r` as LSP does."""
    if not _NOT_LSP_BREAKS.search(text):
        # Without those, str.splitlines splits as LSP does, at C speed (a large file's edit).
        return text.splitlines(keepends=True)
    starts = _break_starts(text)
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
    if _NOT_LSP_BREAKS.search(text):
        return _break_starts(text)
    starts = line_offsets(text.splitlines(keepends=True))
    if len(starts) > 1 and not text.endswith(("\n", "\r")):
        starts.pop()  # the last line has no break: nothing starts after it
    return starts


def _break_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in EOL.finditer(text))]


def line_offsets(lines: Sequence[str]) -> list[int]:
    """Offsets of the start of each line, plus the end of the text."""
    return list(itertools.accumulate(map(len, lines), initial=0))


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
    limit = min(len(a), len(b))
    # Binary searches on slice equality: C-speed comparisons, so a large file costs little.
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    head = low
    low, high = 0, limit - head
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid : len(a) - low] == b[len(b) - mid : len(b) - low]:
            low = mid
        else:
            high = mid - 1
    return head, low


def changed_lines(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The line ranges (a[i1:i2] becomes b[j1:j2]) that differ, in order.

    Lines found exactly once on each side are matched first (as patience diff does) and
    SequenceMatcher runs only between them: on a long stretch full of repeated lines (blank
    lines, closing braces) SequenceMatcher takes time quadratic in its length.
    """
    changed: list[tuple[int, int, int, int]] = []
    prev_i = prev_j = 0
    for i, j in [*unique_anchors(a, b), (len(a), len(b))]:
        # Between anchors the lines are most often equal: no matcher is needed to say so.
        if (prev_i < i or prev_j < j) and a[prev_i:i] != b[prev_j:j]:
            matcher = difflib.SequenceMatcher(None, a[prev_i:i], b[prev_j:j], autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                if tag != "equal":
                    changed.append((prev_i + i1, prev_i + i2, prev_j + j1, prev_j + j2))
        prev_i, prev_j = i + 1, j + 1
    return changed


def unique_anchors(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs (i, j) with a[i] == b[j] unique on both sides, the longest run increasing in both."""
    # Counter and dict(zip()) count at C speed: a large file's diff costs little.
    count_a, count_b = Counter(a), Counter(b)
    where_b = dict(zip(b, range(len(b)), strict=True))  # a line's last place in b
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
    return _without_moved_lines(chain, pairs, len(a), len(b))


def _without_moved_lines(
    chain: list[tuple[int, int]], pairs: list[tuple[int, int]], len_a: int, len_b: int
) -> list[tuple[int, int]]:
    """`chain` without the anchors that are lines moved across the text, and with the unique
    lines between the others that keep their place.

    Two lines that trade places (`a - b` above and `a + b` below, each swapped for the other)
    are both unique, and the longest increasing run may keep either one: anchoring on it would
    align everything between the two as deleted on one side and inserted on the other. An
    anchor whose shift (j - i) differs from its neighbours', when they agree with each other,
    is such a line: it is left to the matching between its neighbours, where it is one changed
    line among equal ones."""
    kept: list[tuple[int, int]] = []
    ends = [*chain, (len_a, len_b)]
    for index, (i, j) in enumerate(chain):
        before = kept[-1] if kept else (-1, -1)
        after = ends[index + 1]
        shift, shift_before, shift_after = j - i, before[1] - before[0], after[1] - after[0]
        if shift_before == shift_after != shift:
            continue
        kept.append((i, j))
    if len(kept) == len(chain):
        return chain
    # Between two anchors that agree, the unique lines that keep the same shift are anchors too
    # (the matching between them then runs on short stretches, as before).
    refilled: list[tuple[int, int]] = []
    bounds = [(-1, -1), *kept, (len_a, len_b)]
    at = 0
    for start, end in itertools.pairwise(bounds):
        shift = start[1] - start[0]
        if end[1] - end[0] == shift:
            while at < len(pairs) and pairs[at][0] <= start[0]:
                at += 1
            while at < len(pairs) and pairs[at][0] < end[0]:
                i, j = pairs[at]
                if j - i == shift:
                    refilled.append((i, j))
                at += 1
        if end[0] < len_a:
            refilled.append(end)
    return refilled


def unified_diff(path: str, before: str, after: str) -> str:
    """A `git diff`-style unified diff of one file (a/ and b/ headers, 3 lines of context).

    Empty when nothing changed. A last line without a newline is followed by
    `\\ No newline at end of file`, as git and patch expect. The lines are aligned by
    `changed_lines` (as the editor's text edits are), so a large file costs its changes.
    """
    if before == after:
        return ""
    a, b = split_lf(before), split_lf(after)
    head, tail = equal_ends(a, b)
    changes = [
        (head + i1, head + i2, head + j1, head + j2)
        for i1, i2, j1, j2 in changed_lines(a[head : len(a) - tail], b[head : len(b) - tail])
    ]
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for group in _hunk_groups(changes, _CONTEXT):
        first_i, first_j = group[0][0], group[0][2]
        last_i, last_j = group[-1][1], group[-1][3]
        before_context = min(_CONTEXT, first_i)
        after_context = min(_CONTEXT, len(a) - last_i)
        i_start, i_end = first_i - before_context, last_i + after_context
        j_start, j_end = first_j - before_context, last_j + after_context
        out.append(f"@@ -{_range(i_start, i_end)} +{_range(j_start, j_end)} @@\n")
        cursor = i_start
        for i1, i2, j1, j2 in group:
            out += [" " + line for line in a[cursor:i1]]
            out += ["-" + line for line in a[i1:i2]]
            out += ["+" + line for line in b[j1:j2]]
            cursor = i2
        out += [" " + line for line in a[cursor:i_end]]
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out
    )


_CONTEXT = 3
"""Lines of context around each change of a unified diff, as git shows them."""


def _hunk_groups(
    changes: list[tuple[int, int, int, int]], context: int
) -> list[list[tuple[int, int, int, int]]]:
    """The changes grouped into hunks: those less than 2 × `context` lines apart share one."""
    groups: list[list[tuple[int, int, int, int]]] = []
    for change in changes:
        if groups and change[0] - groups[-1][-1][1] <= 2 * context:
            groups[-1].append(change)
        else:
            groups.append([change])
    return groups


def _range(start: int, stop: int) -> str:
    """A hunk header's range, as difflib and git write it (`3`, `3,4`, `2,0`)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if not length else start + 1},{length}"
