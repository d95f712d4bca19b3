"""pygls' protocol, with the parts lsp-agent handles itself.

- `workspace/executeCommand` runs as a cancellable request: pygls runs registered commands under
  a private id, so a `$/cancelRequest` for the editor's request never reached them. Handling the
  method here makes the command's task the request's future: the cancel lands in the handler as
  `CancelledError`, and the handler turns it into a cancelled turn. The handler also gets the
  request's `workDoneToken`.
- `exit` ends the connection through the server (`connection.py`), with code 0 after `shutdown`
  and 1 without, as the specification wants.
"""

from __future__ import annotations

import contextvars
from typing import Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol, lsp_method

from lsp_agent.lsp import names

work_done_token: contextvars.ContextVar[types.ProgressToken | None] = contextvars.ContextVar(
    "work_done_token", default=None
)
"""The `workDoneToken` of the `workspace/executeCommand` request being handled."""


class Leaving(Protocol):
    """The server's side of the end of a connection (`server.AgentServer.leave`)."""

    def leave(self) -> None: ...


class AgentProtocol(LanguageServerProtocol):
    """pygls' protocol with lsp-agent's commands and lifecycle."""

    _server: Leaving  # type: ignore[assignment]

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(  # type: ignore[override]
        self, params: types.ExecuteCommandParams
    ) -> Any:
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams.of(
                ValueError(
                    f"unknown command {params.command!r}: lsp-agent offers "
                    + ", ".join(names.COMMANDS)
                )
            )
        work_done_token.set(params.work_done_token)
        return await handler(*(params.arguments or []))

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:  # type: ignore[override]
        """The editor says goodbye: the connection ends the process."""
        self._server.leave()
