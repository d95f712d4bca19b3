-- Two turns of the chat edit hello.py, accepted in their reviews. The user adds a line of their
-- own and saves, then goes back to before the second prompt with :LspAgent rewind 2: the file
-- comes back through a review (their line kept), the chat draws the conversation again with
-- the second turn marked rewound, and its prompt is back in the input; the user edits it there
-- and sends it.
local H = require("harness")

local function notified(pattern)
  for _, note in ipairs(H.result.notifications) do
    if note.message:match(pattern) then
      return note.message
    end
  end
  return nil
end

local function input_ready(chat)
  H.wait_for("the chat input in insert mode", function()
    return vim.api.nvim_get_current_buf() == chat.input and vim.api.nvim_get_mode().mode == "i"
  end)
end

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  local hello = vim.api.nvim_get_current_buf()
  vim.cmd("LspAgent chat")
  H.wait_chat_loaded()
  local chat = H.chat()
  for turn, prompt in ipairs({ "make it friendlier", "make it ten" }) do
    vim.cmd("LspAgent chat")
    input_ready(chat)
    H.feed(prompt .. "<C-s>")
    H.wait_review(turn)
    H.feed("ga")
    H.wait_chat_turn(turn)
  end

  -- The user's own line, at the top, saved.
  vim.api.nvim_buf_set_lines(hello, 0, 0, false, { "# mine" })
  vim.api.nvim_buf_call(hello, function()
    vim.cmd("write")
  end)
  vim.cmd("LspAgent rewind 2")
  H.wait_review(3)
  H.feed("ga")
  H.result.rewound = H.wait_for("the rewind's outcome", function()
    return notified("^lsp%-agent: rewound to before turn 2")
  end)
  H.wait_for("the prompt back in the input", function()
    return H.input_lines()[1] == "make it ten"
  end)
  H.wait_for("the conversation drawn again", function()
    return not chat.loading
  end)
  H.result.after_rewind = H.chat_lines()
  H.result.hello_after_rewind = vim.api.nvim_buf_get_lines(hello, 0, -1, false)

  -- The user changes the prompt in the input and sends it.
  vim.api.nvim_buf_set_lines(chat.input, 0, -1, false, { "make it twenty" })
  vim.cmd("LspAgent chat")
  input_ready(chat)
  H.feed("<C-s>")
  H.wait_chat_turn(2)
  H.wait_for("the third turn", function()
    local ended = 0
    for _, line in ipairs(H.chat_lines()) do
      ended = ended + (line == "_completed_" and 1 or 0)
    end
    return ended >= 3 and require("lsp_agent").status() == ""
  end)
  H.result.conversation = H.chat_lines()
end)
