-- The agent asks before running commands: the user goes to each question (:LspAgent review)
-- and answers with <CR> on a choice: Allow the first, Deny the second.
local H = require("harness")

H.run(function()
  H.setup()
  H.answer_questions({ "Allow", "Deny" })
  vim.cmd("LspAgent ask make a file")
  H.wait_turn()
  H.result.answer = H.answer_lines()
end)
