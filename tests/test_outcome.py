"""Per-hunk outcome: after the editor says "applied", the model learns what really landed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_agent.tools.outcome import ACCEPTED, MODIFIED, REJECTED, hunk_outcomes

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
    assert message.startswith("the editor applied only part of your edit to a.py (1 of 2 hunks")
    assert "- hunk 1 (line 4): rejected by the user — the old text is still there" in message
    assert "- hunk 2 (line 21): accepted" in message
    assert "read a.py again before editing it further" in message


def test_a_hunk_the_user_changed_before_it_landed_shows_the_users_version() -> None:
    landed = TWO_HUNKS.replace("LINE TWENTY\n", "Line Twenty (mine)\n")

    report = hunk_outcomes(BEFORE, TWO_HUNKS, landed)

    assert [h.status for h in report.hunks] == [ACCEPTED, MODIFIED]
    modified = report.hunks[1]
    assert modified.proposed == "LINE TWENTY\n" and modified.landed == "Line Twenty (mine)\n"
    message = report.message("a.py")
    assert "- hunk 2 (line 21): modified by the user" in message
    assert "  -LINE TWENTY" in message and "  +Line Twenty (mine)" in message


def test_nothing_landed_though_the_editor_said_applied() -> None:
    report = hunk_outcomes(BEFORE, TWO_HUNKS, BEFORE)

    assert [h.status for h in report.hunks] == [REJECTED, REJECTED]
    assert report.message("a.py").startswith("the user did not keep any of your edit to a.py")


def test_the_user_also_typed_elsewhere() -> None:
    landed = TWO_HUNKS.replace("line 27\n", "line 27 edited\n")

    report = hunk_outcomes(BEFORE, TWO_HUNKS, landed)

    assert not report.exact
    assert [h.status for h in report.hunks] == [ACCEPTED, ACCEPTED]
    assert [(o.start, o.end) for o in report.others] == [(28, 28)]
    message = report.message("a.py")
    assert "landed as proposed, and the user changed other lines too" in message
    assert "- line 28: also changed by the user" in message


def test_a_deleting_hunk_that_was_rejected() -> None:
    proposed = BEFORE.replace("line 5\nline 6\n", "")
    report = hunk_outcomes(BEFORE, proposed, BEFORE)

    [hunk] = report.hunks
    assert hunk.status == REJECTED and hunk.before == "line 5\nline 6\n" and hunk.proposed == ""


def test_crlf_text_is_compared_line_by_line() -> None:
    before = BEFORE.replace("\n", "\r\n")
    proposed = TWO_HUNKS.replace("\n", "\r\n")
    landed = before.replace("line 3\r\n", "LINE THREE\r\n")

    report = hunk_outcomes(before, proposed, landed)

    assert [h.status for h in report.hunks] == [ACCEPTED, REJECTED]


@settings(max_examples=300)
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
