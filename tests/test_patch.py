"""apply_patch: a multi-file patch lands exactly, or nothing does and the model hears why."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from lsp_agent.errors import ToolError
from lsp_agent.tools.patch import (
    APPLY_PATCH_SCHEMA,
    FilePatch,
    Hunk,
    PatchError,
    PlannedChange,
    describe,
    format_patch,
    parse_patch,
    paths,
    plan_patch,
)

ROOT = Path("/workspace")


def planned(text: str, files: dict[str, str]) -> list[PlannedChange]:
    """Plan `text` against an in-memory workspace of `files`."""

    def read_current(path: str) -> tuple[Path, str | None]:
        return ROOT / path, files.get(path)

    return plan_patch(parse_patch(text), read_current)


def apply(text: str, files: dict[str, str]) -> dict[str, str]:
    """The workspace after the patch: deleted files gone, added ones present."""
    result = dict(files)
    for change in planned(text, files):
        rel = change.path.relative_to(ROOT).as_posix()
        if change.after is None:
            del result[rel]
        else:
            result[rel] = change.after
    return result


def refusal(text: str, files: dict[str, str]) -> PatchError:
    with pytest.raises(PatchError) as caught:
        planned(text, files)
    return caught.value


def git_diff(path: str, before: str | None, after: str | None) -> str:
    """A git-style diff of one file, as git writes it (markers for a missing final newline)."""
    old = [] if before is None else before.splitlines(keepends=True)
    new = [] if after is None else after.splitlines(keepends=True)
    out = [f"diff --git a/{path} b/{path}\n"]
    if before is None:
        out.append("new file mode 100644\n")
    if after is None:
        out.append("deleted file mode 100644\n")
    lines = list(
        difflib.unified_diff(
            old,
            new,
            "/dev/null" if before is None else f"a/{path}",
            "/dev/null" if after is None else f"b/{path}",
            n=3,
        )
    )
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# The envelope models are trained on


def test_an_envelope_updates_adds_and_deletes_files_in_one_patch() -> None:
    files = {
        "app.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
        "old.txt": "bye\n",
    }
    patch = """*** Begin Patch
*** Update File: app.py
@@ def g():
-    return 2
+    return 3
*** Add File: docs/new.md
+# Title
+
+Body
*** Delete File: old.txt
*** End Patch
"""
    changes = planned(patch, files)
    assert [(c.rel, c.kind) for c in changes] == [
        ("app.py", "update"),
        ("docs/new.md", "add"),
        ("old.txt", "delete"),
    ]
    assert changes[0].after == "def f():\n    return 1\n\n\ndef g():\n    return 3\n"
    assert changes[1].before is None
    assert changes[1].after == "# Title\n\nBody\n"
    assert changes[2].before == "bye\n"
    assert changes[2].after is None


def test_an_lf_patch_into_a_crlf_file_keeps_every_line_crlf() -> None:
    files = {"win.txt": "one\r\ntwo\r\nthree\r\n"}
    patch = "*** Begin Patch\n*** Update File: win.txt\n one\n-two\n+2\n+2b\n three\n*** End Patch"
    assert apply(patch, files)["win.txt"] == "one\r\n2\r\n2b\r\nthree\r\n"


def test_a_patch_sent_with_crlf_line_breaks_reads_the_same() -> None:
    files = {"a.txt": "x\ny\n"}
    patch = "*** Begin Patch\r\n*** Update File: a.txt\r\n-y\r\n+z\r\n*** End Patch\r\n"
    assert apply(patch, files)["a.txt"] == "x\nz\n"


def test_a_patch_in_a_markdown_fence_is_read() -> None:
    files = {"a.txt": "x\ny\n"}
    patch = "```diff\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n```\n"
    assert apply(patch, files)["a.txt"] == "x\nz\n"


def test_an_envelope_without_end_patch_is_refused_without_asking_for_the_same_patch() -> None:
    error = refusal("*** Begin Patch\n*** Update File: a.txt\n-y\n+z\n", {"a.txt": "y\n"})
    assert error.reason == "bad_patch"
    assert "there is no *** End Patch line (the text stops at line 4: '+z')" in error.message
    assert "end it with a line *** End Patch" in error.message
    assert "cut off" in error.message
    assert "smaller patches" in error.message
    assert "send the whole patch again" not in error.message


def test_marker_lines_count_with_spaces_around_them() -> None:
    # As Codex reads them: an indented *** End Patch is the end, not a line of the hunk.
    files = {"a.txt": "one\n"}
    patch = "  *** Begin Patch\n  *** Update File: a.txt\n@@\n-one\n+two\n *** End Patch \n"
    assert apply(patch, files) == {"a.txt": "two\n"}
    moved = "*** Begin Patch\n*** Update File: a.txt\n  *** Move to: b.txt\n-one\n+2\n*** End Patch"
    assert apply(moved, files) == {"b.txt": "2\n"}
    at_end = "*** Begin Patch\n*** Update File: a.txt\n+zero\n   *** End of File\n*** End Patch"
    assert apply(at_end, files) == {"a.txt": "one\nzero\n"}


def test_a_hunk_line_without_a_prefix_is_refused_with_the_rule() -> None:
    patch = "*** Begin Patch\n*** Update File: a.txt\nx\n-y\n+z\n*** End Patch"
    error = refusal(patch, {"a.txt": "x\ny\n"})
    assert error.reason == "bad_patch"
    assert "line 3" in error.message
    assert "starts with a space" in error.message


def test_blank_lines_inside_a_hunk_are_empty_context_lines() -> None:
    files = {"a.py": "import os\n\nx = 1\n\ny = 2\n"}
    patch = "*** Begin Patch\n*** Update File: a.py\n import os\n\n-x = 1\n+x = 10\n\n*** End Patch"
    assert apply(patch, files)["a.py"] == "import os\n\nx = 10\n\ny = 2\n"


def test_an_anchor_picks_the_one_place_below_it_when_the_context_repeats() -> None:
    files = {
        "m.py": "class A:\n    def run(self):\n        pass\n\n"
        "class B:\n    def run(self):\n        pass\n"
    }
    patch = """*** Begin Patch
*** Update File: m.py
@@ class B:
     def run(self):
-        pass
+        return 2
*** End Patch"""
    assert apply(patch, files)["m.py"] == (
        "class A:\n    def run(self):\n        pass\n\nclass B:\n    def run(self):\n"
        "        return 2\n"
    )


def test_an_anchor_cannot_choose_when_both_places_are_below_it() -> None:
    files = {"m.py": "class B:\n    x = 1\n    x = 1\n"}
    patch = (
        "*** Begin Patch\n*** Update File: m.py\n@@ class B:\n-    x = 1\n+    x = 2\n*** End Patch"
    )
    error = refusal(patch, files)
    assert error.reason == "ambiguous"
    assert "lines 2, 3" in error.message


def test_end_of_file_marker_chooses_the_last_occurrence() -> None:
    files = {"a.txt": "end\nmiddle\nend\n"}
    patch = "*** Begin Patch\n*** Update File: a.txt\n-end\n+END\n*** End of File\n*** End Patch"
    assert apply(patch, files)["a.txt"] == "end\nmiddle\nEND\n"


def test_lines_added_under_an_anchor_go_right_below_it() -> None:
    files = {"a.py": "import os\n\n\ndef main():\n    pass\n"}
    patch = "*** Begin Patch\n*** Update File: a.py\n@@ import os\n+import sys\n*** End Patch"
    assert apply(patch, files)["a.py"] == "import os\nimport sys\n\n\ndef main():\n    pass\n"


def test_lines_added_with_no_context_and_no_place_are_refused_with_how_to_append() -> None:
    error = refusal(
        "*** Begin Patch\n*** Update File: a.txt\n+new\n*** End Patch", {"a.txt": "x\n"}
    )
    assert error.reason == "not_found"
    assert "says nowhere where they go" in error.message
    assert "put a line *** End of File right after them" in error.message


def test_a_move_renames_and_edits_the_file() -> None:
    files = {"old.py": "x = 1\n"}
    patch = (
        "*** Begin Patch\n*** Update File: old.py\n*** Move to: new.py\n"
        "-x = 1\n+x = 2\n*** End Patch"
    )
    assert apply(patch, files) == {"new.py": "x = 2\n"}


def test_a_move_onto_an_existing_file_is_refused() -> None:
    files = {"old.py": "x = 1\n", "new.py": "y\n"}
    patch = "*** Begin Patch\n*** Update File: old.py\n*** Move to: new.py\n*** End Patch"
    error = refusal(patch, files)
    assert error.reason == "exists"
    assert "new.py" in error.message


def test_two_sections_for_one_file_apply_one_after_the_other() -> None:
    files = {"a.txt": "1\n2\n3\n"}
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n-1\n+one\n"
        "*** Update File: a.txt\n-one\n+uno\n*** End Patch"
    )
    assert apply(patch, files)["a.txt"] == "uno\n2\n3\n"


def test_an_added_file_can_end_without_a_newline() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n\\ No newline at end of file\n*** End Patch"
    assert apply(patch, {}) == {"a.txt": "x"}


# Unified diffs


def test_a_git_diff_with_a_new_and_a_deleted_file() -> None:
    files = {"src/app.py": "a\nb\nc\n", "gone.txt": "old\n"}
    patch = (
        git_diff("src/app.py", "a\nb\nc\n", "a\nB\nc\n")
        + git_diff("src/new.py", None, "print(1)\n")
        + git_diff("gone.txt", "old\n", None)
    )
    assert apply(patch, files) == {"src/app.py": "a\nB\nc\n", "src/new.py": "print(1)\n"}


def test_a_diff_without_a_b_prefixes_is_read_as_the_paths_written() -> None:
    files = {"a.txt": "x\n"}
    assert apply("--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-x\n+y\n", files) == {"a.txt": "y\n"}


def test_a_folder_called_a_is_not_taken_for_a_prefix() -> None:
    files = {"a/b.txt": "x\n"}
    patch = "--- a/a/b.txt\n+++ b/a/b.txt\n@@ -1 +1 @@\n-x\n+y\n"
    assert apply(patch, files) == {"a/b.txt": "y\n"}
    assert paths(parse_patch("--- a/b.txt\n+++ a/b.txt\n@@ -1 +1 @@\n-x\n+y\n")) == ["a/b.txt"]


def test_different_names_without_rename_lines_are_refused() -> None:
    error = refusal("--- a/x.txt\n+++ b/y.txt\n@@ -1 +1 @@\n-x\n+y\n", {"x.txt": "x\n"})
    assert error.reason == "bad_patch"
    assert "rename" in error.message


def test_a_git_rename_with_changes() -> None:
    files = {"old.txt": "a\nb\n"}
    patch = (
        "diff --git a/old.txt b/new.txt\nsimilarity index 50%\nrename from old.txt\n"
        "rename to new.txt\n--- a/old.txt\n+++ b/new.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    )
    assert apply(patch, files) == {"new.txt": "a\nc\n"}


def test_a_quoted_git_path_is_unquoted() -> None:
    patch = 'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"\n--- "a/caf\\303\\251.txt"\n'
    patch += '+++ "b/caf\\303\\251.txt"\n@@ -1 +1 @@\n-x\n+y\n'
    assert paths(parse_patch(patch)) == ["café.txt"]


def test_counts_that_are_wrong_do_not_lose_or_steal_lines() -> None:
    files = {"a.txt": "1\n2\n3\n4\n", "b.txt": "q\n"}
    undercounted = "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n 1\n-2\n+two\n 3\n"
    overcounted = "--- a/b.txt\n+++ b/b.txt\n@@ -1,9 +1,9 @@\n-q\n+r\n"
    assert apply(undercounted + overcounted, files) == {"a.txt": "1\ntwo\n3\n4\n", "b.txt": "r\n"}


def test_removed_lines_that_look_like_file_headers_stay_in_their_hunk() -> None:
    files = {"notes.md": "-- a\n++ b\nend\n"}
    patch = "--- a/notes.md\n+++ b/notes.md\n@@ -1,3 +1,1 @@\n--- a\n-++ b\n end\n"
    assert apply(patch, files) == {"notes.md": "end\n"}


def test_a_hunk_without_numbers_in_a_git_diff_is_matched_by_its_lines() -> None:
    files = {"a.txt": "1\n2\n3\n"}
    assert apply("--- a/a.txt\n+++ b/a.txt\n@@\n 2\n-3\n+three\n", files) == {
        "a.txt": "1\n2\nthree\n"
    }


def test_no_newline_markers_add_and_remove_the_final_newline() -> None:
    assert apply(git_diff("a", "x\ny", "x\nz\n"), {"a": "x\ny"}) == {"a": "x\nz\n"}
    assert apply(git_diff("a", "x\ny\n", "x\nz"), {"a": "x\ny\n"}) == {"a": "x\nz"}


def test_a_file_without_a_final_newline_keeps_none_when_the_patch_says_nothing() -> None:
    patch = "*** Begin Patch\n*** Update File: a\n x\n-y\n+z\n*** End Patch"
    assert apply(patch, {"a": "x\ny"}) == {"a": "x\nz"}


def test_lines_appended_after_a_last_line_without_newline_are_separated() -> None:
    patch = "*** Begin Patch\n*** Update File: a\n y\n+z\n*** End Patch"
    assert apply(patch, {"a": "x\ny"}) == {"a": "x\ny\nz"}


def test_binary_patches_are_refused() -> None:
    error = refusal("diff --git a/i.png b/i.png\nBinary files a/i.png and b/i.png differ\n", {})
    assert error.reason == "bad_patch"
    assert "binary" in error.message


def test_text_that_is_no_patch_is_refused_with_the_expected_shapes() -> None:
    error = refusal("please change line 3 to x = 2", {})
    assert error.reason == "bad_patch"
    assert "*** Begin Patch" in error.message
    assert "--- a/path" in error.message


def test_the_line_number_decides_between_equal_places_in_a_git_diff() -> None:
    before = "x\n" * 20
    after = "x\n" * 10 + "X\n" + "x\n" * 10
    assert apply(git_diff("a", before, after), {"a": before}) == {"a": after}
    # Without the numbers the same lines fit fifteen places: that is no place at all.
    numberless = git_diff("a", before, after).replace("@@ -8,6 +8,7 @@", "@@")
    assert refusal(numberless, {"a": before}).reason == "ambiguous"


# Forgiving, never guessing


def test_trailing_whitespace_in_the_file_is_forgiven_when_one_place_matches() -> None:
    files = {"a.py": "x = 1   \ny = 2\t\n"}
    patch = "*** Begin Patch\n*** Update File: a.py\n x = 1\n-y = 2\n+y = 3\n*** End Patch"
    assert apply(patch, files)["a.py"] == "x = 1   \ny = 3\n"


def test_lost_indentation_is_forgiven_and_added_lines_take_the_file_indentation() -> None:
    files = {"a.go": "func f() {\n\tif x {\n\t\treturn 1\n\t}\n}\n"}
    patch = (
        "*** Begin Patch\n*** Update File: a.go\n"
        " if x {\n-    return 1\n+    log()\n+    return 2\n }\n*** End Patch"
    )
    assert apply(patch, files)["a.go"] == "func f() {\n\tif x {\n\t\tlog()\n\t\treturn 2\n\t}\n}\n"


def test_curly_quotes_and_dashes_from_the_model_still_find_the_line() -> None:
    files = {"a.py": 'msg = "it\'s a - b"\n'}
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n"
        "-msg = \u201cit\u2019s a \u2013 b\u201d\n+msg = 'x'\n*** End Patch"
    )
    assert apply(patch, files)["a.py"] == "msg = 'x'\n"


def test_the_files_typographic_context_lines_survive_a_plain_ascii_hunk() -> None:
    files = {"a.md": "Intro\u2026\n\u201cQuoted\u201d\u00a0line\nold \u2013 text\nEnd\n"}
    patch = (
        "*** Begin Patch\n*** Update File: a.md\n"
        ' Intro...\n "Quoted" line\n-old - text\n+new - text\n End\n*** End Patch'
    )
    assert apply(patch, files)["a.md"] == (
        "Intro\u2026\n\u201cQuoted\u201d\u00a0line\nnew - text\nEnd\n"
    )


def test_a_forgiven_match_is_refused_when_it_fits_two_places() -> None:
    files = {"a.py": "  x = 1\n    x = 1\n"}
    patch = "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n*** End Patch"
    error = refusal(patch, files)
    assert error.reason == "ambiguous"
    assert "when indentation is ignored" in error.message


def test_not_found_names_the_file_and_hunk_and_quotes_the_nearest_lines() -> None:
    files = {
        "src/app.py": "def greet(name):\n    return 'hello ' + name\n\n\ndef bye():\n    pass\n"
    }
    patch = """*** Begin Patch
*** Update File: src/app.py
 def greet(name):
-    return 'helo ' + name
+    return 'hi ' + name
*** End Patch"""
    error = refusal(patch, files)
    assert error.reason == "not_found"
    assert "nothing was changed" in error.message
    assert "src/app.py, hunk 1 of 1" in error.message
    assert "     1\tdef greet(name):" in error.message
    assert "     2\t    return 'hello ' + name" in error.message
    assert "First difference, line 2" in error.message
    assert error.failures[0].path == "src/app.py"
    assert error.failures[0].hunk == 1


def test_one_bad_hunk_stops_the_whole_patch_and_every_failure_is_listed() -> None:
    files = {"a.txt": "1\n2\n", "b.txt": "x\nx\n", "c.txt": "fine\n"}
    patch = """*** Begin Patch
*** Update File: c.txt
-fine
+better
*** Update File: a.txt
-1
+one
@@
-nope
+never
*** Update File: b.txt
-x
+y
*** Add File: c.txt
+dup
*** End Patch"""
    error = refusal(patch, files)
    assert [(f.path, f.hunk, f.reason) for f in error.failures] == [
        ("a.txt", 2, "not_found"),
        ("b.txt", 1, "ambiguous"),
        ("c.txt", None, "exists"),
    ]
    assert "3 parts of the patch failed" in error.message
    assert "a.txt, hunk 2 of 2" in error.message


def test_updating_or_deleting_a_missing_file_is_refused() -> None:
    update = refusal("*** Begin Patch\n*** Update File: nope.txt\n-a\n+b\n*** End Patch", {})
    delete = refusal("*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch", {})
    assert update.reason == delete.reason == "not_found"
    assert "does not exist" in update.message


def test_adding_a_file_that_exists_is_refused() -> None:
    error = refusal("*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch", {"a.txt": "y\n"})
    assert error.reason == "exists"
    assert "already exists" in error.message


def test_deleting_a_file_whose_content_differs_from_the_removed_lines_is_refused() -> None:
    error = refusal(git_diff("a.txt", "a\nb\n", None), {"a.txt": "a\nb\nc\n"})
    assert error.reason == "not_found"
    assert "not the whole file" in error.message


def test_a_path_refused_by_the_workspace_fails_the_patch_with_its_own_message() -> None:
    def read_current(path: str) -> tuple[Path, str | None]:
        if path.startswith(".git"):
            raise ToolError("protected path refused: .git/config", reason="path")
        return ROOT / path, "x\n"

    patches = parse_patch(
        "*** Begin Patch\n*** Update File: .git/config\n-x\n+y\n"
        "*** Update File: ok.txt\n-x\n+y\n*** End Patch"
    )
    with pytest.raises(PatchError) as caught:
        plan_patch(patches, read_current)
    assert caught.value.reason == "path"
    assert "protected path refused" in caught.value.message


def test_hunks_that_change_the_same_lines_are_refused() -> None:
    patch = "*** Begin Patch\n*** Update File: a\n-x\n+y\n@@\n-x\n+z\n*** End Patch"
    error = refusal(patch, {"a": "x\n"})
    assert error.reason == "overlap"


def test_a_patch_that_changes_nothing_is_refused() -> None:
    error = refusal("*** Begin Patch\n*** Update File: a\n-x\n+x\n*** End Patch", {"a": "x\n"})
    assert error.reason == "no_change"


def test_paths_lists_sources_and_move_targets_once() -> None:
    patches = parse_patch(
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** Delete File: c\n"
        "*** Update File: a\n-x\n+y\n*** End Patch"
    )
    assert paths(patches) == ["a", "b", "c"]


# Several places, one meaning


def test_identical_hunks_for_identical_blocks_take_those_blocks_in_order() -> None:
    block = "    try:\n        run()\n    except OSError:\n        pass\n"
    files = {"a.py": f"def f():\n{block}\ndef g():\n{block}"}
    hunk = "@@\n     except OSError:\n-        pass\n+        log()\n"
    patch = f"*** Begin Patch\n*** Update File: a.py\n{hunk}{hunk}*** End Patch"
    fixed = block.replace("pass", "log()")
    assert apply(patch, files) == {"a.py": f"def f():\n{fixed}\ndef g():\n{fixed}"}


def test_identical_hunks_fewer_than_the_places_are_refused() -> None:
    files = {"a.txt": "x\nx\nx\n"}
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n@@\n-x\n+y\n*** End Patch"
    error = refusal(patch, files)
    assert error.reason == "ambiguous"
    assert "matches 3 places" in error.message


def test_hunks_that_differ_in_what_they_write_are_not_placed_in_order() -> None:
    files = {"a.txt": "x\nx\n"}
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n@@\n-x\n+z\n*** End Patch"
    assert refusal(patch, files).reason == "ambiguous"


def test_dots_in_a_hunk_stand_for_unchanged_lines() -> None:
    files = {"a.py": "def f():\n    a = 1\n    b = 2\n    return a\n"}
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n def f():\n-    a = 1\n+    a = 10\n"
        "     ...\n-    return a\n+    return a + b\n*** End Patch"
    )
    assert apply(patch, files) == {"a.py": "def f():\n    a = 10\n    b = 2\n    return a + b\n"}


# Line endings and indentation, line by line


def test_a_mixed_file_keeps_each_lines_ending() -> None:
    files = {"m.txt": "one\r\ntwo\nthree\r\nfour\n"}
    patch = (
        "*** Begin Patch\n*** Update File: m.txt\n two\n-three\n+THREE\n+3b\n four\n*** End Patch"
    )
    assert apply(patch, files) == {"m.txt": "one\r\ntwo\nTHREE\r\n3b\r\nfour\n"}
    lf_region = "*** Begin Patch\n*** Update File: m.txt\n two\n+2b\n three\n*** End Patch"
    assert apply(lf_region, files) == {"m.txt": "one\r\ntwo\n2b\nthree\r\nfour\n"}


def test_a_git_diff_of_a_mixed_file_keeps_the_endings_it_carries() -> None:
    # git splits lines at LF only: a CRLF line's CR is in the diff. Where the patch's own lines
    # mix endings, each added line keeps the one it was sent with.
    before = "a\r\nb\nc\r\n"
    after = "a\r\nb\nB2\r\nc\r\nd\n"
    patch = git_diff("m.txt", before, after)
    assert "\r\n" in patch
    assert apply(patch, {"m.txt": before}) == {"m.txt": after}


def test_two_space_lines_for_a_four_space_file_are_written_at_four() -> None:
    files = {"a.py": "class A:\n    def f(self):\n        if x:\n            return 1\n"}
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n def f(self):\n   if x:\n"
        "-    return 1\n+    log()\n+    return 2\n*** End Patch"
    )
    expected = (
        "class A:\n    def f(self):\n        if x:\n            log()\n            return 2\n"
    )
    assert apply(patch, files) == {"a.py": expected}


def test_tab_lines_for_a_space_file_and_space_lines_for_a_tab_file() -> None:
    spaces = {"a.py": "def f():\n  if x:\n    y()\n"}
    patch = "*** Begin Patch\n*** Update File: a.py\n if x:\n \ty()\n+\tz()\n*** End Patch"
    assert apply(patch, spaces) == {"a.py": "def f():\n  if x:\n    y()\n    z()\n"}
    tabs = {"a.go": "func f() {\n\tif x {\n\t\ty()\n\t}\n}\n"}
    patch = "*** Begin Patch\n*** Update File: a.go\n if x {\n   y()\n+  z()\n }\n*** End Patch"
    assert apply(patch, tabs) == {"a.go": "func f() {\n\tif x {\n\t\ty()\n\t\tz()\n\t}\n}\n"}


def test_doubled_spaces_inside_a_line_are_forgiven_as_edit_file_forgives_them() -> None:
    files = {"a.py": "x  = 1\ny = 2\n"}
    patch = "*** Begin Patch\n*** Update File: a.py\n x = 1\n-y = 2\n+y = 3\n*** End Patch"
    assert apply(patch, files) == {"a.py": "x  = 1\ny = 3\n"}


def test_a_stray_blank_context_line_at_the_top_of_a_hunk_is_dropped() -> None:
    files = {"a.py": "def f():\n    return 1\n"}
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n \n def f():\n-    return 1\n+    return 2\n"
        "*** End Patch"
    )
    assert apply(patch, files) == {"a.py": "def f():\n    return 2\n"}


# Properties

LINES = st.lists(st.sampled_from(["a", "b", "c", "", "  d", "e e", "f\t"]), max_size=14)


def text_of(lines: list[str], final_newline: bool) -> str:
    text = "\n".join(lines)
    return text + "\n" if lines and final_newline else text


@settings(max_examples=300, deadline=None)
@given(
    files=st.lists(st.tuples(LINES, st.booleans(), LINES, st.booleans()), min_size=1, max_size=3)
)
@example(files=[(["a"], False, ["a"], True)])
@example(files=[(["a", "b"], True, [], True)])
def test_a_generated_diff_applied_reproduces_the_new_text(
    files: list[tuple[list[str], bool, list[str], bool]],
) -> None:
    before = {f"f{i}.txt": text_of(old, eol1) for i, (old, eol1, _, _) in enumerate(files)}
    after = {f"f{i}.txt": text_of(new, eol2) for i, (_, _, new, eol2) in enumerate(files)}
    changed = [name for name in before if before[name] != after[name]]
    assume(changed)
    patch = "".join(git_diff(name, before[name], after[name]) for name in changed)
    result = apply(patch, before)
    assert result == after
    # And the parsed patch formats back to text that parses to the same patch.
    assert parse_patch(format_patch(parse_patch(patch))) == parse_patch(patch)


@settings(max_examples=200, deadline=None)
@given(old=LINES, new=LINES)
def test_a_generated_diff_keeps_a_crlf_file_crlf(old: list[str], new: list[str]) -> None:
    assume(old and old != new)
    before, after = text_of(old, True), text_of(new, True)
    crlf = before.replace("\n", "\r\n")
    result = apply(git_diff("w.txt", before, after), {"w.txt": crlf})
    assert result["w.txt"] == after.replace("\n", "\r\n")


@st.composite
def unique_edit(draw: st.DrawFn) -> tuple[list[str], int, int, list[tuple[str, str]]]:
    """A file, a slice of it, and a hunk whose old lines are that slice."""
    alphabet = st.sampled_from(["x", "y", "z", "", "w w", "v", "u u", "t"])
    lines = draw(st.lists(alphabet, min_size=1, max_size=12))
    start = draw(st.integers(0, len(lines) - 1))
    end = draw(st.integers(start + 1, len(lines)))
    body: list[tuple[str, str]] = []
    for line in lines[start:end]:
        body += [("+", text) for text in draw(st.lists(st.sampled_from(["N", "x"]), max_size=2))]
        body.append((draw(st.sampled_from([" ", "-"])), line))
    body += [("+", text) for text in draw(st.lists(st.sampled_from(["N", "y"]), max_size=2))]
    return lines, start, end, body


def occurrences(lines: list[str], part: list[str]) -> int:
    return sum(lines[i : i + len(part)] == part for i in range(len(lines) - len(part) + 1))


@settings(max_examples=250, deadline=None)
@given(case=unique_edit(), crlf=st.booleans())
def test_a_unique_match_is_always_applied_exactly(
    case: tuple[list[str], int, int, list[tuple[str, str]]], crlf: bool
) -> None:
    lines, start, end, body = case
    assume(occurrences(lines, lines[start:end]) == 1)
    assume(any(op != " " for op, _ in body))
    eol = "\r\n" if crlf else "\n"
    new = [text for op, text in body if op != "-"]
    expected = eol.join([*lines[:start], *new, *lines[end:]])
    if lines[:start] + new + lines[end:]:
        expected += eol
    patch = format_patch([FilePatch("update", "f", (Hunk(tuple(body)),))], envelope=True)
    source = eol.join(lines) + eol
    if expected == source:
        with pytest.raises(PatchError):
            apply(patch, {"f": source})
        return
    assert apply(patch, {"f": source}) == {"f": expected}


@settings(max_examples=300, deadline=None)
@given(
    head=st.lists(st.sampled_from(["h", "i", ""]), max_size=4),
    block=st.lists(st.sampled_from(["x", "y", " x", ""]), min_size=1, max_size=4),
    middle=st.lists(st.sampled_from(["m", ""]), max_size=3),
    tail=st.lists(st.sampled_from(["t", "x"]), max_size=3),
    ops=st.lists(st.sampled_from([" ", "-"]), min_size=4, max_size=4),
    added=st.lists(st.sampled_from(["N", "x"]), max_size=2),
)
def test_an_ambiguous_hunk_is_never_applied(
    head: list[str],
    block: list[str],
    middle: list[str],
    tail: list[str],
    ops: list[str],
    added: list[str],
) -> None:
    source = "\n".join([*head, *block, *middle, *block, *tail]) + "\n"
    body = tuple((op, line) for op, line in zip(ops, block, strict=False))
    body += tuple(("+", text) for text in added)
    patch = format_patch([FilePatch("update", "f", (Hunk(body),))], envelope=True)
    with pytest.raises(PatchError) as caught:
        apply(patch, {"f": source})
    assert caught.value.reason == "ambiguous"


@settings(max_examples=200, deadline=None)
@given(
    sections=st.lists(
        st.tuples(
            st.sampled_from(["add", "update", "delete"]),
            st.sampled_from(["a.py", "src/b.txt", "c d.md"]),
            st.lists(
                st.lists(
                    st.tuples(st.sampled_from([" ", "-", "+"]), st.sampled_from(["x", "", " y"])),
                    min_size=1,
                    max_size=4,
                ),
                min_size=1,
                max_size=3,
            ),
            st.lists(st.sampled_from(["class A:", "def f():"]), max_size=2),
            st.booleans(),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_an_envelope_formats_and_parses_back_to_the_same_patch(
    sections: list[tuple[str, str, list[list[tuple[str, str]]], list[str], bool]],
) -> None:
    patches: list[FilePatch] = []
    for kind, path, bodies, anchors, at_end in sections:
        if kind == "delete":
            patches.append(FilePatch("delete", path))
        elif kind == "add":
            lines = tuple(("+", text) for body in bodies for _, text in body)
            patches.append(FilePatch("add", path, (Hunk(lines),)))
        else:
            hunks = tuple(
                Hunk(tuple(body), anchors=tuple(anchors) if i == 0 else (), at_end=at_end)
                for i, body in enumerate(bodies)
            )
            patches.append(FilePatch("update", path, hunks))
    assert parse_patch(format_patch(patches, envelope=True)) == patches


def test_planned_against_a_real_workspace_the_way_the_toolbox_reads_files(tmp_path: Path) -> None:
    from lsp_agent.tools.workspace import Workspace

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_bytes(b"def f():\r\n    return 1\r\n")
    (tmp_path / "old.txt").write_text("bye\n", encoding="utf-8")
    ws = Workspace(tmp_path)

    def read_current(path: str) -> tuple[Path, str | None]:
        target = ws.resolve(path, for_write=True)
        return target, ws.read_disk(target).text if target.exists() else None

    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n-    return 1\n+    return 2\n"
        "*** Add File: src/new.py\n+x = 1\n*** Delete File: ./old.txt\n*** End Patch"
    )
    changes = plan_patch(parse_patch(patch), read_current)
    assert [(c.path, c.kind) for c in changes] == [
        (ws.root / "src" / "app.py", "update"),
        (ws.root / "src" / "new.py", "add"),
        (ws.root / "old.txt", "delete"),
    ]
    assert changes[0].after == "def f():\r\n    return 2\r\n"
    with pytest.raises(PatchError) as caught:
        plan_patch(parse_patch(patch.replace("src/new.py", "../evil.py")), read_current)
    assert caught.value.reason == "path"


def test_the_example_in_the_tool_description_is_a_patch_that_works() -> None:
    description = APPLY_PATCH_SCHEMA["function"]["description"]
    example = description[description.index("*** Begin Patch") : description.index("*** End Patch")]
    files = {"src/app.py": "def greet():\n    return 'hello'\n", "old.txt": "x\n"}
    changes = planned(example + "*** End Patch", files)
    assert describe(changes) == "edit src/app.py, create src/new.py, delete old.txt"
    assert changes[0].after == "def greet():\n    return 'hi'\n"
