"""AGENTS.md, the user's and the workspace's, reaches the system prompt; edits wait a session."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

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
    assert text.startswith("0123456789\n[… the rest of ")
    assert "longer than 10 characters" in text


def test_a_400_mb_agents_md_is_read_only_as_far_as_the_cut(root: Path, home: Path) -> None:
    # Sparse: 400 MB to read, none of it on disk. Reading it whole would cost 1.2 GB of memory.
    with (root / "AGENTS.md").open("wb") as handle:
        handle.write(b"Use tabs.\n")
        handle.truncate(400 * 1024 * 1024)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    found = read_instructions(root, home)

    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 20 * 1024, f"reading AGENTS.md grew the process by {grown_kib} KiB"
    (text,) = [f.text for f in found.files]
    assert text.startswith("Use tabs.")
    assert len(text) < instructions.MAX_CHARS + 300
    assert "is not included" in text


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda root, out: (root / "AGENTS.md").symlink_to(out), "links outside the workspace"),
        (lambda root, out: (root / "AGENTS.md").symlink_to("/proc/self/environ"),
         "links outside the workspace"),
        (lambda root, out: (root / "AGENTS.md").symlink_to("/dev/zero"),
         "links outside the workspace"),
        (lambda root, out: os.mkfifo(root / "AGENTS.md"), "a pipe (FIFO)"),
        (lambda root, out: ((root / "docs").symlink_to(out.parent), (root / "AGENTS.md")
                            .symlink_to("docs/secret.txt")), "links outside the workspace"),
    ],
    ids=["a link to a file outside", "a link to the environ", "a link to /dev/zero", "a FIFO",
         "a link through a folder link"],
)  # fmt: skip
def test_an_agents_md_that_is_not_a_file_of_the_workspace_is_refused_in_one_line(
    root: Path, home: Path, tmp_path: Path, make: Any, said: str
) -> None:
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("sk-outside-secret\n")
    make(root, outside)

    found = read_instructions(root, home)

    assert found.files == ()
    (refusal,) = found.refusals
    assert refusal.startswith("AGENTS.md ")
    assert said in refusal
    assert refusal.endswith("not read")
    assert "sk-outside" not in found.prompt_section()


def test_a_link_to_another_file_of_the_workspace_is_followed(root: Path, home: Path) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "agents.md").write_text("Run the tests.\n")
    (root / "AGENTS.md").symlink_to("docs/agents.md")
    found = read_instructions(root, home)
    assert [f.text for f in found.files] == ["Run the tests.\n"]
    assert found.refusals == ()


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
