-- `lspAgent.ask` carries a workDoneToken, so the server reports the turn as `$/progress` under
-- it: what progress plugins (fidget.nvim, lualine) read through Neovim's own handler. (Edits
-- apply unreviewed here, mode "auto": the progress of an edit is what is looked at.)
local H = require("harness")

H.run(function()
  H.setup({ mode = "auto" })
  H.result.progress = {}
  local original = vim.lsp.handlers["$/progress"]
  vim.lsp.handlers["$/progress"] = function(err, params, ctx, config)
    table.insert(H.result.progress, {
      token = params.token,
      kind = params.value.kind,
      title = params.value.title,
      message = params.value.message,
    })
    return original(err, params, ctx, config)
  end
  vim.cmd("edit hello.py")
  vim.cmd("LspAgent ask read it")
  H.wait_turn()
  H.wait_for("the end of the progress", function()
    local last = H.result.progress[#H.result.progress]
    return last and last.kind == "end"
  end)
end)
