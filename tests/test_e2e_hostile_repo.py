"""What a cloned repository can make the server itself do, through a real `lsp-agent serve`.

Each story plants what `git clone` or an archive can bring — an AGENTS.md that is a link, a FIFO
or 400 MB, a filter driver with an `=` in its name, a file an editor runs later — starts a
server of its own on it, and looks from outside: what reached the scripted model, a canary file
a planted program would write, the server's own peak memory, a question that arrived, a file
that was not written. The resource stories and the wall without bubblewrap are here too.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import editor as editor_module
from tests.conftest import new_workspace, settings_for, stop
from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel, reply, told, tool_call

CANARY = "sk-outside-canary-7e21"
HANG_GUARD_S = 60.0
"""How long a story waits for an answer before it calls the server hung (not a timing check)."""


class Repository:
    """A workspace as a clone left it, and servers started on it."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = new_workspace(tmp_path / "project")
        self.outside = tmp_path / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(f"{CANARY}\n")
        self.state_dir = tmp_path / "state"
        self.home = tmp_path / "home"
        self.state_dir.mkdir()
        self.home.mkdir()
        self.monkeypatch = monkeypatch

    def git(self, *args: str) -> None:
        git = ["git", "-C", str(self.root), "-c", "user.name=t", "-c", "user.email=t@e.com"]
        subprocess.run([*git, *args], check=True, capture_output=True)

    @asynccontextmanager
    async def serve(
        self, settings: dict[str, Any], environ: dict[str, str] | None = None
    ) -> AsyncIterator[Editor]:
        plain = editor_module.server_env

        def with_extra(state_dir: Path, home: Path) -> dict[str, str]:
            return {**plain(state_dir, home), **(environ or {})}

        self.monkeypatch.setattr(editor_module, "server_env", with_extra)
        started = await start_editor(
            self.root, "visual-studio-code", settings, state_dir=self.state_dir, home=self.home
        )
        try:
            yield started
        finally:
            await stop(started)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repository:
    return Repository(tmp_path, monkeypatch)


def system_prompt(model: ScriptedModel) -> str:
    return str(model.requests[0]["messages"][0]["content"])


def peak_rss_mb(editor: Editor) -> float:
    """The server process's peak resident memory (VmHWM), from outside."""
    server = editor.client._server
    assert server is not None
    with open(f"/proc/{server.pid}/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM for the server")


async def ask(editor: Editor, prompt: str, **arguments: Any) -> Any:
    """An ask that must be answered: a server that hangs fails the story, it does not stall it."""
    return await asyncio.wait_for(editor.ask(prompt, **arguments), HANG_GUARD_S)


@pytest.mark.parametrize(
    "plant",
    ["a link to a secret outside", "a link to /proc/self/environ", "a link to /dev/zero"],
)
async def test_an_agents_md_that_links_out_never_reaches_the_prompt_and_the_user_is_told(
    repo: Repository, plant: str
) -> None:
    target = {
        "a link to a secret outside": repo.outside / "secret.txt",
        "a link to /proc/self/environ": Path("/proc/self/environ"),
        "a link to /dev/zero": Path("/dev/zero"),
    }[plant]
    (repo.root / "AGENTS.md").symlink_to(target)
    repo.git("add", "AGENTS.md")  # git stores the link: a clone brings it back
    environ = {"LSP_AGENT_TEST_SECRET": CANARY}  # what /proc/self/environ would carry

    with ScriptedModel([reply("ok")]) as model:
        async with repo.serve(settings_for(model), environ) as editor:
            result = await ask(editor, "hello")
            shown = [m.message for m in editor.client.messages]

    assert result.status == "completed"
    assert CANARY not in system_prompt(model)
    assert "<agents_md" not in system_prompt(model)
    assert "lsp-agent: AGENTS.md links outside the workspace: not read" in shown


async def test_an_agents_md_that_is_a_fifo_does_not_hang_the_ask(repo: Repository) -> None:
    os.mkfifo(repo.root / "AGENTS.md")

    with ScriptedModel([reply("ok")]) as model:
        async with repo.serve(settings_for(model)) as editor:
            result = await ask(editor, "hello")
            shown = [m.message for m in editor.client.messages]

    assert result.status == "completed"
    assert any("AGENTS.md is a pipe (FIFO), not a regular file" in m for m in shown), shown


async def test_a_400_mb_agents_md_costs_the_server_no_more_than_its_cut(repo: Repository) -> None:
    with (repo.root / "AGENTS.md").open("wb") as handle:
        handle.write(b"Use tabs.\n")
        handle.truncate(400 * 1024 * 1024)  # sparse: 400 MB to read, nothing on disk

    with ScriptedModel([reply("ok")]) as model:
        async with repo.serve(settings_for(model)) as editor:
            result = await ask(editor, "hello")
            peak = peak_rss_mb(editor)

    assert result.status == "completed"
    assert "Use tabs." in system_prompt(model)
    assert peak < 250, f"the server peaked at {peak:.0f} MB"


async def test_a_filter_driver_named_with_an_equals_sign_never_runs_in_the_servers_git(
    repo: Repository,
) -> None:
    canary = repo.outside / "filter-ran"
    (repo.root / ".gitattributes").write_text("*.py filter=a=b\n")
    repo.git("add", ".gitattributes")
    repo.git("commit", "-qm", "attributes")
    repo.git("config", "filter.a=b.clean", f"touch {canary}; cat")
    repo.git("config", "filter.a=b.process", f"touch {canary}")

    # Changed, with stat data that differs from the index: the tracker's first full comparison
    # (a `git status`, once `ready`) must hash it, through the clean filter were it not
    # neutralised. That the same neutralised status still reports the change is shown without
    # a watcher in test_changes_safety.py.
    (repo.root / "hello.py").write_text('def greet():\n    return "HELLO"\n')  # same size
    os.utime(repo.root / "hello.py", (5, 5))
    with ScriptedModel([reply("ok")]) as model:
        async with repo.serve(settings_for(model)) as editor:
            await editor.tracker_ready()
            result = await ask(editor, "hello")

    assert result.status == "completed"
    assert not canary.exists(), "the repository's filter ran outside the sandbox"
    subprocess.run(["git", "status"], cwd=repo.root, capture_output=True, check=False)
    assert canary.exists(), "the trap was never armed: a plain git runs it"


@pytest.mark.parametrize(
    "path",
    [".nvim.lua", ".github/workflows/ci.yml", "Makefile", "tests/conftest.py", ".husky/pre-commit"],
)
async def test_in_auto_mode_what_tools_run_later_is_asked_not_written(
    repo: Repository, path: str
) -> None:
    with ScriptedModel() as model:
        model.add(tool_call("write_file", {"path": path, "content": "os.execute('x')\n"}))
        model.add(reply("done"))
        async with repo.serve(settings_for(model, mode="auto")) as editor:
            result = await ask(editor, "set things up")

    assert result.status == "completed"
    (question,) = editor.questions  # dismissed: counts as Deny
    assert path.split("/")[0] in question.message
    assert not (repo.root / path).exists()
    assert "not" in told(model, "write_file")


async def test_a_plain_command_in_a_shell_string_runs_unasked_and_rg_z_is_asked(
    repo: Repository,
) -> None:
    with ScriptedModel() as model:
        model.add(tool_call("bash", {"command": "bash -lc 'git status --short'"}))
        model.add(tool_call("bash", {"command": "rg -z greet"}))
        model.add(reply("done"))
        async with repo.serve(settings_for(model)) as editor:
            result = await ask(editor, "look")

    assert result.status == "completed"
    (question,) = editor.questions  # rg -z only
    assert "rg -z greet" in question.message
    results = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("exit code 0")  # the shell string ran, unasked


async def test_a_memory_bomb_is_stopped_and_the_server_keeps_its_memory(repo: Repository) -> None:
    bomb = f"{sys.executable} -c \"x = b'a' * (3 * 1024 ** 3); print('ALLOCATED')\""
    allow = [{"tool": "bash", "decision": "allow"}]
    with ScriptedModel() as model:
        model.add(tool_call("bash", {"command": bomb}), tool_call("bash", {"command": "echo ok"}))
        model.add(reply("done"))
        settings = settings_for(model, commandMemoryMB=256, permissions=allow)
        async with repo.serve(settings) as editor:
            result = await ask(editor, "allocate")
            peak = peak_rss_mb(editor)

    assert result.status == "completed"
    results = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert "ALLOCATED" not in results[0]
    assert "256 MiB of memory (lspAgent.commandMemoryMB)" in results[0], results[0]
    assert results[1].startswith("exit code 0")  # the next command runs as before
    assert peak < 250, f"the server peaked at {peak:.0f} MB"


async def test_without_bubblewrap_the_landlock_wall_holds_and_status_says_so(
    repo: Repository,
) -> None:
    # The README's install on a machine without the bubblewrap package: LSP_AGENT_BWRAP names
    # no bwrap, so the server finds the wall it can make without one.
    outside = repo.outside / "pwned"
    commands = [f"echo x > {outside}", "echo kept > made.txt; mkdir -p src && echo y > src/a.txt"]
    allow = [{"tool": "bash", "decision": "allow"}]
    (repo.root / "made.txt").write_text("")
    with ScriptedModel() as model:
        model.add(*(tool_call("bash", {"command": c}) for c in commands), reply("done"))
        (repo.root / "src").mkdir()
        async with repo.serve(settings_for(model, permissions=allow), {"LSP_AGENT_BWRAP": ""}) as (
            editor
        ):
            status = await editor.command("lspAgent.status", {})
            if status.sandbox != "landlock":
                pytest.skip(f"no Landlock here: {status.sandboxReason}")
            result = await ask(editor, "write")

    assert "names no bwrap" in status.sandboxReason
    assert "no private /tmp" in status.sandboxUncovered
    assert result.status == "completed"
    assert not outside.exists()
    assert (repo.root / "made.txt").read_text() == "kept\n"
    assert (repo.root / "src" / "a.txt").read_text() == "y\n"
