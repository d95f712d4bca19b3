"""AGENTS.md, the user's and the workspace's, reaches the system prompt; edits wait a session."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lsp_agent.agent import instructions
from lsp_agent.agent.instructions import (
    ChangeWatch,
    changed_note,
    fingerprint,
    read_instructions,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / ".agents").mkdir(parents=True)
    return path


def test_both_files_reach_the_prompt_labelled_user_first(root: Path, home: Path) -> None:
    (home / ".agents" / "AGENTS.md").write_text("Answer in French.\n", encoding="utf-8")
    (root / "AGENTS.md").write_text("Run `make test` before finishing.\n", encoding="utf-8")
    found = read_instructions(root, home)
    assert [f.label for f in found.files] == ["user", "workspace"]
    section = found.prompt_section()
    user_at = section.index('<agents_md source="user"')
    workspace_at = section.index('<agents_md source="workspace"')
    assert user_at < workspace_at
    assert "Answer in French." in section[user_at:workspace_at]
    assert "Run `make test` before finishing." in section[workspace_at:]
    assert section.count("</agents_md>") == 2
    assert "win over the user's" in section


def test_only_the_workspace_file(root: Path, home: Path) -> None:
    (root / "AGENTS.md").write_text("\ufeffUse tabs.\r\n", encoding="utf-8")
    found = read_instructions(root, home)
    assert [(f.label, f.text) for f in found.files] == [("workspace", "Use tabs.\r\n")]


def test_no_file_means_no_section(root: Path, home: Path) -> None:
    (root / "AGENTS.md").write_text("   \n", encoding="utf-8")
    found = read_instructions(root, home)
    assert found.files == ()
    assert found.prompt_section() == ""


def test_a_huge_file_is_cut_with_a_note(
    root: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(instructions, "MAX_CHARS", 10)
    (root / "AGENTS.md").write_text("0123456789abcdef", encoding="utf-8")
    (text,) = [f.text for f in read_instructions(root, home).files]
    assert text.startswith("0123456789\n[… 6 more characters of ")


def test_an_edit_is_noticed_and_said_to_take_effect_next_session(root: Path, home: Path) -> None:
    agents = root / "AGENTS.md"
    agents.write_text("v1\n", encoding="utf-8")
    at_start = read_instructions(root, home)
    assert changed_note(at_start, root, home) is None
    agents.write_text("v2\n", encoding="utf-8")
    note = changed_note(at_start, root, home)
    assert note is not None
    assert "take effect in the next session" in note
    agents.write_text("v1\n", encoding="utf-8")
    assert changed_note(at_start, root, home) is None


async def test_the_watch_asked_before_every_call_sees_each_edit(root: Path, home: Path) -> None:
    """Edits of the same size, a file created in the user's folder, the old text restored."""
    agents = root / "AGENTS.md"
    agents.write_text("v1\n", encoding="utf-8")
    an_hour_ago = time.time() - 3600
    os.utime(agents, (an_hour_ago, an_hour_ago))  # old enough for its stats to be trusted
    watch = ChangeWatch(read_instructions(root, home), root, home)
    assert await watch.note() is None
    assert await watch.note() is None
    agents.write_text("v2\n", encoding="utf-8")  # same size
    assert await watch.note() == changed_note(watch.at_start, root, home)
    assert await watch.note() is not None
    agents.write_text("v1\n", encoding="utf-8")
    assert await watch.note() is None
    user = home / ".agents" / "AGENTS.md"
    user.write_text("be brief\n", encoding="utf-8")
    assert await watch.note() is not None
    user.unlink()
    assert await watch.note() is None


def test_creating_or_deleting_a_file_changes_the_fingerprint(root: Path, home: Path) -> None:
    empty = fingerprint(root, home)
    user = home / ".agents" / "AGENTS.md"
    user.write_text("", encoding="utf-8")
    created_empty = fingerprint(root, home)
    assert created_empty != empty
    user.unlink()
    assert fingerprint(root, home) == empty
    assert read_instructions(root, home).fingerprint == empty


def test_the_same_text_in_the_other_file_is_a_change(root: Path, home: Path) -> None:
    (root / "AGENTS.md").write_text("x\n", encoding="utf-8")
    before = fingerprint(root, home)
    (root / "AGENTS.md").unlink()
    (home / ".agents" / "AGENTS.md").write_text("x\n", encoding="utf-8")
    assert fingerprint(root, home) != before
