-- A range sends its lines, a characterwise visual selection exactly its characters (positions
-- in the encoding the client negotiated: UTF-16 on 0.7, UTF-8 on 0.11).
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  vim.cmd("2LspAgent ask explain this line")
  H.wait_turn("completed", 1)
  vim.cmd("edit unicode.py")
  H.feed("gg0fwve<Esc>")
  H.wait_for("the visual selection", function()
    return vim.fn.visualmode() == "v" and vim.api.nvim_get_mode().mode == "n"
  end)
  vim.cmd("'<,'>LspAgent ask rename this")
  H.wait_turn("completed", 2)
  H.result.answer = H.answer_lines()
  H.result.encoding =
    vim.lsp.get_client_by_id(next(require("lsp_agent.state").clients)).offset_encoding
end)
