"""``python -m lsp_agent`` runs the command line, like the ``lsp-agent`` script."""

from __future__ import annotations

from lsp_agent.terminal.cli import main

raise SystemExit(main())
