"""A model that cannot call tools: the turn ends `failed`, naming the model and what to do.

The agent core runs without LSP, against the scripted model answering as Ollama and llama.cpp
do when a request carries `tools` the model (or the server) cannot take.
"""

from __future__ import annotations

import json
from pathlib import Path

from lsp_agent.agent.sessions import Agent
from lsp_agent.agent.turn import FAILED
from lsp_agent.config import Settings
from lsp_agent.model import make_provider
from lsp_agent.session.store import SessionStore
from lsp_agent.testing import MemoryPort
from lsp_agent.tools.workspace import Workspace
from tests.fake_model import ScriptedModel, error, refuse_stream_with_tools


def agent_for(workspace: Path, model: ScriptedModel, name: str, port: MemoryPort) -> Agent:
    return Agent(
        Settings(base_url=model.base_url, model=name),
        Workspace(workspace),
        port,
        SessionStore(workspace, base_dir=workspace.parent / "state"),
        lambda s: make_provider(s.provider, s.base_url, s.model or "", s.api_key, base_delay=0.01),
    )


async def test_an_ollama_model_without_tools_ends_the_turn_with_advice(workspace: Path) -> None:
    port = MemoryPort()
    refusal = error(400, {"error": "registry.ollama.ai/library/gemma3:4b does not support tools"})
    with ScriptedModel([refusal], models=("gemma3:4b",)) as model:
        result = await agent_for(workspace, model, "gemma3:4b", port).ask("rename greet")

    assert result.status == FAILED
    assert result.error is not None
    assert result.error.startswith(f"model 'gemma3:4b' at {model.base_url} cannot call tools")
    assert "qwen2.5-coder:7b or llama3.1" in result.error
    assert "lspAgent.model" in result.error
    assert model.requests[0]["tools"]  # the request did carry the tools
    assert len(model.requests) == 1
    final = port.events[-1]
    assert (final["kind"], final["status"], final["error"]) == ("status", FAILED, result.error)
    assert port.proposals == []
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'


async def test_llama_server_without_jinja_ends_the_turn_after_the_streaming_fallback(
    workspace: Path,
) -> None:
    # An old llama-server refuses to stream with tools; asked again without streaming, it says
    # the real reason: it was started without --jinja.
    port = MemoryPort()
    no_jinja = error(
        500,
        {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "x"}},
    )
    with ScriptedModel([refuse_stream_with_tools(), no_jinja]) as model:
        result = await agent_for(workspace, model, "test-model", port).ask("rename greet")

    assert result.status == FAILED
    assert result.error is not None
    assert "model 'test-model'" in result.error
    assert "restart llama-server with --jinja" in result.error
    assert [request["stream"] for request in model.requests] == [True, False]
    transcript = "\n".join(
        path.read_text() for path in (workspace.parent / "state").rglob("*") if path.is_file()
    )
    turns = [
        record
        for line in transcript.splitlines()
        if line.startswith("{") and (record := json.loads(line)).get("type") == "turn"
    ]
    assert turns
    assert turns[-1]["status"] == FAILED
    assert turns[-1]["error"] == result.error
