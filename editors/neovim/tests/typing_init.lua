-- The user's init for the stories typed at a real terminal (tests/test_neovim_typing.py), after
-- minimal_init.lua: the plugin set up against the test's server and scripted model, and its
-- part in the statusline, as a user would have them.
require("lsp_agent").setup({
  cmd = { os.getenv("LSP_AGENT_TEST_SERVER") or "lsp-agent", "serve" },
  settings = { baseUrl = os.getenv("LSP_AGENT_TEST_BASE_URL"), model = "test-model" },
})
vim.o.laststatus = 2
vim.o.statusline = "%f %m%=%{v:lua.require'lsp_agent'.status()} "
