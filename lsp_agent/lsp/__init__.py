"""The language-server adapter: the only part of lsp-agent that speaks LSP (JSON-RPC included)."""
