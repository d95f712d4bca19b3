-- A turn of the chat edits hello.py; the user goes to the review from the chat (gR) and accepts.
-- The user then adds a line of their own and saves; :LspAgent undo restores the file through a
-- review, keeping that line. A second turn edits the file again; the user changes the same line,
-- and :LspAgent undo is refused for the file, saying why.
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
  input_ready(chat)
  H.feed("make it friendlier<C-s>")
  H.wait_for("the review", function()
    local first = require("lsp_agent.decisions").pending()[1]
    return first and first.kind == "review"
  end)
  H.result.statusline_waiting = require("lsp_agent.chat").statusline(chat.input)
  H.feed("<Esc>gR")
  H.wait_for("the review under the cursor", function()
    local decision = H.current_decision()
    return decision and decision.kind == "review"
  end)
  H.feed("ga")
  H.wait_chat_turn(1)

  -- The user's own line, far from the agent's change, saved.
  vim.api.nvim_buf_set_lines(hello, -1, -1, false, { "# mine" })
  vim.api.nvim_buf_call(hello, function()
    vim.cmd("write")
  end)
  vim.cmd("LspAgent undo")
  H.wait_review(2)
  H.feed("ga")
  H.result.undone = H.wait_for("the undo's outcome", function()
    return notified("^lsp%-agent: undid turn")
  end)
  H.result.after_undo = H.chat_lines()
  H.result.hello_after_undo = vim.api.nvim_buf_get_lines(hello, 0, -1, false)

  -- A second turn: the agent edits the line again, and the user changes that same line.
  vim.cmd("LspAgent chat")
  input_ready(chat)
  H.feed("say hey<C-s>")
  H.wait_review(3)
  H.feed("ga")
  H.wait_chat_turn(2)
  local line = vim.api.nvim_buf_get_lines(hello, 1, 2, false)[1]
  vim.api.nvim_buf_set_lines(hello, 1, 2, false, { (line:gsub('"hey"', '"hey you"')) })
  vim.api.nvim_buf_call(hello, function()
    vim.cmd("write")
  end)
  vim.cmd("LspAgent undo")
  H.result.refused = H.wait_for("the refusal", function()
    return notified("^lsp%-agent: nothing of turn")
  end)
  H.result.reviews_at_end = #H.result.reviews
  H.result.hello_at_end = vim.api.nvim_buf_get_lines(hello, 0, -1, false)
  H.result.conversation = H.chat_lines()
end)
