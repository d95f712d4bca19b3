-- The server command is not installed: the error and :checkhealth say how to install it from a
-- clone (no package name that is not the project's).
local H = require("harness")

H.run(function()
  H.setup(nil, { cmd = { "lsp-agent-not-installed", "serve" } })
  vim.cmd("LspAgent ask hello")
  vim.cmd("checkhealth lsp_agent")
  H.result.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
