"""Per-hunk outcome: after the editor says "applied", the model learns what really landed."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_agent.tools.outcome import ACCEPTED, MODIFIED, REJECTED, hunk_outcomes
from lsp_agent.tools.patch import PlannedChange, parse_patch, plan_patch

BEFORE = "".join(f"line {i}\n" for i in range(30))
TWO_HUNKS = BEFORE.replace("line 3\n", "LINE THREE\n").replace("line 20\n", "LINE TWENTY\n")


def test_everything_landed_as_proposed() -> None:
    report = hunk_outcomes(BEFORE, TWO_HUNKS, TWO_HUNKS)

    assert report.exact
    assert [h.status for h in report.hunks] == [ACCEPTED, ACCEPTED]
    assert report.message("a.py") == "applied: a.py (all 2 hunks as proposed)"


def test_the_user_unticks_one_of_two_hunks_and_the_model_is_told_which() -> None:
    landed = BEFORE.replace("line 20\n", "LINE TWENTY\n")

    report = hunk_outcomes(BEFORE, TWO_HUNKS, landed)

    assert [(h.number, h.status) for h in report.hunks] == [(1, REJECTED), (2, ACCEPTED)]
    message = report.message("a.py")
    assert message.startswith("the user applied part of your edit to a.py (1 of 2 hunks applied")
    assert (
        "- hunk 1: replacing line 4: not applied by the user (the old text is still there)"
        in message
    )
    assert "- hunk 2: replaced line 21: applied" in message
    assert report.short() == "1 of 2 hunks applied"
    assert "read a.py again before editing it further" in message


def test_a_hunk_the_user_changed_before_it_landed_shows_the_users_version() -> None:
    landed = TWO_HUNKS.replace("LINE TWENTY\n", "Line Twenty (mine)\n")

    report = hunk_outcomes(BEFORE, TWO_HUNKS, landed)

    assert [h.status for h in report.hunks] == [ACCEPTED, MODIFIED]
    modified = report.hunks[1]
    assert modified.proposed == "LINE TWENTY\n"
    assert modified.landed == "Line Twenty (mine)\n"
    message = report.message("a.py")
    assert (
        "- hunk 2: replacing 1 line: changed by the user before applying (line 21 holds the "
        "user's version)" in message
    )
    assert "  -LINE TWENTY" in message
    assert "  +Line Twenty (mine)" in message


def test_nothing_landed_though_the_editor_said_applied() -> None:
    report = hunk_outcomes(BEFORE, TWO_HUNKS, BEFORE)

    assert [h.status for h in report.hunks] == [REJECTED, REJECTED]
    assert report.message("a.py").startswith("the user applied none of the 2 hunks of your edit")
    assert report.short() == "not applied by the user"


def test_the_user_also_typed_elsewhere() -> None:
    landed = TWO_HUNKS.replace("line 27\n", "line 27 edited\n")

    report = hunk_outcomes(BEFORE, TWO_HUNKS, landed)

    assert not report.exact
    assert [h.status for h in report.hunks] == [ACCEPTED, ACCEPTED]
    assert [(o.start, o.end) for o in report.others] == [(28, 28)]
    message = report.message("a.py")
    assert "was applied as proposed, and the user changed other lines too" in message
    assert "- line 28: also changed by the user" in message


def test_a_deleting_hunk_that_was_rejected() -> None:
    proposed = BEFORE.replace("line 5\nline 6\n", "")
    report = hunk_outcomes(BEFORE, proposed, BEFORE)

    [hunk] = report.hunks
    assert hunk.status == REJECTED
    assert hunk.before == "line 5\nline 6\n"
    assert hunk.proposed == ""


def test_crlf_text_is_compared_line_by_line() -> None:
    before = BEFORE.replace("\n", "\r\n")
    proposed = TWO_HUNKS.replace("\n", "\r\n")
    landed = before.replace("line 3\r\n", "LINE THREE\r\n")

    report = hunk_outcomes(before, proposed, landed)

    assert [h.status for h in report.hunks] == [ACCEPTED, REJECTED]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=8), st.data())
def test_any_subset_of_ticked_hunks_is_reported_exactly(count: int, data: st.DataObject) -> None:
    lines = [f"line {i}\n" for i in range(count * 4 + 2)]
    places = [2 + 4 * k for k in range(count)]  # hunks two unchanged lines apart at least
    kept = data.draw(st.lists(st.booleans(), min_size=count, max_size=count))
    proposed, landed = list(lines), list(lines)
    for k, at in enumerate(places):
        proposed[at] = f"new {k}\n"
        if kept[k]:
            landed[at] = f"new {k}\n"

    report = hunk_outcomes("".join(lines), "".join(proposed), "".join(landed))

    assert [h.status for h in report.hunks] == [ACCEPTED if k else REJECTED for k in kept]
    assert [h.number for h in report.hunks] == list(range(1, count + 1))
    assert report.exact == all(kept)


# The model's own hunks

REPEATED = "".join("# comment\n" if i % 2 else "\n" for i in range(70))
PATCH = (
    "*** Begin Patch\n*** Update File: f.py\n@@\n \n-x = 1\n+x = 10\n \n"
    "@@\n \n-y = 2\n+y = 20\n \n*** End Patch\n"
)


def planned_patch(before: str, patch: str) -> PlannedChange:
    (change,) = plan_patch(parse_patch(patch), lambda name: (Path(name), before))
    return change


def test_a_patch_on_repeated_lines_is_reported_by_the_models_own_hunks() -> None:
    # Lines 2 and 64 differ from a file of blank and comment lines; the user keeps hunk 1 only.
    lines = REPEATED.splitlines(keepends=True)
    lines[1], lines[63] = "x = 1\n", "y = 2\n"
    before = "".join(lines)
    change = planned_patch(before, PATCH)
    assert change.after is not None
    landed = before.replace("x = 1\n", "x = 10\n")

    report = hunk_outcomes(before, change.after, landed, change.hunks)

    assert [(h.number, h.status) for h in report.hunks] == [(1, ACCEPTED), (2, REJECTED)]
    message = report.message("f.py")
    assert "(1 of 2 hunks applied as proposed)" in message
    assert "- hunk 1 (starting 'x = 1'): replaced line 2: applied" in message
    assert "- hunk 2 (starting 'y = 2'): replacing line 64: not applied by the user" in message


def test_the_models_hunks_are_found_again_after_the_users_typing_was_merged_in() -> None:
    before = "".join(f"line {i}\n" for i in range(40))
    patch = (
        "*** Begin Patch\n*** Update File: f.py\n@@ line 9\n-line 10\n+LINE 10\n"
        "@@\n-line 30\n+LINE 30\n*** End Patch\n"
    )
    change = planned_patch(before, patch)
    assert change.after is not None
    # The user typed two lines at the top before the edit went out: both texts moved down.
    typed = "mine 1\nmine 2\n"
    pinned_before, pinned_after = typed + before, typed + change.after
    landed = pinned_after.replace("LINE 30\n", "line 30\n")

    report = hunk_outcomes(pinned_before, pinned_after, landed, change.hunks)

    assert [(h.number, h.label, h.status) for h in report.hunks] == [
        (1, "@@ line 9", ACCEPTED),
        (2, "starting 'line 30'", REJECTED),
    ]
    assert (report.hunks[0].start, report.hunks[1].start) == (13, 33)


def test_hunks_that_no_longer_describe_the_change_give_way_to_the_diff() -> None:
    change = planned_patch(
        BEFORE, "*** Begin Patch\n*** Update File: f\n-line 3\n+LINE THREE\n*** End Patch"
    )
    landed = BEFORE.replace("line 20\n", "LINE TWENTY\n")

    report = hunk_outcomes(BEFORE, TWO_HUNKS, landed, change.hunks)

    assert [(h.number, h.label, h.status) for h in report.hunks] == [
        (1, "", REJECTED),
        (2, "", ACCEPTED),
    ]


def test_an_inserted_hunk_the_user_left_out_is_told_as_an_insertion_not_applied() -> None:
    """Not "removed before line 16": nothing was removed, the lines were never inserted."""
    inserted = BEFORE.replace("line 14\n", "line 14\nnew a\nnew b\n")

    left_out = hunk_outcomes(BEFORE, inserted, BEFORE).message("a.py")
    kept = hunk_outcomes(BEFORE, inserted, inserted.replace("line 27\n", "mine\n")).message("a.py")

    assert left_out.startswith("the user did not apply your edit to a.py:")
    assert "- hunk 1: inserting 2 lines before line 16: not applied by the user" in left_out
    assert "removed" not in left_out
    assert "- hunk 1: inserted lines 16-17: applied" in kept
    assert "- line 30: also changed by the user" in kept


def test_a_removing_hunk_is_told_by_what_it_removes() -> None:
    removed = BEFORE.replace("line 5\nline 6\n", "")

    kept = hunk_outcomes(BEFORE, removed, removed.replace("line 27\n", "x\n")).message("a.py")
    left = hunk_outcomes(BEFORE, removed, BEFORE).message("a.py")

    assert "- hunk 1: removed 2 lines before line 6: applied" in kept
    assert "- hunk 1: removing lines 6-7: not applied by the user" in left


def test_a_line_the_user_typed_next_to_the_change_is_theirs_and_the_hunk_landed() -> None:
    proposed = BEFORE.replace("line 5\n", "LINE FIVE\n")
    # The user wrote a line right above the changed one, then accepted the edit.
    landed = proposed.replace("LINE FIVE\n", "# mine\nLINE FIVE\n")

    report = hunk_outcomes(BEFORE, proposed, landed)

    [hunk] = report.hunks
    assert hunk.status == ACCEPTED
    assert [(o.start, o.end) for o in report.others] == [(6, 6)]
    message = report.message("a.py")
    assert message.startswith(
        "your edit to a.py was applied as proposed, and the user changed other lines too"
    )
    assert "- hunk 1: replaced line 7: applied" in message
    assert "- line 6: also changed by the user" in message
    assert report.short() == "applied; the user also changed other lines"


def test_a_removal_that_landed_beside_the_users_new_line() -> None:
    proposed = BEFORE.replace("line 5\n", "")
    landed = BEFORE.replace("line 5\n", "# mine\n")

    report = hunk_outcomes(BEFORE, proposed, landed)

    [hunk] = report.hunks
    assert hunk.status == ACCEPTED
    assert [(o.start, o.end) for o in report.others] == [(6, 6)]


def test_the_users_change_of_the_changed_line_itself_stays_a_modification() -> None:
    proposed = BEFORE.replace("line 5\n", "LINE FIVE\n")
    landed = BEFORE.replace("line 5\n", "# mine\nLine Five (mine)\n")

    report = hunk_outcomes(BEFORE, proposed, landed)

    assert [h.status for h in report.hunks] == [MODIFIED]
