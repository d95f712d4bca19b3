"""`lsp-agent serve` on stdio: `initialize` answered as soon as pygls is loaded, and the agent
stack loaded right after, while the editor finishes its own start.

pygls and lsprotocol (every LSP type an attrs class) take most of the first half second; the
agent stack (the turn loop, the tools, the model's HTTP client) and the certificates are loaded
in a worker thread once `initialize` is answered (`server.AgentServer.initialize`), so the
server is ready for its first ask a moment later, long before a user has typed one.
"""

from __future__ import annotations

import sys


def serve_stdio() -> int:
    """Serve LSP on stdin/stdout until the editor leaves; the exit code."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Only JSON-RPC may reach stdout: a stray print() from any library goes to stderr instead.
    sys.stdout = sys.stderr
    from lsp_agent.lsp.app import create_server
    from lsp_agent.lsp.connection import serve

    return serve(create_server(), stdin, stdout)
