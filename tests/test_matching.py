"""One matcher: `edit_file` and `apply_patch` forgive the same slips and refuse the same
ambiguities, because both go through `lsp_agent.tools.matching`."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from lsp_agent.errors import ToolError
from lsp_agent.text import split_lines
from lsp_agent.tools.edits import plan_edit
from lsp_agent.tools.matching import LEVELS, FileLines, Reindent, locate, rewrite
from lsp_agent.tools.patch import PatchError, parse_patch, plan_patch

WORDS = ["alpha()", 'say("hi")', "x = 1", "return y", "if ok:", "y  = 2"]
SLIPS = ["none", "trailing", "indent", "inner", "quotes", "blank"]


def as_the_file_has_it(word: str, slip: str, depth: str) -> str:
    """A line of the file that the model will type without the slip."""
    if slip == "trailing":
        return depth + word + "  "
    if slip == "inner":
        return depth + word.replace(" ", "   ")
    if slip == "quotes":
        return depth + word.replace('"hi"', "\u201chi\u201d")
    return depth + word


def by_patch(text: str, old: list[str], new: list[str]) -> str:
    """The same change as one apply_patch hunk: lines left alone are context lines."""
    body = []
    for a, b in zip(old, new, strict=True):
        body += [" " + a] if a == b else ["-" + a, "+" + b]
    patch = "*** Begin Patch\n*** Update File: f.py\n@@\n" + "\n".join(body) + "\n*** End Patch"
    (change,) = plan_patch(parse_patch(patch), lambda name: (Path(name), text))
    assert change.after is not None
    return change.after


@settings(max_examples=400, deadline=None)
@given(
    before=st.lists(st.sampled_from(WORDS), max_size=4),
    block=st.lists(st.sampled_from(WORDS), min_size=2, max_size=3),
    after=st.lists(st.sampled_from(WORDS), max_size=4),
    repeat=st.booleans(),
    slip=st.sampled_from(SLIPS),
    changed=st.lists(st.booleans(), min_size=3, max_size=3),
    depth=st.sampled_from(["", "    ", "\t"]),
)
def test_both_tools_forgive_the_same_slips_and_refuse_the_same_ambiguities(
    before: list[str],
    block: list[str],
    after: list[str],
    repeat: bool,
    slip: str,
    changed: list[bool],
    depth: str,
) -> None:
    file_depth = depth if slip == "indent" else ""
    lines = [*before, *(as_the_file_has_it(w, slip, file_depth) for w in block), *after]
    if repeat:
        lines += [as_the_file_has_it(w, slip, file_depth) for w in block]
    text = "".join(line + "\n" for line in lines)
    old = list(block)
    new = [
        f"new_{k}()" if flip else word
        for k, (word, flip) in enumerate(zip(old, changed[: len(old)], strict=True))
    ]
    assume(new != old)
    model_old = ("\n" if slip == "blank" else "") + "".join(line + "\n" for line in old)
    # edit_file also finds old as exact text starting inside a line; that is its own
    # first step. Here old is only ever whole lines of the file, or absent.
    assume(
        all(
            text.startswith(model_old, at) <= (at == 0 or text[at - 1] == "\n")
            for at in range(len(text))
        )
    )
    model_new = "".join(line + "\n" for line in new)

    try:
        by_edit: str | None = plan_edit(text, model_old, model_new)
        edit_refusal = ""
    except ToolError as error:
        by_edit, edit_refusal = None, error.reason
    patch_old = ["", *old] if slip == "blank" else old
    patch_new = ["", *new] if slip == "blank" else new
    try:
        by_hunk: str | None = by_patch(text, patch_old, patch_new)
        patch_refusal = ""
    except PatchError as error:
        by_hunk, patch_refusal = None, error.reason
    event(f"{slip}: {edit_refusal or 'applied'}")
    assert by_edit == by_hunk
    assert edit_refusal == patch_refusal


def test_the_levels_go_from_exact_to_typographic() -> None:
    assert [level.how for level in LEVELS] == [
        "",
        "when trailing whitespace is ignored",
        "when indentation is ignored",
        "when runs of whitespace inside lines are ignored",
        "when typographic quotes, dashes and spaces are plain",
    ]


def test_a_line_ending_never_counts_in_a_comparison() -> None:
    file = FileLines("a\r\nb\rc\n")
    match = locate(file, ["b", "c"])
    assert (match.start, match.level.number) == (1, 0)
    assert file.endings == ["\r\n", "\r", "\n"]


@pytest.mark.parametrize(
    ("old", "region", "model", "new", "expected"),
    [
        # The model's 2 spaces are the file's 4: levels kept.
        (["if x:", "  y()"], ["    if x:", "        y()"], [], "  z()", "        z()"),
        # Tabs for a 2-space file.
        (["if x:", "\ty()"], ["  if x:", "    y()"], [], "\t\tz()", "      z()"),
        # Spaces for a tab file.
        (["if x:", "    y()"], ["\tif x:", "\t\ty()"], [], "    z()", "\t\tz()"),
        # Less deep than old's first line, in the file's unit.
        (["  a()", "    b()"], ["        a()", "            b()"], [], "c()", "    c()"),
        # Levels that do not map: the offset of the first line.
        (
            ["a()", "    b()", "        d()"],
            ["    a()", "      b()", "            d()"],
            [],
            "    c()",
            "        c()",
        ),
    ],
)
def test_new_lines_are_reindented_by_level_when_the_levels_map_else_by_offset(
    old: list[str], region: list[str], model: list[str], new: str, expected: str
) -> None:
    indent = Reindent(old, region, [*old, *model, new], region)
    assert indent(new) == expected


def test_a_written_line_takes_the_ending_of_the_line_it_replaces() -> None:
    file = FileLines("a\r\nb\nc\r\n")
    body = [(" ", "a"), ("-", "b"), ("+", "B"), ("+", "B2"), (" ", "c")]
    assert rewrite(file, 0, body, LEVELS[0]) == [
        ("a", "\r\n"),
        ("B", "\n"),
        ("B2", "\n"),
        ("c", "\r\n"),
    ]
    # An inserted line takes the ending of the line above it.
    inserted = [(" ", "a"), ("+", "a2"), (" ", "b")]
    assert rewrite(file, 0, inserted, LEVELS[0])[1] == ("a2", "\r\n")


@settings(deadline=None)
@given(
    st.lists(st.sampled_from(["a", " ", "\n", "\r", "\r\n", "\x0c", "\u2028", "é"])).map("".join)
)
def test_a_files_lines_are_lsp_lines_without_and_with_their_endings(text: str) -> None:
    file = FileLines(text)
    assert [c + e for c, e in zip(file.contents, file.endings, strict=True)] == split_lines(text)
    assert all(file.endings[:-1])  # only the last line may lack an ending
