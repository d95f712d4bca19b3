"""The edit corpus: 186 real edits replayed through both edit tools and the editor's text edits.

Each case is a file before and after a commit and the `edit_file(old, new)` calls that make the
change. The model's calls go through `plan_edit`, the result reaches the "editor" as minimal
UTF-16 text edits, and the bytes the editor would save must equal the commit's, byte for byte.
The same change also goes through `apply_patch` as ONE patch: git's own diff of the case (a
real repository holding every case, diffed once), so the multi-edit cases are multi-hunk
patches.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.lsp.positions import TextEdit, apply_text_edits, text_edits
from lsp_agent.tools.edits import plan_edit
from lsp_agent.tools.patch import parse_patch, plan_patch

BOM = "\ufeff"
LSP_EOL = re.compile(r"\r\n|\r|\n")


def corpus_path() -> Path:
    """Where the corpus is: `LSP_AGENT_EDIT_CORPUS`, else next to the repository."""
    override = os.environ.get("LSP_AGENT_EDIT_CORPUS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "shared/data/edit-corpus/cases.jsonl"


MISSING: dict[str, Any] = {"id": "corpus-missing"}
"""Stands in for the cases when the file is absent, so that the run fails instead of skipping."""


def load_cases() -> list[dict[str, Any]]:
    path = corpus_path()
    if not path.is_file():
        return [MISSING]
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


CASES = load_cases()


def require_corpus() -> None:
    if CASES == [MISSING]:
        pytest.fail(
            f"edit corpus not found at {corpus_path()}: "
            "set LSP_AGENT_EDIT_CORPUS to the path of cases.jsonl"
        )


def test_the_corpus_has_every_case() -> None:
    require_corpus()
    assert len(CASES) == 186
    assert len({case["id"] for case in CASES}) == 186


def editor_apply(text: str, edits: list[TextEdit]) -> str:
    """Apply UTF-16 edits the way a UTF-16 editor buffer (VS Code's) does, independently.

    The text is handled as UTF-16 code units; a position inside a surrogate pair or past the end
    of its line (a CRLF cut in two) fails here instead of being silently clamped.
    """
    units = text.encode("utf-16-le")
    starts, line_ends = [0], []  # byte offsets: where each line starts, where its content ends
    last = 0
    for match in LSP_EOL.finditer(text):
        line_ends.append(starts[-1] + len(text[last : match.start()].encode("utf-16-le")))
        starts.append(line_ends[-1] + 2 * len(match.group()))
        last = match.end()
    line_ends.append(len(units))

    def offset(line: int, character: int) -> int:
        assert 0 <= line < len(starts), f"line {line} out of range"
        byte = starts[line] + 2 * character
        assert byte <= line_ends[line], f"({line}, {character}) is past the end of its line"
        if byte < len(units):
            code_unit = int.from_bytes(units[byte : byte + 2], "little")
            assert not 0xDC00 <= code_unit <= 0xDFFF, f"({line}, {character}) splits a pair"
        return byte

    out = bytearray()
    cursor = 0
    for edit in edits:
        start = offset(edit.start_line, edit.start_character)
        end = offset(edit.end_line, edit.end_character)
        assert cursor <= start <= end, "edits must be sorted and must not overlap"
        out += units[cursor:start] + edit.new_text.encode("utf-16-le")
        cursor = end
    out += units[cursor:]
    return out.decode("utf-16-le")


def touched(before: str, edits: list[TextEdit]) -> tuple[int, int]:
    """(characters replaced or inserted in total, widest single range), for UTF-16 edits."""
    starts = [0, *(m.end() for m in LSP_EOL.finditer(before))]

    def offset(line: int, character: int) -> int:
        # Code units to code points: count the surrogate pairs before the position.
        line_text = before[starts[line] :]
        units = 0
        for index, char in enumerate(line_text):
            if units >= character:
                return starts[line] + index
            units += 2 if ord(char) > 0xFFFF else 1
        return starts[line] + len(line_text)

    total = widest = 0
    for edit in edits:
        span = offset(edit.end_line, edit.end_character) - offset(
            edit.start_line, edit.start_character
        )
        total += span + len(edit.new_text)
        widest = max(widest, span)
    return total, widest


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_the_editor_saves_exactly_the_committed_bytes(case: dict[str, Any]) -> None:
    require_corpus()
    text = model_view(case)
    for edit in case["edits"]:
        text = plan_edit(text, edit["old"], edit["new"], path=case["path"])
    assert_saved_exactly(case, text)


@pytest.fixture(scope="module")
def git_diffs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Git's diff of every case, by path: one repository holds them all, diffed once."""
    require_corpus()
    root = tmp_path_factory.mktemp("corpus")
    git = ["git", "-C", str(root), "-c", "core.autocrlf=false", "-c", "core.quotepath=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    for case in CASES:
        path = root / case["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(case["before_b64"]))
    subprocess.run([*git, "add", "-A"], check=True)
    author = ["-c", "user.name=corpus", "-c", "user.email=corpus@example.com"]
    subprocess.run([*git, *author, "commit", "-q", "-m", "before"], check=True)
    for case in CASES:
        (root / case["path"]).write_bytes(base64.b64decode(case["after_b64"]))
    diff = subprocess.run(
        [*git, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--text", "-U3"],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    blocks = re.split(r"^(?=diff --git )", diff, flags=re.MULTILINE)
    found = {}
    for block in blocks:
        header = re.match(r"diff --git a/(\S+) b/", block)
        if header:
            found[header.group(1)] = block
    return found


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_git_s_own_diff_of_the_case_lands_exactly_through_apply_patch(
    case: dict[str, Any], git_diffs: dict[str, str]
) -> None:
    text = model_view(case)
    patch = git_diffs[case["path"]]
    (change,) = plan_patch(parse_patch(patch), lambda name: (Path(name), text))
    assert change.after is not None
    assert_saved_exactly(case, change.after)


def model_view(case: dict[str, Any]) -> str:
    """The text the model works on: the editor's view, without the BOM, unless the commit
    adds or removes the BOM (its edits then say so, and carry the character)."""
    before = base64.b64decode(case["before_b64"]).decode("utf-8", errors="strict")
    return before if bom_in_edits(case) else before.removeprefix(BOM)


def bom_in_edits(case: dict[str, Any]) -> bool:
    return any(BOM in edit["old"] + edit["new"] for edit in case["edits"])


def assert_saved_exactly(case: dict[str, Any], text: str) -> None:
    """`text` (the model's view after its change) reaches the editor as minimal UTF-16 text
    edits, and the bytes the editor saves are the commit's."""
    before = base64.b64decode(case["before_b64"]).decode("utf-8", errors="strict")
    after = base64.b64decode(case["after_b64"])
    had_bom = before.startswith(BOM)
    editor_before = before.removeprefix(BOM)
    if bom_in_edits(case):
        has_bom = text.startswith(BOM)
        editor_after = text.removeprefix(BOM)
    else:
        has_bom, editor_after = had_bom, text

    edits = text_edits(editor_before, editor_after, "utf-16")
    saved = apply_text_edits(editor_before, edits, "utf-16")
    assert ((BOM if has_bom else "") + saved).encode("utf-8") == after
    assert editor_apply(editor_before, edits) == saved

    # Minimal hunks: never more than the case's own old/new strings (which carry context
    # lines), and never a whole-file rewrite for a change that is small next to the file.
    crlf = case["lf_in_crlf"]
    budget = sum(
        len(edit["old"])
        + len(edit["new"])
        + (edit["old"].count("\n") + edit["new"].count("\n") if crlf else 0)
        for edit in case["edits"]
    )
    total, widest = touched(editor_before, edits)
    assert total <= budget
    if budget * 4 < len(editor_before):
        assert widest < len(editor_before) // 2
        assert total < len(editor_before) // 2
