-- :checkhealth lsp_agent starts the server and reports it without errors.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("checkhealth lsp_agent")
  H.result.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
