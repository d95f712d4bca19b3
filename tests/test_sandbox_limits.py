"""A command that eats memory or fills the disk is stopped with a sentence that says which limit
it hit, under either wall, and the server is none the worse: real processes, real limits.

Each story runs under bubblewrap and under Landlock (bubblewrap hidden: the sandbox is handed
the Landlock wall the probe finds when `LSP_AGENT_BWRAP` names none)."""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import pytest

from lsp_agent.config import Settings
from lsp_agent.context.cap import Spills
from lsp_agent.safety.sandbox import Availability, Sandbox, probe, probe_landlock
from lsp_agent.testing import MemoryPort
from lsp_agent.tools.belt import Toolbox
from lsp_agent.tools.results import ToolResult
from lsp_agent.tools.workspace import Workspace

WALLS = {"bwrap": probe, "landlock": probe_landlock}


@pytest.fixture(params=sorted(WALLS))
def wall(request: pytest.FixtureRequest) -> Availability:
    found = WALLS[request.param]()
    if found.kind != request.param:
        pytest.skip(f"no {request.param} here: {found.reason}")
    return found


class Box:
    def __init__(
        self, root: Path, wall: Availability, *, memory: int = 4096, file: int = 1024,
        disk: int = 2048,
    ) -> None:  # fmt: skip
        self.root = root
        settings = Settings(
            permissions=[{"tool": "bash", "decision": "allow"}],
            command_timeout=120,
            command_memory_mb=memory,
            command_file_mb=file,
            command_disk_mb=disk,
        )
        self.spills = Spills()
        self.tools = Toolbox(
            Workspace(root),
            MemoryPort(accept=False),
            settings=lambda: settings,
            sandbox=Sandbox(root, wall),
            spills=self.spills,
        )

    async def bash(self, command: str) -> ToolResult:
        return await self.tools.run("bash", json.dumps({"command": command}))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    return folder


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_a_memory_bomb_is_stopped_and_the_server_keeps_its_memory(
    root: Path, wall: Availability
) -> None:
    box = Box(root, wall, memory=256)
    before = rss_mb()

    result = await box.bash(
        f"{sys.executable} -c \"x = b'a' * (3 * 1024 ** 3); print('ALLOCATED', len(x))\""
    )

    assert "ALLOCATED" not in result.text
    assert "256 MiB of memory (lspAgent.commandMemoryMB)" in result.text, result.text
    assert rss_mb() - before < 50  # the server did not pay for it
    after = await box.bash("echo still-works")
    assert after.ok
    assert "still-works" in after.text


async def test_a_file_larger_than_the_limit_stops_the_writer(
    root: Path, wall: Availability
) -> None:
    box = Box(root, wall, file=16)

    result = await box.bash("head -c 100000000 /dev/zero > src/big; echo DONE-$?")

    assert "file size limit of 16 MiB (lspAgent.commandFileMB)" in result.text, result.text
    assert (root / "src" / "big").stat().st_size <= 16 * 1024 * 1024


async def test_a_disk_filler_is_stopped_past_the_workspace_budget(
    root: Path, wall: Availability
) -> None:
    box = Box(root, wall, file=32, disk=64)

    result = await box.bash(
        "for i in $(seq 1 40); do head -c 16000000 /dev/zero > src/fill-$i; sync; done; echo FILLED"
    )

    assert "FILLED" not in result.text
    assert "grew the disk by more than 64 MiB" in result.text, result.text
    written = sum(path.stat().st_size for path in (root / "src").glob("fill-*"))
    assert written < 40 * 16_000_000
    after = await box.bash("rm -f src/fill-*; echo cleaned")
    assert "cleaned" in after.text


async def test_under_landlock_truncate_by_path_is_refused_and_through_a_descriptor_is_not(
    root: Path, tmp_path: Path
) -> None:
    """Landlock before ABI 3 does not govern truncate(2) by path, so the wall's seccomp filter
    refuses it everywhere: shown inside the workspace, where Landlock itself would allow it on
    any ABI (outside, a newer kernel refuses it twice)."""
    wall = probe_landlock()
    if wall.kind != "landlock":
        pytest.skip(f"no landlock here: {wall.reason}")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    (root / "by-path.txt").write_text("keep\n")
    (root / "by-descriptor.txt").write_text("drop\n")
    script = (
        "import os\n"
        f"for path in ({str(outside)!r}, 'by-path.txt'):\n"
        "    try:\n"
        "        os.truncate(path, 0)\n"
        "        print('TRUNCATED', path)\n"
        "    except OSError as error:\n"
        "        print('REFUSED', error.errno)\n"
        "with open('by-descriptor.txt', 'r+') as file:\n"
        "    file.truncate(0)\n"
        "print('DESCRIPTOR DONE')\n"
    )
    (root / "cut.py").write_text(script)

    result = await Box(root, wall).bash(f"{sys.executable} cut.py")

    assert "DESCRIPTOR DONE" in result.text  # it ran
    assert "TRUNCATED" not in result.text
    assert result.text.count("REFUSED 13") == 2
    assert outside.read_text() == "keep\n"
    assert (root / "by-path.txt").read_text() == "keep\n"
    assert (root / "by-descriptor.txt").read_text() == ""
