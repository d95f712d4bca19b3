"""Shared fixtures: a workspace, a scripted model on loopback, a real editor client.

End-to-end stories run on a server in one of two ways:

- `editor`: a server of the test's own, on a fresh workspace, with VS Code's and then Neovim's
  client capabilities (`editor_name`).
- `shared_editor`: the module's server for that editor (`shared_servers`, started on first use),
  for stories that need no server of their own. Each story gets a fresh session, fresh settings
  naming its own scripted model, and the workspace as it was when the module began; it ends with
  its buffers closed, its running turn cancelled and the files put back.

A story needs a server of its own (`launch`) when it is about the server's life (a restart, the
`initialize` it was given) or about everything one server holds (all its sessions, its totals).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel

EDITORS = ["visual-studio-code", "neovim"]

REAL_EDITORS = ("test_vscode", "test_neovim", "test_emacs")
"""Test files that drive a real editor (code-server in Chromium, Neovim 0.7 and 0.11, Emacs in
tmux): the longest, and the ones whose typing and screens must not wait on each other's CPU."""


def real_editor(path: str | os.PathLike[str]) -> bool:
    return Path(path).stem.startswith(REAL_EDITORS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real editors' files first: under pytest-xdist the longest units start first."""
    items.sort(key=lambda item: not real_editor(item.path))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n 2 --dist loadfile` (the test command): a worker takes whole files, so a module's
    shared server starts once; and the real editors' files are one unit, run one after another
    on one worker: the VS Code files share the extension build and code-server in `.cache/`,
    and no editor's UI waits on another's for the CPU."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    # Hand out the files in collection order, the real editors first, not the most tests first:
    # the longest unit then starts at once instead of last, alone on one worker.
    config.option.loadscopereorder = False

    class ByFile(LoadFileScheduling):  # type: ignore[misc]  # xdist is untyped: Any
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "the real editors" if real_editor(path) else path

    return ByFile(config, log)


def new_workspace(root: Path) -> Path:
    """A git repository with one commit, like the folder a user opens."""
    root.mkdir(parents=True)
    (root / "hello.py").write_text('def greet():\n    return "hello"\n', encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A git repository with one commit, like the folder a user opens."""
    return new_workspace(tmp_path / "project")


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
    await stop(started)


async def stop(editor: Editor) -> None:
    """The editor shuts the server down, as on quitting."""
    await editor.client.shutdown_session()
    await editor.client.stop()


@pytest.fixture
def unused_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Launcher:
    """Starts servers of a test's own on one fresh workspace, state directory and home."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = new_workspace(tmp_path / "project")
        self.state_dir = tmp_path / "state"
        self.home = tmp_path / "home"
        self.state_dir.mkdir()
        self.home.mkdir()

    @asynccontextmanager
    async def __call__(
        self, capabilities_name: str, settings: dict[str, Any] | None
    ) -> AsyncIterator[Editor]:
        """A server for the editor named (or "minimal": a bare client), stopped at the end.
        `settings` None: the editor sends `null` for them, a shape the server must survive."""
        started = await start_editor(
            self.root, capabilities_name, settings, state_dir=self.state_dir, home=self.home
        )
        try:
            yield started
        finally:
            await stop(started)


@pytest.fixture
def launch(tmp_path: Path) -> Launcher:
    """`async with launch("visual-studio-code", settings) as editor:` a server of the test's
    own; every server it starts in one test shares the workspace and the transcripts."""
    return Launcher(tmp_path)


class Files:
    """The files of a folder (its `.git` aside) as they were when captured, to put them back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.captured = {rel: (root / rel).read_bytes() for rel in self._files()}

    def _files(self) -> list[str]:
        found = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != ".git" or Path(folder) != self.root]
            found += [os.path.relpath(os.path.join(folder, f), self.root) for f in files]
        return found

    def restore(self) -> None:
        """Remove what was added, write back what changed or went; untouched files stay as
        they are (nothing for the server's watcher to hear about them)."""
        for folder, dirs, files in os.walk(self.root, topdown=True):
            here = Path(folder)
            for name in list(dirs):
                path = here / name
                rel = os.path.relpath(path, self.root)
                if rel == ".git":
                    dirs.remove(name)
                elif not any(kept.startswith(rel + os.sep) for kept in self.captured):
                    dirs.remove(name)
                    if path.is_symlink():
                        path.unlink()
                    else:
                        shutil.rmtree(path)
            for name in files:
                rel = os.path.relpath(here / name, self.root)
                if rel not in self.captured:
                    (here / name).unlink()
        for rel, data in self.captured.items():
            path = self.root / rel
            if path.is_symlink() or not path.is_file():
                path.unlink(missing_ok=True)
            elif path.read_bytes() == data:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


class SharedServers:
    """One server per editor for a whole test module, on one workspace; see `shared_editor`."""

    def __init__(self, root: Path, state_dir: Path, home: Path) -> None:
        self.root = root
        self.state_dir = state_dir
        self.home = home
        self.files = Files(root)
        self.editors: dict[str, Editor] = {}

    async def editor(self, name: str) -> Editor:
        """The running server for editor `name`, started on first use (again if it died)."""
        editor = self.editors.get(name)
        server = editor.client._server if editor is not None else None
        if editor is None or server is None or server.returncode is not None:
            # No settings at `initialize`: each story gives its own (`Editor.configure`).
            editor = await start_editor(
                self.root, name, {}, state_dir=self.state_dir, home=self.home
            )
            self.editors[name] = editor
        return editor

    async def end_story(self, editor: Editor) -> None:
        """Cancel the story's turn if it still runs, close its buffers, put the files back."""
        if editor.session is not None and editor.client.error is None:
            await editor.command("lspAgent.cancel", {"session": editor.session})
        editor.close_all()
        self.files.restore()
        editor.forget()

    async def close(self) -> None:
        for editor in self.editors.values():
            await stop(editor)


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace of the module's servers (a module may add files by overriding it)."""
    return new_workspace(tmp_path_factory.mktemp("shared") / "project")


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOME of the module's servers (a module may add files by overriding it)."""
    return tmp_path_factory.mktemp("home")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_servers(
    shared_workspace: Path, shared_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SharedServers]:
    servers = SharedServers(shared_workspace, tmp_path_factory.mktemp("state"), shared_home)
    yield servers
    await servers.close()


@pytest_asyncio.fixture(loop_scope="module")
async def shared_editor(
    shared_servers: SharedServers, editor_name: str, model: ScriptedModel
) -> AsyncIterator[Editor]:
    """The module's server for `editor_name`, ready for one story: a new session (every `ask`
    goes to it unless the story names another) and settings naming this story's model. Tests
    that use it run in the module's event loop (`pytest.mark.asyncio(loop_scope="module")`)."""
    editor = await shared_servers.editor(editor_name)
    # The session first: the server reads the editor's settings once it has an agent.
    editor.session = (await editor.command("lspAgent.newSession", {})).session
    await editor.configure(settings_for(model))
    try:
        yield editor
    finally:
        await shared_servers.end_story(editor)
