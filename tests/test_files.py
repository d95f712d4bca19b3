"""The read-only tools as the model sees them: read_file pages, search and list_files results.

Search and listing run the real `rg` on real files; `.gitignore` cases use a real `git init`.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.errors import ToolError
from lsp_agent.tools import files
from lsp_agent.tools.files import content_hash, format_read, list_files, search
from lsp_agent.tools.workspace import Workspace


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)


def body(result: str) -> list[str]:
    """The result lines after the header, without the trailing note."""
    return [line for line in result.splitlines()[1:] if not line.startswith("…")]


# -- read_file -------------------------------------------------------------------------------


def test_read_shows_numbered_lines_like_cat_n() -> None:
    result = format_read("src/app.py", "import os\n\tprint(os.sep)\n")
    assert result.splitlines() == [
        "src/app.py: lines 1–2 of 2",
        "     1\timport os",
        "     2\t\tprint(os.sep)",
    ]


def test_a_long_file_is_paginated_and_says_how_to_continue() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 501))
    first = format_read("big.txt", text)
    assert first.splitlines()[0] == "big.txt: lines 1–200 of 500"
    assert len(first.splitlines()) == 1 + 200 + 1
    assert first.splitlines()[-1] == "… 300 more lines; call read_file with start=201 to continue"
    second = format_read("big.txt", text, start=201)
    assert second.splitlines()[1] == "   201\tline 201"
    last = format_read("big.txt", text, start=401)
    assert last.splitlines()[0] == "big.txt: lines 401–500 of 500"
    assert "continue" not in last


def test_limit_and_start_pick_a_window() -> None:
    text = "a\nb\nc\nd\ne\n"
    assert format_read("f", text, start=2, limit=2).splitlines() == [
        "f: lines 2–3 of 5",
        "     2\tb",
        "     3\tc",
        "… 2 more lines; call read_file with start=4 to continue",
    ]


def test_start_beyond_the_end_says_how_many_lines_there_are() -> None:
    with pytest.raises(ToolError) as caught:
        format_read("short.py", "a\nb\nc\n", start=10)
    assert "3 lines" in caught.value.message
    assert "from 1 to 3" in caught.value.message


def test_a_negative_start_is_refused_and_zero_means_the_first_line() -> None:
    with pytest.raises(ToolError):
        format_read("f", "a\n", start=-5)
    assert format_read("f", "a\n", start=0).splitlines()[1] == "     1\ta"


def test_an_empty_file_says_so() -> None:
    assert format_read("empty.txt", "") == "empty.txt: empty file (0 lines)"


def test_a_crlf_file_does_not_show_carriage_returns() -> None:
    result = format_read("win.txt", "one\r\ntwo\r\n")
    assert "\r" not in result
    assert result.splitlines()[1:] == ["     1\tone", "     2\ttwo"]


def test_a_last_line_without_newline_is_shown() -> None:
    assert format_read("f", "a\nb").splitlines() == ["f: lines 1–2 of 2", "     1\ta", "     2\tb"]


def test_blank_lines_count() -> None:
    assert format_read("f", "\n\n").splitlines() == ["f: lines 1–2 of 2", "     1\t", "     2\t"]


def test_a_very_long_line_is_cut_with_a_marker() -> None:
    result = format_read("min.js", "x" * 50_000 + "\nshort\n")
    first = result.splitlines()[1]
    assert len(first) < 2100
    assert "line cut: 50000 chars" in first
    assert result.splitlines()[2] == "     2\tshort"


def test_content_hash_is_the_sha256_of_the_utf8_text() -> None:
    assert content_hash("café\n") == hashlib.sha256("café\n".encode()).hexdigest()
    assert content_hash("a\n") != content_hash("a\r\n")


# -- search ----------------------------------------------------------------------------------


async def test_search_shows_path_line_and_text_relative_to_the_root(
    ws: Workspace, root: Path
) -> None:
    write(root, "src/app.py", "import os\n\ndef main():\n    return os.getcwd()\n")
    write(root, "README.md", "Run main() to start.\n")
    result = await search(ws, r"main\(\)")
    assert result.splitlines() == [
        "2 matches for 'main\\\\(\\\\)' in the workspace:",
        "README.md:1:Run main() to start.",
        "src/app.py:3:def main():",
    ]


async def test_no_match_is_a_plain_result_not_an_error(ws: Workspace, root: Path) -> None:
    write(root, "a.py", "x = 1\n")
    result = await search(ws, "nowhere_to_be_found")
    assert result.startswith("no matches for 'nowhere_to_be_found' in the workspace")
    assert ".gitignore" in result


async def test_gitignored_files_are_not_searched(ws: Workspace, root: Path) -> None:
    git_init(root)
    write(root, ".gitignore", "build/\n*.log\n")
    write(root, "src/app.py", "TOKEN = 1\n")
    write(root, "build/app.py", "TOKEN = 1\n")
    write(root, "debug.log", "TOKEN\n")
    assert body(await search(ws, "TOKEN")) == ["src/app.py:1:TOKEN = 1"]


async def test_gitignore_is_honoured_in_a_folder_that_is_not_a_git_repository(
    ws: Workspace, root: Path
) -> None:
    write(root, ".gitignore", "generated/\n")
    write(root, "main.py", "TOKEN = 1\n")
    write(root, "generated/out.py", "TOKEN = 2\n")
    assert body(await search(ws, "TOKEN")) == ["main.py:1:TOKEN = 1"]


async def test_git_virtualenvs_node_modules_and_env_files_are_never_searched(
    ws: Workspace, root: Path
) -> None:
    git_init(root)
    write(root, "app.py", "TOKEN\n")
    for rel in (
        ".venv/lib/x.py",
        "venv/lib/x.py",
        "node_modules/pkg/index.js",
        "web/node_modules/pkg/index.js",
        ".env",
        ".env.local",
        "config/.envrc",
        ".git/TOKEN_NOTES",
    ):
        write(root, rel, "TOKEN\n")
    (root / ".git" / "description").write_text("TOKEN\n")
    assert body(await search(ws, "TOKEN")) == ["app.py:1:TOKEN"]


async def test_dotfiles_like_github_workflows_are_searched(ws: Workspace, root: Path) -> None:
    write(root, ".github/workflows/ci.yml", "run: pytest\n")
    write(root, ".editorconfig", "# pytest style\n")
    assert body(await search(ws, "pytest")) == [
        ".editorconfig:1:# pytest style",
        ".github/workflows/ci.yml:1:run: pytest",
    ]


async def test_search_caps_at_50_matches_and_says_so(ws: Workspace, root: Path) -> None:
    for n in range(6):
        write(root, f"m{n}.py", "".join(f"hit = {i}\n" for i in range(12)))
    result = await search(ws, "hit")
    lines = result.splitlines()
    assert lines[0] == "50 of 72 matches for 'hit' in the workspace:"
    assert len(body(result)) == 50
    assert lines[-1] == "… 22 more matches not shown; narrow the pattern or path (or use glob)"


@pytest.mark.timeout(20)
async def test_a_huge_number_of_matches_stops_rg_early(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "COUNT_LIMIT", 1000)
    write(root, "big.txt", "hit\n" * 200_000)
    result = await search(ws, "hit")
    assert result.splitlines()[0].startswith("50 of at least 1050 matches")
    assert "… at least 1000 more matches not shown" in result


async def test_the_shown_matches_are_sorted_by_path_and_line(ws: Workspace, root: Path) -> None:
    for name in ("b.py", "a.py", "c/a.py"):
        write(root, name, "x\nhit\nhit\n")
    assert body(await search(ws, "hit")) == [
        "a.py:2:hit",
        "a.py:3:hit",
        "b.py:2:hit",
        "b.py:3:hit",
        "c/a.py:2:hit",
        "c/a.py:3:hit",
    ]


async def test_an_invalid_regex_quotes_rg_and_suggests_escaping(ws: Workspace, root: Path) -> None:
    write(root, "a.py", "f(x)\n")
    with pytest.raises(ToolError) as caught:
        await search(ws, "f(x")
    assert caught.value.reason == "pattern"
    assert "invalid regex 'f(x'" in caught.value.message
    assert "unclosed group" in caught.value.message
    assert "escape" in caught.value.message


async def test_an_invalid_glob_is_explained(ws: Workspace, root: Path) -> None:
    write(root, "a.py", "x\n")
    with pytest.raises(ToolError) as caught:
        await search(ws, "x", glob="{a")
    assert "invalid glob" in caught.value.message


async def test_a_pattern_that_looks_like_a_flag_is_searched_for(ws: Workspace, root: Path) -> None:
    write(root, "notes.md", "use --force with care\n")
    assert body(await search(ws, "--force")) == ["notes.md:1:use --force with care"]


async def test_path_and_glob_narrow_the_search(ws: Workspace, root: Path) -> None:
    write(root, "src/a.py", "hit\n")
    write(root, "src/a.ts", "hit\n")
    write(root, "tests/a.py", "hit\n")
    assert body(await search(ws, "hit", "src")) == ["src/a.py:1:hit", "src/a.ts:1:hit"]
    assert body(await search(ws, "hit", glob="*.py")) == ["src/a.py:1:hit", "tests/a.py:1:hit"]
    assert body(await search(ws, "hit", glob="src/**/*.ts")) == ["src/a.ts:1:hit"]
    assert body(await search(ws, "hit", "src/a.ts")) == ["src/a.ts:1:hit"]
    assert (await search(ws, "hit", "src/a.ts", glob="*.py")).startswith("no matches")
    result = await search(ws, "hit", "src", glob="*.rs")
    assert result.startswith("no matches for 'hit' in src (glob *.rs)")


async def test_the_user_glob_cannot_bring_back_excluded_folders(ws: Workspace, root: Path) -> None:
    write(root, "node_modules/x.js", "hit\n")
    write(root, "app.js", "hit\n")
    assert body(await search(ws, "hit", glob="**/*.js")) == ["app.js:1:hit"]


async def test_a_long_matched_line_is_cut_around_the_match(ws: Workspace, root: Path) -> None:
    write(root, "min.js", "a" * 10_000 + "NEEDLE" + "b" * 10_000 + "\n")
    [line] = body(await search(ws, "NEEDLE"))
    assert line.startswith("min.js:1:…")
    assert "NEEDLE" in line
    assert "line cut: 20006 chars" in line
    assert len(line) < 400


async def test_a_crlf_file_matches_without_carriage_returns(ws: Workspace, root: Path) -> None:
    (root / "win.txt").write_bytes(b"one\r\nhit two\r\n")
    assert body(await search(ws, "hit")) == ["win.txt:2:hit two"]


async def test_searching_outside_the_workspace_is_refused(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        await search(ws, "root", "/etc")
    assert caught.value.reason == "path"


async def test_searching_a_protected_folder_is_refused(ws: Workspace, root: Path) -> None:
    git_init(root)
    with pytest.raises(ToolError) as caught:
        await search(ws, "core", ".git")
    assert "protected path refused" in caught.value.message


async def test_searching_a_missing_folder_says_so(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        await search(ws, "x", "no/such/dir")
    assert caught.value.reason == "not_found"
    assert "list_files" in caught.value.message


async def test_an_empty_pattern_is_refused(ws: Workspace) -> None:
    with pytest.raises(ToolError):
        await search(ws, "")


async def test_a_missing_rg_gives_a_clear_error(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(root / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(root / "empty"))
    with pytest.raises(ToolError) as caught:
        await search(ws, "x")
    assert caught.value.reason == "missing_tool"
    assert "pip install ripgrep" in caught.value.message


def test_rg_is_found_next_to_the_interpreter_before_path(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = write(root, "venv/bin/rg", "#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(root / "venv" / "bin" / "python"))
    assert files.find_rg() == str(fake)


@pytest.mark.timeout(20)
async def test_a_cancelled_search_leaves_no_rg_running(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[asyncio.subprocess.Process] = []
    real_exec = asyncio.create_subprocess_exec

    async def spy(*args: str, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real_exec(*args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spy)
    monkeypatch.setattr(files, "COUNT_LIMIT", 10**9)
    write(root, "big.txt", "hit\n" * 2_000_000)
    task = asyncio.create_task(search(ws, "hit"))
    while not started:  # until rg runs (a hang guard: the test's timeout)
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert started[0].returncode is not None


@pytest.mark.timeout(20)
async def test_a_search_past_its_timeout_stops_and_says_so(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "COUNT_LIMIT", 10**9)
    for n in range(200):
        write(root, f"f{n:03d}.txt", "hit\n" * 20_000)
    result = await search(ws, "hit", timeout=0.2)
    assert "stopped after 0.2 s" in result.splitlines()[0]
    assert "at least" in result


# -- list_files ------------------------------------------------------------------------------


async def test_list_files_is_sorted_and_relative(ws: Workspace, root: Path) -> None:
    for rel in ("src/b.py", "src/a.py", "README.md", ".github/ci.yml"):
        write(root, rel, "")
    result = await list_files(ws)
    assert result.splitlines() == [
        "4 files in the workspace:",
        ".github/ci.yml",
        "README.md",
        "src/a.py",
        "src/b.py",
    ]


async def test_list_files_skips_ignored_and_protected_files(ws: Workspace, root: Path) -> None:
    git_init(root)
    write(root, ".gitignore", "dist/\n")
    for rel in ("app.py", "dist/app.js", ".venv/x.py", "venv/x.py", "node_modules/a.js", ".env"):
        write(root, rel, "")
    assert body(await list_files(ws)) == [".gitignore", "app.py"]


async def test_list_files_is_bounded_and_says_how_many_more(ws: Workspace, root: Path) -> None:
    for n in range(30):
        write(root, f"f{n:02d}.txt", "")
    result = await list_files(ws, max_entries=10)
    lines = result.splitlines()
    assert lines[0] == "10 of 30 files in the workspace:"
    assert lines[1:11] == [f"f{n:02d}.txt" for n in range(10)]
    assert lines[-1] == "… 20 more files not shown; narrow with path or glob"


async def test_list_files_of_a_folder_and_with_a_glob(ws: Workspace, root: Path) -> None:
    for rel in ("src/a.py", "src/b.ts", "src/deep/c.py", "tests/t.py"):
        write(root, rel, "")
    assert body(await list_files(ws, "src")) == ["src/a.py", "src/b.ts", "src/deep/c.py"]
    assert body(await list_files(ws, "src", "*.py")) == ["src/a.py", "src/deep/c.py"]
    assert body(await list_files(ws, glob="src/*.ts")) == ["src/b.ts"]


async def test_listing_a_file_path_gives_that_file(ws: Workspace, root: Path) -> None:
    write(root, "src/a.py", "")
    assert await list_files(ws, "src/a.py") == "1 file:\nsrc/a.py"
    assert (await list_files(ws, "src/a.py", "*.ts")).startswith("no files in src/a.py")


async def test_listing_a_missing_path_is_an_error(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        await list_files(ws, "nope")
    assert caught.value.reason == "not_found"


async def test_listing_an_empty_folder_says_so(ws: Workspace, root: Path) -> None:
    (root / "empty").mkdir()
    result = await list_files(ws, "empty")
    assert result.startswith("no files in empty")


async def test_listing_outside_the_workspace_is_refused(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        await list_files(ws, "..")
    assert "outside the workspace" in caught.value.message


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_nested_gitignore_applies_to_its_folder(ws: Workspace, root: Path) -> None:
    git_init(root)
    write(root, "pkg/.gitignore", "*.gen.py\n")
    write(root, "pkg/a.py", "")
    write(root, "pkg/a.gen.py", "")
    write(root, "b.gen.py", "")
    assert body(await list_files(ws)) == ["b.gen.py", "pkg/.gitignore", "pkg/a.py"]
