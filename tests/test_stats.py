"""Edit statistics: attempts, first-try successes, failures by reason, per session and overall."""

from __future__ import annotations

import json

from lsp_agent.tools.stats import REASONS, EditAttempt, EditStats, combined


def ok(tool: str, *paths: str) -> EditAttempt:
    return EditAttempt(tool, paths, True)


def fail(tool: str, reason: str, *paths: str) -> EditAttempt:
    return EditAttempt(tool, paths, False, reason)


def test_a_session_that_meets_every_failure_reason() -> None:
    stats = EditStats()
    for attempt in [
        ok("edit_file", "a.py"),  # first try
        fail("edit_file", "not_found", "b.py"),
        fail("edit_file", "ambiguous", "b.py"),
        ok("edit_file", "b.py"),  # third try
        ok("edit_file", "b.py"),  # a new change to b.py, right at once: first try
        fail("edit_file", "stale", "c.py"),
        ok("edit_file", "c.py"),
        fail("apply_patch", "syntax", "d.py", "e.py"),
        ok("apply_patch", "e.py"),  # e.py failed with d.py just before: a retry
        fail("write_file", "exists", "f.py"),
        fail("edit_file", "rejected", "g.py"),
        ok("write_file", "h.py"),  # first try
        ok("edit_file", "a.py"),  # a.py never failed: first try again
    ]:
        stats.record(attempt)
    figures = stats.to_json()
    assert figures["attempts"] == 13
    assert figures["succeeded"] == 7
    assert figures["failed"] == 6
    assert figures["firstTry"] == 4
    assert figures["successRate"] == round(7 / 13, 4)
    assert figures["firstTryRate"] == round(4 / 7, 4)
    assert figures["failures"] == {
        "ambiguous": 1,
        "exists": 1,
        "not_found": 1,
        "rejected": 1,
        "stale": 1,
        "syntax": 1,
    }
    assert figures["byTool"] == {
        "apply_patch": {"attempts": 2, "succeeded": 1},
        "edit_file": {"attempts": 9, "succeeded": 5},
        "write_file": {"attempts": 2, "succeeded": 1},
    }
    assert json.loads(json.dumps(figures)) == figures


def test_failures_are_listed_most_frequent_first() -> None:
    stats = EditStats()
    for reason in ["stale", "not_found", "not_found", "ambiguous", "not_found", "stale"]:
        stats.record(fail("edit_file", reason, "x"))
    assert list(stats.to_json()["failures"].items()) == [
        ("not_found", 3),
        ("stale", 2),
        ("ambiguous", 1),
    ]


def test_no_attempts_give_no_rates() -> None:
    figures = EditStats().to_json()
    assert figures["attempts"] == 0
    assert figures["successRate"] is None
    assert figures["firstTryRate"] is None


def test_a_failure_without_a_reason_counts_as_error() -> None:
    stats = EditStats()
    stats.record(EditAttempt("edit_file", ("a",), False))
    assert stats.failures == {"error": 1}
    assert stats.to_json()["failures"] == {"error": 1}


def test_transcript_events_rebuild_the_same_figures() -> None:
    attempts = [
        fail("edit_file", "not_found", "a.py"),
        ok("edit_file", "a.py"),
        ok("apply_patch", "b.py", "c.py"),
        fail("edit_file", "rejected", "b.py"),
    ]
    live = EditStats()
    for attempt in attempts:
        live.record(attempt)
    events = [attempt.event() for attempt in attempts]
    events.insert(1, {"type": "event", "kind": "usage", "prompt_tokens": 3})
    events.append({"type": "message", "message": {"role": "user", "content": "hi"}})
    assert events[0] == {
        "type": "event",
        "kind": "edit",
        "tool": "edit_file",
        "paths": ["a.py"],
        "ok": False,
        "reason": "not_found",
    }
    assert "reason" not in events[2]
    rebuilt = EditStats.from_events(json.loads(json.dumps(events)))
    assert rebuilt.to_json() == live.to_json()
    assert EditAttempt.from_event({"type": "event", "kind": "edit", "tool": 1}) is None


def test_overall_figures_add_up_the_sessions_and_survive_json() -> None:
    one, two = EditStats(), EditStats()
    one.record(ok("edit_file", "a"))
    one.record(fail("edit_file", "stale", "b"))
    two.record(fail("apply_patch", "stale", "c"))
    two.record(ok("apply_patch", "c"))
    total = combined([one, two])
    assert total.to_json()["attempts"] == 4
    assert total.to_json()["firstTry"] == 1
    assert total.to_json()["failures"] == {"stale": 2}
    assert total.to_json()["byTool"]["apply_patch"] == {"attempts": 2, "succeeded": 1}
    assert EditStats.from_json(total.to_json()).to_json() == total.to_json()
    assert EditStats.from_json({"attempts": "x", "failures": []}).to_json()["attempts"] == 0


def test_the_reasons_the_tools_use_are_documented() -> None:
    for reason in ["not_found", "ambiguous", "stale", "syntax", "rejected", "unread", "locked"]:
        assert reason in REASONS
