"""`lsp-agent serve` on stdio: a server that is ready for its first ask once it has answered
`initialize`.

The agent stack (the turn loop, the tools, the model's HTTP client) is imported before the first
message is read: about a third of a second on a 2-core machine, well inside the half second an
editor should wait for `initialize`, and nothing is left to load when the user's first ask comes
(DESIGN.md §8: it reaches the model within 150 ms of `initialized`).
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
    from lsp_agent.lsp.server import import_agent

    import_agent()
    return serve(create_server(), stdin, stdout)
