"""The check of a full comparison against the watcher, on its own: which changes the watcher
should have reported, and when one it did not report means it misses events."""

from __future__ import annotations

from lsp_agent.changes.audit import judge, unreported
from lsp_agent.changes.compare import State
from lsp_agent.changes.watch import Events

HEAD_BLOB = "a" * 40
EDITED = "b" * 40
EDITED_AGAIN = "c" * 40


def everything_watched(rel: str) -> bool:
    return True


def test_a_content_change_nobody_reported_is_a_suspect_and_a_reported_one_is_not() -> None:
    old = {"a.py": State(".M", EDITED, HEAD_BLOB), "b.py": State(".M", EDITED, HEAD_BLOB)}
    new = {
        "a.py": State(".M", EDITED_AGAIN, HEAD_BLOB),
        "b.py": State(".M", EDITED_AGAIN, HEAD_BLOB),
    }
    seen = Events(paths={"b.py"})

    assert unreported(old, new, {"a.py", "b.py"}, seen, watched=everything_watched) == ["a.py"]


def test_a_file_edited_from_clean_or_new_counts_and_one_in_a_reported_folder_does_not() -> None:
    new = {
        "clean_before.py": State(".M", EDITED, HEAD_BLOB),
        "new.py": State("??", EDITED, None),
        "lib/inside.py": State("??", EDITED, None),
    }

    found = unreported({}, new, set(new), Events(dirs={"lib"}), watched=everything_watched)

    assert found == ["clean_before.py", "new.py"]


def test_what_git_or_the_ignore_files_changed_without_a_file_event_is_no_suspect() -> None:
    staged = {"staged.py": State("M.", EDITED, HEAD_BLOB)}
    committed = {"committed.py": State(".M", EDITED, HEAD_BLOB)}
    unignored = {"cache.txt": State("??", EDITED, None)}

    # `git add`: the file's bytes did not change, its code did.
    before_add = {"staged.py": State(".M", EDITED, HEAD_BLOB)}
    assert unreported(before_add, staged, set(staged), Events(), watched=everything_watched) == []
    # A commit made the file clean: HEAD moved, the bytes stayed.
    assert (
        unreported(committed, {}, set(committed), Events(git=True), watched=everything_watched)
        == []
    )
    # A .gitignore edit: an untracked file shows up that nobody touched.
    seen = Events(ignore_files=True)
    assert unreported({}, unignored, set(unignored), seen, watched=everything_watched) == []


def test_huge_files_known_by_time_and_paths_never_watched_are_no_suspects() -> None:
    old = {"big.bin": State(".M", "stat:100:1", HEAD_BLOB), "env/x.py": State("??", EDITED, None)}
    new = {
        "big.bin": State(".M", "stat:100:2", HEAD_BLOB),
        "env/x.py": State("??", EDITED_AGAIN, None),
    }

    found = unreported(old, new, set(old), Events(), watched=lambda rel: not rel.startswith("env/"))

    assert found == []


def test_a_suspect_is_judged_only_once_the_watcher_is_quiet_and_the_change_is_old_enough() -> None:
    suspects = {"late.py": 100.0, "fresh.py": 104.5}

    # Events still coming at the drain (t=105): the suspects may be in the queue.
    assert judge(suspects, since=10.0, drained=105.0, heard=104.8, in_flight=1.0) is None
    # Quiet for a second: the old change was missed; the one of the last second may be on its way.
    assert judge(suspects, since=10.0, drained=105.0, heard=103.0, in_flight=1.0) == "late.py"
    assert judge({"fresh.py": 104.5}, since=10.0, drained=105.0, heard=103.0, in_flight=1.0) is None
    # A loss the watcher reported after the change covers it.
    assert judge(suspects, since=102.0, drained=105.0, heard=103.0, in_flight=1.0) is None
