-- The user starts a new session while a turn waits for their answer to a question; then answers
-- it. The turn ends and its answer comes after the switch: the next question goes to the new
-- session, not back to the turn's.
local H = require("harness")

H.run(function()
  H.setup()
  local asked = false
  vim.api.nvim_create_autocmd("User", {
    pattern = "LspAgentQuestion",
    callback = function()
      asked = true
    end,
  })
  vim.cmd("LspAgent ask one")
  H.wait_for("the question", function()
    return asked
  end)
  vim.cmd("LspAgent new")
  H.wait_for("the new session", function()
    return H.answer_has("_new session ")
  end)
  vim.cmd("LspAgent review")
  local question = H.current_decision()
  H.expect(question ~= nil, "no question to answer")
  for line, index in pairs(question.choices) do
    if question.actions[index].title == "Deny" then
      vim.api.nvim_win_set_cursor(0, { line, 0 })
      H.feed("<CR>")
    end
  end
  H.wait_turn("completed", 1)
  vim.cmd("LspAgent ask two")
  H.wait_turn("completed", 2)
  H.result.answer = H.answer_lines()
end)
