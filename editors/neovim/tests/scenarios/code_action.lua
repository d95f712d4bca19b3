-- With the plugin, Neovim's own code-action menu at the cursor (an empty range): "explain
-- this" sends the function around the cursor.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  vim.cmd("LspAgent status") -- starts the server, which attaches the buffer
  H.wait_for("the buffer attached to the server", function()
    local id = next(require("lsp_agent.state").clients)
    return id and require("lsp_agent.state").clients[id].ready and vim.lsp.buf_is_attached(0, id)
  end)
  vim.api.nvim_win_set_cursor(0, { 2, 4 })
  local original = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    vim.ui.select = original
    for i, item in ipairs(items) do
      local title = opts.format_item and opts.format_item(item) or tostring(item)
      if title:match("explain this") then
        return on_choice(item, i)
      end
    end
    on_choice(nil, nil)
  end
  vim.lsp.buf.code_action()
  H.wait_for("the answer", function()
    return H.answer_has("It greets.")
  end)
end)
