--- A small test runner for headless Neovim.
---
--- The test body runs in a coroutine and waits for the editor with `wait_for` and `sleep`; while
--- it waits, Neovim's main loop runs as it does for a user: keys fed with `feed` are typed,
--- LSP messages and timers are handled. When the body ends (or fails, or times out) the harness
--- writes what it observed to the JSON file named by LSP_AGENT_TEST_RESULT and quits Neovim
--- with status 0 (passed) or 1 (failed).
local H = {}

--- Observations for the Python side of the test, written as JSON at the end.
H.result = { reviews = {}, selects = {}, notifications = {}, questions = 0 }

local resume
local finished = false

local function write_result()
  local path = os.getenv("LSP_AGENT_TEST_RESULT")
  if path then
    vim.fn.writefile({ vim.json.encode(H.result) }, path)
  end
end

local function finish(ok, message)
  if finished then
    return
  end
  finished = true
  H.result.passed = ok
  H.result.failure = message
  write_result()
  if not ok then
    io.stderr:write("FAILED: " .. tostring(message) .. "\n")
  end
  vim.schedule(function()
    vim.cmd(ok and "qall!" or "cquit 1")
  end)
end

--- Run `body` as the test; quits Neovim when it ends.
--- @param body function
function H.run(body)
  local timeout = tonumber(os.getenv("LSP_AGENT_TEST_TIMEOUT_MS") or "") or 60000
  local co = coroutine.create(body)
  resume = function()
    if finished or coroutine.status(co) ~= "suspended" then
      return
    end
    local ok, err = coroutine.resume(co)
    if not ok then
      finish(false, debug.traceback(co, err))
    elseif coroutine.status(co) == "dead" then
      finish(true)
    end
  end
  vim.defer_fn(function()
    finish(false, ("the test did not end within %d ms"):format(timeout))
  end, timeout)
  vim.schedule(resume)
end

--- Let the editor run for `ms` milliseconds.
function H.sleep(ms)
  vim.defer_fn(function()
    resume()
  end, ms)
  coroutine.yield()
end

--- Wait until `predicate()` is true; fails the test after `timeout_ms` (default 20 s).
--- @param what string what is awaited, for the failure message
function H.wait_for(what, predicate, timeout_ms)
  local deadline = vim.loop.now() + (timeout_ms or 20000)
  while true do
    local ok, value = pcall(predicate)
    if ok and value then
      return value
    end
    if vim.loop.now() > deadline then
      error("timed out waiting for " .. what .. (ok and "" or (": " .. tostring(value))), 2)
    end
    H.sleep(20)
  end
end

--- Type keys (`<CR>` notation), as the user would: they go through mappings.
function H.feed(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "t", false)
end

--- Fail the test with `message` unless `condition`.
function H.expect(condition, message)
  if not condition then
    error(message, 2)
  end
end

--- Start the plugin against the server and model the Python side prepared.
--- @param settings table|nil extra `lspAgent` settings
--- @param options table|nil extra setup() options
function H.setup(settings, options)
  local opts = vim.tbl_deep_extend("force", {
    cmd = { os.getenv("LSP_AGENT_TEST_SERVER") or "lsp-agent", "serve" },
    settings = vim.tbl_extend("force", {
      baseUrl = os.getenv("LSP_AGENT_TEST_BASE_URL"),
      model = "test-model",
    }, settings or {}),
  }, options or {})
  if os.getenv("LSP_AGENT_TEST_LSP_LOG") then
    vim.lsp.set_log_level(os.getenv("LSP_AGENT_TEST_LSP_LOG"))
  end
  require("lsp_agent").setup(opts)
  H.result.nvim = ("%d.%d"):format(vim.version().major, vim.version().minor)
  -- Record what the user is told, and copy it to stderr for a failing test's report. Not through
  -- Neovim's messages: headless Neovim has no screen on which to dismiss a hit-enter prompt, and
  -- 0.7.2 then waits at it for ever, or panics on the way out.
  vim.notify = function(message, level)
    table.insert(H.result.notifications, { message = message, level = level })
    io.stderr:write(tostring(message) .. "\n")
  end
  -- Record every review as it arrives: its text is what the user reads.
  vim.api.nvim_create_autocmd("User", {
    pattern = "LspAgentReview",
    callback = function()
      local pending = require("lsp_agent.decisions").pending()
      local review = pending[#pending]
      table.insert(H.result.reviews, vim.api.nvim_buf_get_lines(review:buffer(), 0, -1, false))
    end,
  })
end

--- The kind of the decision in the current window ("review", "question"), or nil.
function H.current_decision()
  local win = vim.api.nvim_get_current_win()
  for _, decision in ipairs(require("lsp_agent.decisions").pending()) do
    if decision.win == win then
      return decision
    end
  end
  return nil
end

--- Go to the waiting decision as the user does (`:LspAgent review`) and wait until its window
--- has the cursor.
function H.go_to_decision(kind)
  vim.cmd("LspAgent review")
  return H.wait_for("the " .. kind .. " window to have the cursor", function()
    local decision = H.current_decision()
    return decision and decision.kind == kind and decision
  end)
end

--- Answer the next `vim.ui.select` by typing `keys` when it shows its list, and record the
--- list. The default `vim.ui.select` still runs; only the typing is scripted.
function H.answer_select(keys)
  local original = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    vim.ui.select = original
    local shown = {}
    for i, item in ipairs(items) do
      shown[i] = opts and opts.format_item and opts.format_item(item) or tostring(item)
    end
    table.insert(H.result.selects, { prompt = opts and opts.prompt, items = shown })
    H.feed(keys)
    return original(items, opts, on_choice)
  end
end

--- Answer the agent's questions (permission requests) in order, each with the choice titled
--- `answers[i]`: go to the question (`:LspAgent review`), put the cursor on that choice, <CR>.
--- @param answers string[]
function H.answer_questions(answers)
  vim.api.nvim_create_autocmd("User", {
    pattern = "LspAgentQuestion",
    callback = function()
      H.result.questions = H.result.questions + 1
      local wanted = answers[H.result.questions] or "Deny"
      vim.schedule(function()
        vim.cmd("LspAgent review")
        local question = H.current_decision()
        for line, index in pairs(question and question.choices or {}) do
          if question.actions[index].title == wanted then
            vim.api.nvim_win_set_cursor(0, { line, 0 })
            H.feed("<CR>")
          end
        end
      end)
    end,
  })
end

--- Answer the next `vim.ui.input` by typing `keys` when it asks.
function H.answer_input(keys)
  local original = vim.ui.input
  vim.ui.input = function(opts, on_confirm)
    vim.ui.input = original
    H.result.input_prompt = opts and opts.prompt
    H.feed(keys)
    return original(opts, on_confirm)
  end
end

--- The number of reviews opened so far.
function H.reviews()
  return #H.result.reviews
end

--- Wait for review number `n` to arrive, then go to it as the user does (`:LspAgent review`).
function H.wait_review(n)
  H.wait_for("review " .. n, function()
    local first = require("lsp_agent.decisions").pending()[1]
    return H.reviews() >= n and first ~= nil and first.kind == "review"
  end)
  H.go_to_decision("review")
end

--- The lines of the answer buffer.
function H.answer_lines()
  local bufnr = vim.fn.bufnr("lsp-agent://answer")
  if bufnr == -1 then
    return {}
  end
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

--- True when the answer buffer holds `needle` (plain text).
function H.answer_has(needle)
  return table.concat(H.answer_lines(), "\n"):find(needle, 1, true) ~= nil
end

--- How many turns ended with `status` so far (lines "_completed_", "**failed**: ...").
function H.turns_ended(status)
  local count = 0
  for _, line in ipairs(H.answer_lines()) do
    if line == "_" .. status .. "_" or line:match("^%*%*" .. status .. "%*%*") then
      count = count + 1
    end
  end
  return count
end

--- Wait until `count` turns (default 1) ended with `status` (default "completed") and the
--- `lspAgent.ask` answer arrived (the statusline part is empty again).
function H.wait_turn(status, count)
  status, count = status or "completed", count or 1
  H.wait_for(("%d turn(s) to end with %s"):format(count, status), function()
    return H.turns_ended(status) >= count and require("lsp_agent").status() == ""
  end)
  -- The `status` event ends the turn in the statusline; the `lspAgent.ask` answer, which adds
  -- the edit counts, may arrive a moment later: wait for it when the turn proposed edits.
  H.wait_for("the ask answer with its edit counts", function()
    local edit_tools = { edit_file = true, write_file = true, apply_patch = true }
    local edited, counted = false, false
    for _, line in ipairs(H.answer_lines()) do
      edited = edited or edit_tools[line:match("^%- `([%w_]+)`") or ""] == true
      counted = counted or line:match("^_edits:") ~= nil
    end
    return counted or not edited
  end)
end

--- The chat of the (one) workspace, once `:LspAgent chat` made it.
function H.chat()
  local _, chat = next(require("lsp_agent.state").chats)
  return chat
end

--- The lines of the chat's conversation.
function H.chat_lines()
  local chat = H.chat()
  return chat and vim.api.nvim_buf_get_lines(chat.conversation, 0, -1, false) or {}
end

--- The lines of the chat's input.
function H.input_lines()
  local chat = H.chat()
  return chat and vim.api.nvim_buf_get_lines(chat.input, 0, -1, false) or {}
end

--- Wait until the chat's conversation shows `count` turns ended with `status` (default
--- "completed") and no turn runs.
function H.wait_chat_turn(count, status)
  status = status or "completed"
  H.wait_for(("%d chat turn(s) to end with %s"):format(count, status), function()
    local ended = 0
    for _, line in ipairs(H.chat_lines()) do
      if line == "_" .. status .. "_" or line:match("^%*%*" .. status .. "%*%*") then
        ended = ended + 1
      end
    end
    return ended >= count and require("lsp_agent").status() == ""
  end)
end

--- Wait until the chat has drawn its conversation from the server's history.
function H.wait_chat_loaded()
  H.wait_for("the chat's conversation", function()
    local chat = H.chat()
    return chat and chat.loaded and not chat.loading
  end)
end

return H
