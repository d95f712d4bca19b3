"""The language server as editors get it: the server's state, its features and its commands."""

from __future__ import annotations

from lsp_agent.lsp import commands
from lsp_agent.lsp.server import AgentServer, register_features


def create_server() -> AgentServer:
    """A server with its features and commands registered."""
    server = AgentServer()
    register_features(server)
    commands.register(server)
    return server
