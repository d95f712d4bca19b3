"""The terminal adapter: the command line, `lsp-agent run`'s port, and `doctor`."""
