-- The model is slow to finish; the user cancels with :LspAgent cancel and the turn ends as
-- cancelled, with what had streamed so far kept in the answer buffer.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("LspAgent ask think hard")
  H.wait_for("the model to start answering", function()
    return H.answer_has("Let me think")
  end)
  vim.cmd("LspAgent cancel")
  H.wait_turn("cancelled")
  H.result.answer = H.answer_lines()
  vim.cmd("LspAgent cancel")
end)
