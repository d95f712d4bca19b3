-- The user opens the chat with two lines of hello.py selected (:1,2LspAgent chat), writes a
-- question in its input and sends it with <CR> in normal mode, then a follow-up with <C-s> in
-- insert mode, then asks from hello.py with :LspAgent ask while the chat is on screen. The turns
-- stream into the chat's conversation; its statuslines show the tokens used; no answer window
-- opens.
local H = require("harness")

local function windows()
  local names = {}
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local name = vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))
    names[#names + 1] = vim.fn.fnamemodify(name, ":t")
  end
  table.sort(names)
  return names
end

H.run(function()
  H.setup()
  local chat_module = require("lsp_agent.chat")
  vim.cmd("edit hello.py")
  local file_win = vim.api.nvim_get_current_win()
  vim.cmd("1,2LspAgent chat")
  H.wait_chat_loaded()
  local chat = H.chat()
  H.wait_for("insert mode in the chat input", function()
    return vim.api.nvim_get_current_buf() == chat.input and vim.api.nvim_get_mode().mode == "i"
  end)
  H.result.statusline_before = chat_module.statusline(chat.input)
  H.result.title_before = chat_module.title(chat.conversation)

  H.feed("what does greet do?<Esc><CR>")
  H.wait_chat_turn(1)
  H.result.input_after_send = H.input_lines()
  H.result.after_first = H.chat_lines()
  H.result.statusline = chat_module.statusline(chat.input)
  H.result.title_after_first = chat_module.title(chat.conversation)

  H.feed("iand in French?<C-s>")
  H.wait_chat_turn(2)
  vim.cmd("stopinsert")
  vim.api.nvim_set_current_win(file_win)
  vim.cmd("LspAgent ask and in one word?")
  H.wait_chat_turn(3)
  H.result.conversation = H.chat_lines()
  H.result.session = chat.session
  H.result.ask_session =
    require("lsp_agent.state").clients[next(require("lsp_agent.state").clients)].session
  H.result.title_end = chat_module.title(chat.conversation)
  H.result.filetype = vim.bo[chat.conversation].filetype
  H.result.input_filetype = vim.bo[chat.input].filetype
  H.result.highlight = vim.b[chat.conversation].lsp_agent_highlight
  H.result.modifiable = vim.bo[chat.conversation].modifiable
  H.result.current = vim.fn.expand("%:t")
  H.result.windows = windows()
  H.result.answer = H.answer_lines()
end)
