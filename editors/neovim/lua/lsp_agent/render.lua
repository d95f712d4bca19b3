--- A conversation as Markdown lines in a scratch buffer that grows at its end: the one way the
--- answer buffer and the chat buffer write prompts, streamed text, tool calls and how a turn
--- ended. Live events (`lspAgent/event`) and the items of `lspAgent.history` go through the same
--- functions, so a conversation restored after a restart reads as it did when it was shown live.
local M = {}

--- Tool arguments worth showing, in this order, before falling back to the whole object.
local SHOWN_ARGUMENTS = { "path", "pattern", "command", "name", "glob" }

--- Buffer variable: the buffer ends in streamed text (the next chunk continues that line).
local IN_TEXT = "lsp_agent_in_text"

--- `text` on one line, at most 80 characters.
local function one_line(text)
  text = text:gsub("\n", " ")
  return #text > 80 and (text:sub(1, 77) .. "...") or text
end

--- The files a patch names (`*** Update File: a.py`, `+++ b/a.py`), in order, each once. The
--- event carries the patch's start only: a long patch may name more.
--- @param patch string
--- @return string[]
function M.patch_files(patch)
  local files, seen = {}, {}
  for _, line in ipairs(vim.split(patch, "\n", { plain = true })) do
    local name = line:match("^%*%*%* %a+ File: (.+)$")
      or line:match("^%*%*%* Move to: (.+)$")
      or line:match("^%+%+%+ b/(.+)$")
      or line:match("^%+%+%+ (.+)$")
    name = name and vim.trim((name:gsub("\t.*$", "")))
    if name and name ~= "" and name ~= "/dev/null" and not seen[name] then
      seen[name] = true
      files[#files + 1] = name
    end
  end
  return files
end

--- A tool call's arguments in one short line: the path, pattern or command it is about; the
--- files of a patch; the number of items of a plan; else the arguments as JSON.
--- @param args any
--- @return string
function M.describe_arguments(args)
  if type(args) ~= "table" then
    return (args ~= nil and args ~= vim.NIL) and tostring(args) or ""
  end
  for _, key in ipairs(SHOWN_ARGUMENTS) do
    if type(args[key]) == "string" then
      return one_line(args[key])
    end
  end
  if type(args.patch) == "string" then
    local files = M.patch_files(args.patch)
    return #files > 0 and one_line(table.concat(files, ", ")) or "(a patch)"
  end
  if type(args.items) == "table" then
    return ("%d item%s"):format(#args.items, #args.items == 1 and "" or "s")
  end
  local ok, encoded = pcall(vim.json.encode, args)
  return one_line(ok and encoded or "")
end

--- What a prompt was about, in a few words: "hello.py", "hello.py, line 2", "hello.py, lines
--- 2-4". `first` and `last` are 1-based; 0 or nil means the whole file.
--- @param path string relative to the workspace
--- @param first integer|nil
--- @param last integer|nil
--- @return string
function M.where(path, first, last)
  if not first or first == 0 or first == vim.NIL then
    return path
  end
  if last == first or not last or last == vim.NIL then
    return ("%s, line %d"):format(path, first)
  end
  return ("%s, lines %d-%d"):format(path, first, last)
end

--- Windows (in every tab page) that follow the end of `bufnr`: their cursor is on its last line.
--- Scrolling up moves the cursor off it, and the window stops following; `G` resumes.
local function following(bufnr)
  local last = vim.api.nvim_buf_line_count(bufnr)
  local found = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == bufnr and vim.api.nvim_win_get_cursor(win)[1] >= last then
      found[#found + 1] = win
    end
  end
  return found
end

--- Windows of the current tab page that show `bufnr`.
--- @param bufnr integer
--- @return integer[]
function M.windows(bufnr)
  local found = {}
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == bufnr then
      found[#found + 1] = win
    end
  end
  return found
end

--- Move the cursor of `wins` to the last line of `bufnr`, which scrolls them to the end.
--- @param bufnr integer
--- @param wins integer[]
function M.to_end(bufnr, wins)
  local last = vim.api.nvim_buf_line_count(bufnr)
  for _, win in ipairs(wins) do
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == bufnr then
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
end

--- Change the (read-only) buffer with `fn(bufnr)`, keeping the windows that follow its end
--- following it.
local function edit(bufnr, fn)
  local wins = following(bufnr)
  vim.bo[bufnr].modifiable = true
  fn(bufnr)
  vim.bo[bufnr].modifiable = false
  M.to_end(bufnr, wins)
end

--- Empty the buffer (a conversation about to be drawn again).
--- @param bufnr integer
function M.clear(bufnr)
  edit(bufnr, function()
    vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, {})
  end)
  vim.b[bufnr][IN_TEXT] = false
end

--- Append whole lines, after a blank line when `paragraph` and the buffer does not end in one.
--- @param bufnr integer
--- @param lines string[]
--- @param paragraph boolean|nil
function M.lines(bufnr, lines, paragraph)
  lines = vim.list_extend({}, lines)
  edit(bufnr, function()
    local count = vim.api.nvim_buf_line_count(bufnr)
    local last = vim.api.nvim_buf_get_lines(bufnr, count - 1, count, false)[1]
    local empty_buffer = count == 1 and last == ""
    if paragraph and not empty_buffer and last ~= "" then
      table.insert(lines, 1, "")
    end
    if empty_buffer then
      vim.api.nvim_buf_set_lines(bufnr, 0, 1, false, lines)
    else
      vim.api.nvim_buf_set_lines(bufnr, count, count, false, lines)
    end
  end)
  vim.b[bufnr][IN_TEXT] = false
end

--- Append streamed text where the last chunk stopped (a new paragraph after other lines).
--- @param bufnr integer
--- @param chunk string
function M.text(bufnr, chunk)
  if not vim.b[bufnr][IN_TEXT] then
    M.lines(bufnr, { "" }, true)
    vim.b[bufnr][IN_TEXT] = true
  end
  edit(bufnr, function()
    local count = vim.api.nvim_buf_line_count(bufnr)
    local last = vim.api.nvim_buf_get_lines(bufnr, count - 1, count, false)[1]
    local pieces = vim.split(chunk, "\n", { plain = true })
    pieces[1] = last .. pieces[1]
    vim.api.nvim_buf_set_lines(bufnr, count - 1, count, false, pieces)
  end)
end

--- A question of the user's: a `##` heading, and what it was about.
--- @param bufnr integer
--- @param prompt string
--- @param where string|nil
function M.prompt(bufnr, prompt, where)
  -- The files a `#` named go along as a line for the agent; the user reads them as a note.
  local text, files = require("lsp_agent.references").split(prompt)
  local lines = {}
  for i, line in ipairs(vim.split(text, "\n", { plain = true })) do
    lines[#lines + 1] = (i == 1 and "## " or "   ") .. line
  end
  local about = where and { where } or {}
  if #files > 0 then
    about[#about + 1] = "with " .. table.concat(files, ", ")
  end
  if #about > 0 then
    lines[#lines + 1] = "_(" .. table.concat(about, "; ") .. ")_"
  end
  M.lines(bufnr, lines, true)
end

--- A tool's name as the user reads it: a tool of an MCP server (`mcp__<server>__<tool>`) as
--- `server · tool`, every other name as it is.
--- @param name any
--- @return string
function M.tool_label(name)
  local text = tostring(name)
  local server, tool = text:match("^mcp__(.-)__(.+)$")
  if server and server ~= "" then
    return server .. " · " .. tool
  end
  return text
end

--- A tool call, on a line of its own.
function M.tool(bufnr, name, args)
  M.lines(
    bufnr,
    { ("- `%s` %s"):format(M.tool_label(name), M.describe_arguments(args)) },
    vim.b[bufnr][IN_TEXT]
  )
end

function M.tool_result(bufnr, ok, summary)
  local shown = (summary ~= nil and summary ~= vim.NIL) and tostring(summary) or ""
  M.lines(bufnr, { ("  %s %s"):format(ok and "✓" or "✗", shown) }, false)
end

function M.permission(bufnr, permission)
  local line = ("  permission for %s: %s"):format(
    M.tool_label(permission.name),
    tostring(permission.decision)
  )
  M.lines(bufnr, { line }, false)
end

--- How a question ended, when it ended without the user's choice (a choice shows as the
--- permission line of its tool).
local QUESTION_ENDED = {
  timedOut = "  no answer in time for %s: denied",
  withdrawn = "  the question for %s was withdrawn",
}

function M.question_ended(bufnr, name, question_state)
  local line = QUESTION_ENDED[question_state]
  if line then
    M.lines(bufnr, { line:format(tostring(name)) }, false)
  end
end

function M.compaction(bufnr, strategy, before, after)
  M.lines(bufnr, {
    ("_context compacted (%s): %s → %s tokens_"):format(
      tostring(strategy),
      tostring(before),
      tostring(after)
    ),
  }, true)
end

--- How a turn ended: `_completed_`, or `**failed**: why`.
function M.status(bufnr, status, error)
  local line = "_" .. tostring(status) .. "_"
  if error ~= nil and error ~= vim.NIL then
    line = ("**%s**: %s"):format(tostring(status), tostring(error))
  end
  M.lines(bufnr, { line }, true)
end

--- A turn the user undid.
function M.undo(bufnr, undid, files)
  local names = type(files) == "table" and table.concat(files, ", ") or ""
  M.lines(bufnr, { ("_undid turn %s: %s_"):format(tostring(undid), names) }, true)
end

--- Write one `lspAgent/event` of a turn (`start` and `usage` are for the views to show as
--- they like; a compaction that only started has no figures yet). Returns true if written.
--- @param bufnr integer
--- @param event table
--- @return boolean
function M.event(bufnr, event)
  local kind = event.kind
  if kind == "text" then
    M.text(bufnr, event.text or "")
  elseif kind == "tool" then
    M.tool(bufnr, event.name, event.args)
  elseif kind == "toolResult" then
    M.tool_result(bufnr, event.ok, event.summary)
  elseif kind == "permission" then
    M.permission(bufnr, event)
  elseif kind == "question" then
    M.question_ended(bufnr, event.name, event.state)
  elseif kind == "compaction" and event.phase ~= "started" then
    M.compaction(bufnr, event.strategy, event.before, event.after)
  elseif kind == "status" then
    M.status(bufnr, event.status, event.error)
  else
    return false
  end
  return true
end

--- Write one item of `lspAgent.history`, as its live events wrote it.
--- @param bufnr integer
--- @param item table
function M.item(bufnr, item)
  local kind = item.type
  if kind == "prompt" then
    local selection = type(item.selection) == "table" and item.selection or nil
    local where = selection
      and type(selection.path) == "string"
      and M.where(selection.path, selection.startLine, selection.endLine)
    M.prompt(bufnr, item.text or "", where or nil)
    if item.rewound then
      M.lines(bufnr, { "_(rewound: the agent no longer sees this turn)_" }, true)
    end
  elseif kind == "answer" then
    M.text(bufnr, item.text or "")
  elseif kind == "tool" then
    M.tool(bufnr, item.name, item.args)
    if type(item.permission) == "table" then
      M.permission(bufnr, item.permission)
    end
    if item.ok ~= nil and item.ok ~= vim.NIL then
      M.tool_result(bufnr, item.ok, item.summary)
    end
  elseif kind == "question" then
    M.question_ended(bufnr, item.name, item.state)
  elseif kind == "compaction" then
    M.compaction(bufnr, item.strategy, item.before, item.after)
  elseif kind == "undo" then
    M.undo(bufnr, item.undid, item.files)
  elseif kind == "rewind" then
    M.lines(bufnr, { ("_conversation rewound to before turn %s_"):format(tostring(item.to)) }, true)
  elseif kind == "status" then
    M.status(bufnr, item.status, item.error)
  end
end

return M
