-- The agent asks before running commands: the user allows the first (1 = Allow) and dismisses
-- the second question (<Esc>), which the server counts as Deny.
local H = require("harness")

H.run(function()
  H.setup()
  H.answer_questions({ "1<CR>", "<Esc>" })
  vim.cmd("LspAgent ask make a file")
  H.wait_turn()
  H.result.answer = H.answer_lines()
end)
