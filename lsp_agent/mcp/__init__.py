"""Tools of Model Context Protocol servers, behind the same walls as lsp-agent's own.

`servers.py` reads the servers the user configured (the editor's `lspAgent.mcpServers`,
`~/.agents/mcp.json`) and those a workspace proposes (its `.mcp.json`, never started before the
user confirms them: `approvals.py`). `hub.py` starts them on the first turn of a session that
needs them and fixes that session's tool list (`catalog.py`: namespaced names, checked schemas,
descriptions marked untrusted); `connection.py` holds one server through the official SDK (over
`stdio.py`, our pipe transport, or the SDK's streamable HTTP); `results.py` turns what a tool
answers into text for the model. Permissions are decided in `safety/permissions.py` and asked by
`tools/gate.py` like every other tool call.

Nothing here imports the SDK at module level: a server that nobody configured costs nothing.
"""
