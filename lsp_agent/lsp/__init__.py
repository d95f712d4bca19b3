"""The language-server adapter: the only part of lsp-agent that imports pygls and lsprotocol."""
