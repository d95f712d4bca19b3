-- With the server's `mode = "auto"`, edits need no confirmation: no review opens, the edit is
-- applied and written, and the answer is still truthful.
local H = require("harness")

H.run(function()
  H.setup({ mode = "auto" })
  vim.cmd("LspAgent ask change it")
  H.wait_turn()
  H.wait_for("the edit counts", function()
    return H.answer_has("_edits:")
  end)
  H.result.answer = H.answer_lines()
end)
