--- The answer buffer: a markdown scratch buffer that shows each question of `:LspAgent ask`,
--- the answer as it streams in (`lspAgent/event` text), one line per tool call, and how the turn
--- ended (the lines are written by render.lua, as in the chat).
local compat = require("lsp_agent.compat")
local config = require("lsp_agent.config")
local layout = require("lsp_agent.layout")
local render = require("lsp_agent.render")
local state = require("lsp_agent.state")

local M = {}

--- Mark a change in what the running turn does: statusline and `User LspAgentStatus`.
--- @param entry lsp_agent.ClientState
--- @param step string|nil
function M.set_step(entry, step)
  if entry.step == step then
    return
  end
  entry.step = step
  pcall(vim.cmd, "redrawstatus!")
  compat.user_event("LspAgentStatus")
end

--- The answer buffer of a client's workspace, created on first use. It belongs to the root, not
--- to the server, so that a restarted server writes on in the same buffer and window.
--- @param entry lsp_agent.ClientState
--- @return integer
local function buffer(entry)
  local existing = state.answer_bufs[entry.root]
  if existing and vim.api.nvim_buf_is_valid(existing) then
    return existing
  end
  local bufnr = vim.api.nvim_create_buf(false, true)
  local name = "lsp-agent://answer"
  if vim.fn.bufnr(name) ~= -1 then
    name = name .. "/" .. vim.fn.fnamemodify(entry.root, ":t")
  end
  pcall(vim.api.nvim_buf_set_name, bufnr, name)
  vim.bo[bufnr].buftype = "nofile"
  vim.bo[bufnr].bufhidden = "hide"
  vim.bo[bufnr].swapfile = false
  vim.bo[bufnr].modifiable = false
  vim.bo[bufnr].filetype = "markdown"
  vim.keymap.set("n", "q", "<cmd>close<CR>", { buffer = bufnr, nowait = true, desc = "close" })
  state.answer_bufs[entry.root] = bufnr
  return bufnr
end

--- Show the answer buffer (if it is not shown already); returns its window.
--- @param entry lsp_agent.ClientState
--- @param focus boolean|nil move the cursor there
function M.show(entry, focus)
  local bufnr = buffer(entry)
  local win = render.windows(bufnr)[1]
  if not win then
    local options = config.options.answer
    local previous = vim.api.nvim_get_current_win()
    local position = options.position
    if position == "right" and not options.size and layout.narrow() then
      position = "bottom" -- beside the code, it would leave the code too few columns
    end
    if position == "float" then
      local width = options.size or math.floor(vim.o.columns * 0.8)
      local height = math.floor(vim.o.lines * 0.8)
      win = vim.api.nvim_open_win(bufnr, true, {
        relative = "editor",
        width = width,
        height = height,
        row = math.floor((vim.o.lines - height) / 2),
        col = math.floor((vim.o.columns - width) / 2),
        border = "rounded",
        style = "minimal",
      })
    elseif position == "bottom" then
      vim.cmd(("botright %dsplit"):format(options.size or math.floor(vim.o.lines * 0.35)))
      win = vim.api.nvim_get_current_win()
      vim.api.nvim_win_set_buf(win, bufnr)
    else
      vim.cmd(
        ("botright %dvsplit"):format(options.size or math.max(60, math.floor(vim.o.columns * 0.4)))
      )
      win = vim.api.nvim_get_current_win()
      vim.api.nvim_win_set_buf(win, bufnr)
    end
    vim.wo[win].wrap = true
    vim.wo[win].linebreak = true
    vim.wo[win].number = false
    vim.wo[win].relativenumber = false
    -- A window opened on the answer shows its end, and follows it from there.
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(bufnr), 0 })
    if not focus and vim.api.nvim_win_is_valid(previous) then
      vim.api.nvim_set_current_win(previous)
    end
  elseif focus then
    vim.api.nvim_set_current_win(win)
  end
  return win
end

--- Close the floating windows that show the answer (a review must not be hidden under one).
--- Returns true if one was closed.
--- @param entry lsp_agent.ClientState
function M.hide_float(entry)
  local closed = false
  local bufnr = state.answer_bufs[entry.root]
  if bufnr and vim.api.nvim_buf_is_valid(bufnr) then
    for _, win in ipairs(render.windows(bufnr)) do
      if vim.api.nvim_win_get_config(win).relative ~= "" then
        vim.api.nvim_win_close(win, true)
        closed = true
      end
    end
  end
  return closed
end

--- Start a new question in the buffer and show it.
--- @param entry lsp_agent.ClientState
--- @param prompt string
--- @param where string|nil what the user pointed at ("hello.py, lines 2-4")
function M.begin(entry, prompt, where)
  local bufnr = buffer(entry)
  render.prompt(bufnr, prompt, where)
  local win = M.show(entry, config.options.answer.focus)
  -- A new question is read from its heading down: every window of the buffer follows again.
  render.to_end(bufnr, vim.list_extend({ win }, vim.api.nvim_list_wins()))
end

--- A line of its own, e.g. "new session ...".
function M.note(entry, line)
  render.lines(buffer(entry), { line }, true)
end

--- Write one step of a turn shown here (see events.lua, which decides where a turn is shown).
--- @param entry lsp_agent.ClientState
--- @param event table an `lspAgent/event`
function M.on_event(entry, event)
  local bufnr = buffer(entry)
  if event.kind == "start" then
    -- The first event of a turn: a conversation continued from before is said, not silent.
    if event.continuing then
      local message = type(event.message) == "string" and event.message ~= "" and event.message
        or ("continuing session %s, %s turns — `:LspAgent new` for a fresh one"):format(
          tostring(event.session),
          tostring(event.turns)
        )
      render.lines(bufnr, { "_" .. message .. "_" }, false)
    end
  elseif render.event(bufnr, event) and event.kind == "status" then
    entry.status_shown = true
  end
end

--- The `lspAgent.ask` answer arrived (or failed): close the question in the buffer.
--- @param entry lsp_agent.ClientState
function M.finish(entry, err, result)
  local bufnr = buffer(entry)
  if err then
    render.lines(bufnr, { "**error**: " .. (err.message or tostring(err)) }, true)
  elseif type(result) == "table" then
    if not entry.status_shown then
      render.status(bufnr, result.status, nil)
    end
    local edits = result.edits
    if type(edits) == "table" and (edits.proposed or 0) > 0 then
      render.lines(bufnr, {
        ("_edits: %d proposed, %d applied, %d rejected_"):format(
          edits.proposed,
          edits.applied,
          edits.rejected
        ),
      }, false)
    end
  end
  entry.status_shown = false
end

--- The server process ended while a turn it showed here was running: say so.
--- @param entry lsp_agent.ClientState
function M.server_exited(entry, code, signal)
  render.lines(
    buffer(entry),
    { ("**the server exited** (code %s, signal %s)"):format(code, signal) },
    true
  )
end

return M
