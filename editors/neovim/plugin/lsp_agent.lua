-- lsp-agent: defines :LspAgent and nothing else at startup; the plugin's modules load, and the
-- server starts, on the first use of the command.
if vim.g.loaded_lsp_agent then
  return
end
vim.g.loaded_lsp_agent = true

if vim.fn.has("nvim-0.7.2") == 0 then
  vim.api.nvim_echo({ { "lsp-agent needs Neovim 0.7.2 or newer", "WarningMsg" } }, true, {})
  return
end

vim.api.nvim_create_user_command("LspAgent", function(opts)
  require("lsp_agent.commands").run(opts)
end, {
  nargs = "*",
  range = true,
  complete = function(arglead, cmdline)
    return require("lsp_agent.commands").complete(arglead, cmdline)
  end,
  desc = "lsp-agent: ask | chat | undo | rewind | cancel | new | sessions | status | model | …",
})
