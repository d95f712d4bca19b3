"""lsp-agent: a coding agent behind the Language Server Protocol."""

from __future__ import annotations

__version__ = "0.1.0"
