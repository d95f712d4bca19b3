"""Shared fixtures: a workspace, a scripted model on loopback, a real editor client."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel

EDITORS = ["visual-studio-code", "neovim"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A git repository with one commit, like the folder a user opens."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "hello.py").write_text('def greet():\n    return "hello"\n', encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return root


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture(params=EDITORS)
def editor_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def settings_for(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {"baseUrl": model.base_url, "model": "test-model", **extra}


@pytest_asyncio.fixture
async def editor(
    workspace: Path, model: ScriptedModel, editor_name: str, state_dir: Path, home: Path
) -> AsyncIterator[Editor]:
    """The server under test, driven by an editor with VS Code's or Neovim's capabilities."""
    started = await start_editor(
        workspace, editor_name, settings_for(model), state_dir=state_dir, home=home
    )
    yield started
    await started.client.shutdown_session()
    await started.client.stop()


@pytest.fixture
def unused_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
