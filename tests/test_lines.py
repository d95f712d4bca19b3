"""The line helpers of `lsp_agent.text` take their fast paths on large files (C-speed
`str.splitlines`, binary searches, a diff of the changed region only) and give exactly what their
plain definitions give, on any text."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lsp_agent.text import (
    changed_lines,
    equal_ends,
    line_offsets,
    line_starts,
    split_lf,
    split_lines,
    unified_diff,
    unique_anchors,
)

LSP_BREAK = re.compile(r"\r\n|\r|\n")
PIECES = ["a", "b", " ", "\n", "\r", "\r\n", "\x0c", "\x0b", "\u2028", "\x85", "é", "😀"]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def plain_split(text: str) -> list[str]:
    """LSP lines by their definition: each ends after `\\n`, `\\r\\n` or a lone `\\r`."""
    lines, at = [], 0
    for match in LSP_BREAK.finditer(text):
        lines.append(text[at : match.end()])
        at = match.end()
    if at < len(text):
        lines.append(text[at:])
    return lines


@settings(max_examples=500, deadline=None)
@given(texts)
@example("a\r\nb\rc\n")
@example("page\x0cbreak\nnext")
def test_lines_and_their_starts_follow_the_lsp_rule_and_git_lines_end_at_lf(text: str) -> None:
    lines = plain_split(text)
    assert split_lines(text) == lines
    starts = [0, *(m.end() for m in LSP_BREAK.finditer(text))]
    assert line_starts(text) == starts
    pieces = text.split("\n")
    git_lines = [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    assert split_lf(text) == git_lines
    assert line_offsets(lines) == [
        sum(len(line) for line in lines[:i]) for i in range(len(lines) + 1)
    ]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from("xyz"), max_size=12), st.lists(st.sampled_from("xyz"), max_size=12))
def test_equal_ends_counts_the_shared_head_then_the_shared_tail(a: list[str], b: list[str]) -> None:
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    assert equal_ends(a, b) == (head, tail)


def apply_unified(before: str, diff: str) -> str:
    """Apply a unified diff the way `patch` does, from its hunk headers' line numbers."""
    lines = split_lf(before)
    out: list[str] = []
    cursor = 0
    body = diff.splitlines(keepends=True)[2:]
    i = 0
    while i < len(body):
        header = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", body[i])
        assert header, body[i]
        start, count = int(header.group(1)), int(header.group(2) or 1)
        first = start - 1 if count else start
        out.extend(lines[cursor:first])
        cursor = first
        i += 1
        while i < len(body) and not body[i].startswith("@@"):
            line = body[i]
            if line.startswith("\\"):
                if body[i - 1][0] in " +":  # the new side's last line has no line break
                    out[-1] = out[-1].removesuffix("\n")
            elif line[0] in " +":
                out.append(line[1:])
            if line[0] in " -":
                cursor += 1
            i += 1
    out.extend(lines[cursor:])
    return "".join(out)


words = st.lists(st.sampled_from(["x\n", "y\n", "z\n", "w"]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(words, words)
@example("x\n" * 50 + "y\n" + "x\n" * 50, "x\n" * 50 + "z\n" + "x\n" * 50)
def test_a_diff_of_the_changed_region_applies_back_and_reads_like_git(
    before: str, after: str
) -> None:
    diff = unified_diff("f.txt", before, after)
    if before == after:
        assert diff == ""
        return
    assert diff.startswith("--- a/f.txt\n+++ b/f.txt\n@@ -")
    assert apply_unified(before, diff) == after
    # Hunks show three lines of context at their ends and at most six between changes.
    for hunk in re.split(r"^@@ .*\n", diff, flags=re.MULTILINE)[1:]:
        ops = "".join(line[0] for line in hunk.splitlines() if not line.startswith("\\"))
        runs = [len(run) for run in re.findall(r" +", ops)]
        assert len(ops) - len(ops.lstrip(" ")) <= 3
        assert len(ops) - len(ops.rstrip(" ")) <= 3
        assert all(run <= 6 for run in runs)


def test_a_change_deep_in_a_large_file_is_numbered_from_the_top() -> None:
    before = "".join(f"line {i}\n" for i in range(1, 50_001))
    after = before.replace("line 25000\n", "line twenty-five thousand\n")
    diff = unified_diff("big.txt", before, after)
    assert "@@ -24997,7 +24997,7 @@\n" in diff
    assert "-line 25000\n+line twenty-five thousand\n" in diff


@pytest.mark.parametrize(
    "between",
    ["\n" * 58, "    pass\n" * 58, "".join(f"    x{i} = {i}\n" for i in range(58))],
    ids=["blank lines", "repeated lines", "unique lines"],
)
def test_two_lines_that_trade_places_far_apart_are_two_changed_lines(between: str) -> None:
    """`a - b` becomes `a + b` in one function and the other way round sixty lines below: both
    lines are unique, and aligning on either would delete and re-insert everything between."""
    before = "def add(a, b):\n    return a - b\n" + between + "def sub(a, b):\n    return a + b\n"
    after = "def add(a, b):\n    return a + b\n" + between + "def sub(a, b):\n    return a - b\n"
    a, b = split_lines(before), split_lines(after)

    assert changed_lines(a, b) == [(1, 2, 1, 2), (61, 62, 61, 62)]
    assert all(a[i] == b[j] for i, j in unique_anchors(a, b))


@settings(max_examples=300, deadline=None)
@given(words, words)
def test_the_anchors_are_equal_lines_in_order_and_the_changes_rebuild_the_text(
    before: str, after: str
) -> None:
    a, b = split_lines(before), split_lines(after)
    anchors = unique_anchors(a, b)
    assert all(a[i] == b[j] for i, j in anchors)
    assert anchors == sorted(anchors)
    assert [j for _, j in anchors] == sorted(j for _, j in anchors)
    rebuilt, at = [], 0
    for i1, i2, j1, j2 in changed_lines(a, b):
        rebuilt += a[at:i1] + b[j1:j2]
        at = i2
    assert rebuilt + a[at:] == b
