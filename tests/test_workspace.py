"""Path confinement and disk reads: what the agent may touch, and how a refusal reads."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lsp_agent.errors import ToolError
from lsp_agent.safety.protected import off_limits
from lsp_agent.tools import workspace
from lsp_agent.tools.workspace import Workspace


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with a few files, next to an `outside` folder it must not reach."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hi')\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".env").write_text("API_KEY=secret\n")
    (ws / ".venv" / "lib").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours\n")
    return ws


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)


def refusal(ws: Workspace, path: str, *, for_write: bool = False) -> ToolError:
    with pytest.raises(ToolError) as caught:
        ws.resolve(path, for_write=for_write)
    return caught.value


# -- what resolves ---------------------------------------------------------------------------


def test_a_relative_path_resolves_under_the_root(ws: Workspace, root: Path) -> None:
    assert ws.resolve("src/app.py") == root.resolve() / "src" / "app.py"


def test_an_absolute_path_inside_the_root_is_accepted(ws: Workspace, root: Path) -> None:
    assert ws.resolve(str(root / "src" / "app.py")) == root.resolve() / "src" / "app.py"


def test_a_file_uri_from_the_editor_is_accepted(ws: Workspace, root: Path) -> None:
    spaced = root / "src" / "my file #1.py"
    spaced.write_text("")
    assert ws.resolve(spaced.as_uri()) == spaced.resolve()


def test_a_file_that_does_not_exist_yet_resolves_for_writing(ws: Workspace, root: Path) -> None:
    assert ws.resolve("src/new/module.py", for_write=True) == root.resolve() / "src/new/module.py"


def test_an_empty_path_is_the_root_for_listing(ws: Workspace, root: Path) -> None:
    assert ws.resolve("") == root.resolve()
    assert ws.resolve(".") == root.resolve()


def test_dotdot_that_stays_inside_is_fine(ws: Workspace, root: Path) -> None:
    assert ws.resolve("src/../src/app.py") == root.resolve() / "src" / "app.py"


def test_a_symlink_inside_the_workspace_is_followed(ws: Workspace, root: Path) -> None:
    (root / "link.py").symlink_to(root / "src" / "app.py")
    assert ws.resolve("link.py") == root.resolve() / "src" / "app.py"


def test_a_root_opened_through_a_symlink_accepts_both_spellings(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    ws = Workspace(alias)
    assert ws.root == real.resolve()
    assert ws.resolve(str(alias / "src")) == real.resolve() / "src"
    assert ws.relative(alias / "src") == "src"


# -- what is refused -------------------------------------------------------------------------


def test_dotdot_escaping_the_root_is_refused(ws: Workspace, root: Path) -> None:
    error = refusal(ws, "../outside/secret.txt")
    assert error.reason == "path"
    assert "outside the workspace" in error.message
    assert f"use a path under {root.resolve()}" in error.message


def test_an_absolute_path_elsewhere_is_refused(ws: Workspace) -> None:
    assert "outside the workspace" in refusal(ws, "/etc/passwd").message


def test_a_sibling_folder_sharing_the_roots_prefix_is_outside(ws: Workspace, root: Path) -> None:
    sibling = root.parent / (root.name + "-evil")
    sibling.mkdir()
    assert "outside the workspace" in refusal(ws, str(sibling / "x.py")).message
    assert "outside the workspace" in refusal(ws, f"../{root.name}-evil/x.py").message


def test_a_symlink_to_etc_is_refused(ws: Workspace, root: Path) -> None:
    (root / "etc").symlink_to("/etc")
    assert "outside the workspace" in refusal(ws, "etc/passwd").message
    assert "outside the workspace" in refusal(ws, "etc").message


def test_a_symlinked_file_pointing_outside_is_refused(ws: Workspace, root: Path) -> None:
    (root / "src" / "notes.txt").symlink_to(root.parent / "outside" / "secret.txt")
    assert "outside the workspace" in refusal(ws, "src/notes.txt").message
    assert "outside the workspace" in refusal(ws, "src/notes.txt", for_write=True).message


def test_a_dangling_symlink_pointing_outside_is_refused_for_writing(
    ws: Workspace, root: Path
) -> None:
    (root / "planted.py").symlink_to(root.parent / "outside" / "not-yet.py")
    assert "outside the workspace" in refusal(ws, "planted.py", for_write=True).message


@pytest.mark.parametrize(
    "path",
    [".git", ".git/config", "src/../.git/config", "vendor/lib/.git/HEAD", ".GIT/config"],
)
def test_the_git_folder_is_off_limits_for_reading_and_writing(ws: Workspace, path: str) -> None:
    for for_write in (False, True):
        error = refusal(ws, path, for_write=for_write)
        assert error.reason == "path"
        assert "protected path refused" in error.message
        assert "git log" in error.message


@pytest.mark.parametrize("path", [".env", ".env.local", ".envrc", "config/.env.production"])
def test_env_files_are_off_limits(ws: Workspace, path: str) -> None:
    error = refusal(ws, path)
    assert "protected path refused" in error.message
    assert ".env*" in error.message
    assert "ask the user" in error.message


def test_the_virtualenv_is_off_limits(ws: Workspace) -> None:
    assert "protected path refused" in refusal(ws, ".venv/lib/site.py").message
    assert "protected path refused" in refusal(ws, ".venv", for_write=True).message


def test_a_symlink_into_git_is_refused(ws: Workspace, root: Path) -> None:
    (root / "innocent").symlink_to(root / ".git" / "config")
    assert "protected path refused" in refusal(ws, "innocent").message


def test_a_symlink_named_env_is_refused_even_if_its_target_is_harmless(
    ws: Workspace, root: Path
) -> None:
    (root / "settings.ini").write_text("x = 1\n")
    (root / ".env.dev").symlink_to(root / "settings.ini")
    assert "protected path refused" in refusal(ws, ".env.dev").message


def test_a_nul_byte_is_refused(ws: Workspace) -> None:
    error = refusal(ws, "src/app.py\x00.txt")
    assert error.reason == "path"
    assert "NUL" in error.message


def test_a_symlink_loop_is_refused_not_crashed_on(ws: Workspace, root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    assert refusal(ws, "a/file.py").reason == "path"


@pytest.mark.parametrize("uri", ["https://example.com/x.py", "vscode-remote://ssh/x.py"])
def test_a_uri_that_is_not_a_file_is_refused(ws: Workspace, uri: str) -> None:
    assert "unsupported URI" in refusal(ws, uri).message


def test_a_colon_in_a_file_name_is_not_a_uri(ws: Workspace, root: Path) -> None:
    assert ws.resolve("notes:v2.md") == root.resolve() / "notes:v2.md"


def test_a_file_uri_on_another_host_is_refused(ws: Workspace) -> None:
    assert refusal(ws, "file://server/share/x.py").reason == "path"


def test_a_file_uri_outside_the_root_is_refused(ws: Workspace) -> None:
    assert "outside the workspace" in refusal(ws, "file:///etc/passwd").message


def test_a_percent_encoded_nul_in_a_uri_is_refused(ws: Workspace) -> None:
    assert "NUL" in refusal(ws, "file:///tmp/x%00y").message


# -- readOnlyPaths ---------------------------------------------------------------------------


def test_read_only_paths_may_be_read_but_not_written(root: Path) -> None:
    ws = Workspace(root, read_only=["generated/**", "*.lock"])
    assert ws.resolve("generated/api.py") == root.resolve() / "generated" / "api.py"
    assert ws.resolve("poetry.lock") == root.resolve() / "poetry.lock"
    for path in ("generated/api.py", "poetry.lock", "sub/dir/uv.lock"):
        error = refusal(ws, path, for_write=True)
        assert error.reason == "path"
        assert "read-only path refused" in error.message
        assert "generated/**" in error.message
    assert ws.resolve("src/app.py", for_write=True) == root.resolve() / "src" / "app.py"


def test_a_read_only_file_cannot_be_written_through_a_symlink(root: Path) -> None:
    (root / "generated").mkdir()
    (root / "generated" / "api.py").write_text("")
    (root / "api.py").symlink_to(root / "generated" / "api.py")
    ws = Workspace(root, read_only=["generated/"])
    assert "read-only path refused" in refusal(ws, "api.py", for_write=True).message


# -- relative --------------------------------------------------------------------------------


def test_relative_gives_a_posix_path_for_messages(ws: Workspace, root: Path) -> None:
    assert ws.relative(root.resolve() / "src" / "app.py") == "src/app.py"
    assert ws.relative(root.resolve()) == "."


# -- read_disk -------------------------------------------------------------------------------


def test_a_text_file_is_read_with_its_line_endings(ws: Workspace, root: Path) -> None:
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    document = ws.read_disk(ws.resolve("crlf.txt"))
    assert document.text == "one\r\ntwo\r\n"
    assert document.version is None
    assert document.bom is False


def test_bom_is_stripped_and_remembered(ws: Workspace, root: Path) -> None:
    (root / "bom.py").write_bytes(b"\xef\xbb\xbfx = 'caf\xc3\xa9'\n")
    document = ws.read_disk(ws.resolve("bom.py"))
    assert document.text == "x = 'café'\n"
    assert document.bom is True


def test_binary_file_is_refused_with_a_clear_message(ws: Workspace, root: Path) -> None:
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("logo.png"))
    assert caught.value.reason == "binary"
    assert "binary file refused: logo.png" in caught.value.message


def test_a_nul_byte_after_the_first_8_kb_does_not_make_a_file_binary(
    ws: Workspace, root: Path
) -> None:
    (root / "late.txt").write_bytes(b"a" * 9000 + b"\x00")
    assert ws.read_disk(ws.resolve("late.txt")).text.endswith("\x00")


def test_a_latin1_file_is_refused_as_not_utf8(ws: Workspace, root: Path) -> None:
    (root / "old.txt").write_bytes(b"line one\ncaf\xe9\n")
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("old.txt"))
    assert caught.value.reason == "encoding"
    assert "not UTF-8" in caught.value.message
    assert "line 2" in caught.value.message


def test_a_utf16_file_is_named_as_such(ws: Workspace, root: Path) -> None:
    (root / "win.txt").write_bytes("hello\n".encode("utf-16"))
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("win.txt"))
    assert "UTF-16" in caught.value.message


def test_a_missing_file_suggests_list_files_or_search(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("src/nope.py"))
    assert caught.value.reason == "not_found"
    assert "src/nope.py" in caught.value.message
    assert "list_files" in caught.value.message
    assert "search" in caught.value.message


def test_a_file_too_large_to_read_whole_points_to_search_and_bash(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace, "MAX_FILE_BYTES", 1024)
    (root / "huge.log").write_text("x" * 2048)
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("huge.log"))
    assert caught.value.reason == "too_large"
    assert "sed -n" in caught.value.message


def test_reading_a_folder_says_to_list_it(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("src"))
    assert "list_files" in caught.value.message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.timeout(5)
def test_a_named_pipe_is_refused_instead_of_blocking(ws: Workspace, root: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(ToolError) as caught:
        ws.read_disk(ws.resolve("pipe"))
    assert "not a regular file" in caught.value.message


# -- properties ------------------------------------------------------------------------------

SEGMENTS = ["a", "sub", "..", ".", ".git", ".env.x", ".venv", "x.py", "out", "up", "gitlink"]


@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace full of traps: links outside, upwards, into .git, and protected folders."""
    base = tmp_path_factory.mktemp("maze")
    root = base / "ws"
    for folder in ("a/sub", "sub/a", ".git/a", ".venv/a", "a/.git"):
        (root / folder).mkdir(parents=True)
    (root / ".env.x").write_text("SECRET=1\n")
    (base / "elsewhere" / "a").mkdir(parents=True)
    (root / "out").symlink_to(base / "elsewhere")
    (root / "a" / "out").symlink_to("../../elsewhere")
    (root / "up").symlink_to("..")
    (root / "sub" / "up").symlink_to("..")
    (root / "gitlink").symlink_to(".git")
    (root / "a" / "gitlink").symlink_to("../.git/a")
    return root


def oracle(root: Path, path: str) -> Path | None:
    """An independent answer: os.path.realpath and string checks, None when refused."""
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, path))
    if target != real_root and not target.startswith(real_root + os.sep):
        return None
    below = posixpath.relpath(target, real_root).split("/") if target != real_root else []
    for part in [*path.split("/"), *below]:
        lowered = part.lower()
        if lowered in (".git", ".venv") or lowered.startswith(".env"):
            return None
    return Path(target)


relative_paths = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=7).map("/".join)


@settings(max_examples=400, deadline=None)
@given(path=relative_paths)
@example(path="up/up/a")
@example(path="out/a")
@example(path="gitlink/a")
@example(path="a/gitlink")
@example(path=".git/..")
@example(path="a/../..")
def test_resolve_never_returns_a_path_outside_or_protected(maze: Path, path: str) -> None:
    ws = Workspace(maze)
    try:
        resolved = ws.resolve(path)
    except ToolError as error:
        refused: ToolError | None = error
    else:
        refused = None
    if refused is not None:  # refusing is fine, for the reason of a path that may not be used
        assert refused.reason == "path"
        return
    assert resolved == resolved.resolve()
    assert resolved.is_relative_to(ws.root)
    assert not any(off_limits(part) for part in resolved.relative_to(ws.root).parts)


@settings(max_examples=400, deadline=None)
@given(path=relative_paths, absolute=st.booleans())
def test_resolve_agrees_with_a_simple_oracle(maze: Path, path: str, absolute: bool) -> None:
    ws = Workspace(maze)
    expected = oracle(maze, path)
    given_path = str(maze / path) if absolute else path
    try:
        resolved: Path | None = ws.resolve(given_path)
    except ToolError:
        resolved = None
    assert resolved == expected
