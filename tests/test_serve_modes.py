"""How editors reach the server besides stdio, and how settings changes reach it. Each story is
about one server's start or settings, so each starts its own, with VS Code's capabilities (the
way settings travel is the same for every client: `workspace/configuration`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

from tests.conftest import Launcher, settings_for
from tests.editor import server_env
from tests.fake_model import ScriptedModel, reply


async def connect(client: LanguageClient, port: int, timeout: float = 20.0) -> None:
    """Connect once the server listens (it serves the first connection it accepts). It says
    nothing when it starts listening, so a refused connection is tried again (a hang guard)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await client.start_tcp("127.0.0.1", port)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def test_serve_over_tcp_answers_an_ask(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path, unused_port: int
) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "lsp_agent", "serve", "--tcp", f"127.0.0.1:{unused_port}"],
        env=server_env(state_dir, home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = make_test_lsp_client()
        await connect(client, unused_port)
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=workspace.as_uri(),
                initialization_options={"lspAgent": settings_for(model)},
            )
        )
        model.add(reply("over tcp"))
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="lspAgent.ask", arguments=[{"prompt": "hi"}])
        )
        assert result is not None
        assert result["status"] == "completed"
        assert result["answer"] == "over tcp"
        await client.shutdown_session()
        await client.stop()
    finally:
        server.kill()
        server.wait(10)


async def test_changed_settings_apply_to_the_next_ask(
    launch: Launcher, model: ScriptedModel
) -> None:
    async with launch("visual-studio-code", settings_for(model)) as editor:
        model.add(reply("first"))
        await editor.ask("hi")

        # The user sets maxTurns; this returns once the server reports every setting as set.
        await editor.configure(settings_for(model, maxTurns=7))

        status = await editor.command("lspAgent.status", {})
        assert status.settings.maxTurns.value == 7
        assert status.settings.maxTurns.source == "editor"


async def test_settings_of_the_wrong_shape_get_a_warning_not_a_crash(launch: Launcher) -> None:
    async with launch("visual-studio-code", None) as editor:
        status = await editor.command("lspAgent.status", {})
        assert status.model is None
        assert status.settings.model.source == "default"
        assert any("must be an object" in m.message for m in editor.client.messages)


async def test_serve_accepts_the_stdio_flag_language_clients_append(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    client = make_test_lsp_client()
    await client.start_io(
        sys.executable, "-m", "lsp_agent", "serve", "--stdio", env=server_env(state_dir, home)
    )
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=workspace.as_uri(),
            initialization_options={"lspAgent": settings_for(model)},
        )
    )
    model.add(reply("over stdio"))
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAgent.ask", arguments=[{"prompt": "hi"}])
    )
    assert result is not None
    assert result["answer"] == "over stdio"
    await client.shutdown_session()
    await client.stop()
