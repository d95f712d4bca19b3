"""Rebasing a planned edit onto what the user typed since: lands at the right place, or refuses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_agent.text import split_lines
from lsp_agent.tools.rebase import rebase

FUNCTIONS = (
    "import os\n"
    "\n"
    "\n"
    "def greet(name):\n"
    "    return f'hello {name}'\n"
    "\n"
    "\n"
    "def main():\n"
    "    print(greet('world'))\n"
    "    return 0\n"
)


def test_the_users_typing_elsewhere_is_kept_and_the_edit_lands_where_it_was_planned() -> None:
    planned = FUNCTIONS.replace("hello {name}", "bonjour {name}")
    current = FUNCTIONS.replace("import os\n", "import os\nimport sys\n")

    result = rebase(FUNCTIONS, planned, current)

    assert result.clean
    assert result.merged == current.replace("hello {name}", "bonjour {name}")
    assert result.user_lines == ((2, 2),)
    assert result.describe("app.py") == (
        "app.py changed since you read it (the user edited line 2); your edit was applied on "
        "top of their text, at the place you planned it"
    )


def test_typing_that_inserted_lines_above_shifts_the_edit_down() -> None:
    planned = FUNCTIONS.replace("    return 0\n", "    return 1\n")
    inserted = "".join(f"# note {i}\n" for i in range(30))
    current = inserted + FUNCTIONS

    result = rebase(FUNCTIONS, planned, current)

    assert result.merged == inserted + planned


def test_typing_on_the_same_line_is_a_conflict_that_names_the_users_line() -> None:
    planned = FUNCTIONS.replace("hello {name}", "bonjour {name}")
    current = FUNCTIONS.replace("hello {name}", "hi {name}!")

    result = rebase(FUNCTIONS, planned, current)

    assert not result.clean
    assert result.merged is None
    [conflict] = result.conflicts
    assert (conflict.start, conflict.end) == (5, 5)
    assert conflict.current == ("    return f'hi {name}!'\n",)
    message = result.describe("app.py")
    assert message.startswith("not proposed — app.py changed after you read it")
    assert "line 5 now reads:" in message
    assert "5|     return f'hi {name}!'" in message
    assert "Read the file again" in message


def test_typing_on_the_line_next_to_the_edit_is_a_conflict() -> None:
    # The hunk's neighbouring line is its context: once the user changed it, the edit could be
    # anywhere, so it is not applied.
    planned = FUNCTIONS.replace("    return 0\n", "    return 1\n")
    current = FUNCTIONS.replace("print(greet('world'))", "print(greet('you'))")

    assert not rebase(FUNCTIONS, planned, current).clean


def test_an_edit_inside_a_function_the_user_deleted_is_refused() -> None:
    planned = FUNCTIONS.replace("hello {name}", "bonjour {name}")
    current = FUNCTIONS.replace("def greet(name):\n    return f'hello {name}'\n", "")

    result = rebase(FUNCTIONS, planned, current)

    assert not result.clean
    assert "the user deleted the lines before line 4" in result.describe("app.py")


def test_typing_a_few_lines_from_the_edit_is_a_conflict_too() -> None:
    # Within the 3 lines of context a diff shows around the hunk: the hunk is not applied.
    planned = FUNCTIONS.replace("hello {name}", "bonjour {name}")
    current = FUNCTIONS.replace("def main():", "def run():")

    result = rebase(FUNCTIONS, planned, current)

    assert not result.clean
    [conflict] = result.conflicts
    assert conflict.why == "context"
    assert "def run():" in "".join(conflict.current)
    assert "the user changed lines next to your edit" in result.describe("app.py")


def test_an_edit_whose_place_the_user_copied_elsewhere_is_refused_rather_than_guessed() -> None:
    filler = "".join(f"# filler {i}\n" for i in range(10))
    base = filler + FUNCTIONS + filler
    planned = base.replace("hello {name}", "bonjour {name}")
    # The user pasted the function with its surroundings far below: two places now fit the edit.
    copy = "".join(split_lines(FUNCTIONS)[:8])
    current = base + "\n# pasted\n" + copy

    result = rebase(base, planned, current)

    assert not result.clean
    assert result.conflicts[0].why == "ambiguous"
    assert "copied the lines around your edit" in result.describe("app.py")


def test_the_user_already_made_the_same_change() -> None:
    planned = FUNCTIONS.replace("hello", "hey")
    current = planned.replace("import os\n", "import re\n")

    assert rebase(FUNCTIONS, planned, current).merged == current


def test_inserts_at_the_same_place_conflict() -> None:
    planned = FUNCTIONS + "# agent\n"
    current = FUNCTIONS + "# user\n"

    assert not rebase(FUNCTIONS, planned, current).clean


def test_crlf_lines_and_a_missing_final_newline_are_kept() -> None:
    base = "a\r\nb\r\nc\r\nd\r\ne\r\nf\r\ng"
    planned = "a\r\nB\r\nc\r\nd\r\ne\r\nf\r\ng"
    current = "a\r\nb\r\nc\r\nd\r\ne\r\nf\r\nG"

    assert rebase(base, planned, current).merged == "a\r\nB\r\nc\r\nd\r\ne\r\nf\r\nG"


def test_split_lines_keeps_every_terminator() -> None:
    assert split_lines("a\nb\r\nc\rd") == ["a\n", "b\r\n", "c\r", "d"]
    assert split_lines("") == []
    assert "".join(split_lines("x\n\n\r\n")) == "x\n\n\r\n"


texts = st.text(alphabet=st.sampled_from("ab \n\r\t{}x"), max_size=120)


@settings(max_examples=300, deadline=None)
@given(texts, texts)
def test_when_the_user_changed_nothing_the_result_is_the_planned_text(
    base: str, planned: str
) -> None:
    assert rebase(base, planned, base).merged == planned


@settings(max_examples=300, deadline=None)
@given(texts, texts)
def test_when_the_plan_changes_nothing_the_result_is_the_users_text(
    base: str, current: str
) -> None:
    assert rebase(base, base, current).merged == current


@settings(max_examples=300, deadline=None)
@given(texts, texts)
def test_when_both_made_the_same_change_the_result_is_that_change(base: str, changed: str) -> None:
    assert rebase(base, changed, changed).merged == changed


@st.composite
def two_separate_edits(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(base, one edit, another edit, both edits), with 3 unchanged lines between them (each
    edit's context is intact)."""
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    count = draw(st.integers(min_value=4, max_value=40))
    lines = [f"line {i}{eol}" for i in range(count)]
    i1 = draw(st.integers(min_value=0, max_value=count - 4))
    i2 = draw(st.integers(min_value=i1, max_value=count - 4))
    j1 = draw(st.integers(min_value=i2 + 3, max_value=count))
    j2 = draw(st.integers(min_value=j1, max_value=count))
    new_a = [f"first {k}{eol}" for k in range(draw(st.integers(0, 4)))]
    new_b = [f"second {k}{eol}" for k in range(draw(st.integers(0, 4)))]
    if i1 == i2 and not new_a:
        new_a = [f"first{eol}"]
    if j1 == j2 and not new_b:
        new_b = [f"second{eol}"]
    edit_a = lines[:i1] + new_a + lines[i2:]
    edit_b = lines[:j1] + new_b + lines[j2:]
    both = lines[:i1] + new_a + lines[i2:j1] + new_b + lines[j2:]
    return "".join(lines), "".join(edit_a), "".join(edit_b), "".join(both)


@settings(max_examples=400, deadline=None)
@given(two_separate_edits())
def test_edits_on_separate_lines_commute_and_both_land(
    case: tuple[str, str, str, str],
) -> None:
    base, edit_a, edit_b, both = case

    assert rebase(base, edit_a, edit_b).merged == both
    assert rebase(base, edit_b, edit_a).merged == both


@settings(max_examples=300, deadline=None)
@given(two_separate_edits(), st.sampled_from(["\n", "\r\n"]))
def test_the_merged_text_uses_the_files_line_endings(
    case: tuple[str, str, str, str], eol: str
) -> None:
    base, edit_a, edit_b, _ = case
    if eol == "\r\n":
        base, edit_a, edit_b = (t.replace("\r\n", "\n").replace("\n", "\r\n") for t in case[:3])
    merged = rebase(base, edit_a, edit_b).merged
    assert merged is not None
    if eol == "\r\n":
        assert merged.count("\n") == merged.count("\r\n")


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=5, max_value=30), st.integers(0, 2), st.data())
def test_a_change_within_the_context_of_a_hunk_is_never_applied(
    count: int, gap: int, data: st.DataObject
) -> None:
    lines = [f"line {i}\n" for i in range(count)]
    at = data.draw(st.integers(min_value=0, max_value=count - gap - 2))
    other = at + 1 + gap
    planned = [*lines[:at], "agent\n", *lines[at + 1 :]]
    current = [*lines[:other], "user\n", *lines[other + 1 :]]

    assert not rebase("".join(lines), "".join(planned), "".join(current)).clean
    assert not rebase("".join(lines), "".join(current), "".join(planned)).clean


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=30),
    st.data(),
)
def test_different_changes_to_the_same_lines_always_conflict(
    count: int, data: st.DataObject
) -> None:
    lines = [f"line {i}\n" for i in range(count)]
    start = data.draw(st.integers(min_value=0, max_value=count - 1))
    end = data.draw(st.integers(min_value=start + 1, max_value=count))
    planned = [*lines[:start], "agent\n", *lines[end:]]
    current = [*lines[:start], "user\n", *lines[end:]]

    result = rebase("".join(lines), "".join(planned), "".join(current))

    assert result.merged is None
    assert any("user\n" in conflict.current for conflict in result.conflicts)
    assert all(conflict.start == start + 1 for conflict in result.conflicts)
