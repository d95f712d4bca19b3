--- `:LspAgent {subcommand}`: parsing and completion of the one user command.
local M = {}

--- Subcommands and what they do, in the order completion offers them.
M.SUBCOMMANDS = {
  { "ask", "ask the agent (a range or visual selection is sent along)" },
  { "chat", "open the chat (a range or visual selection goes with the next prompt)" },
  { "undo", "undo the last turn that changed files (through a review)" },
  { "cancel", "cancel the running turn" },
  { "new", "start a new session" },
  { "sessions", "pick a stored session to continue" },
  { "status", "model, endpoint, sandbox and sessions in effect" },
  { "model", "choose the model from those the endpoint lists" },
  { "answer", "show the answer buffer" },
  { "review", "go to the edit or question that waits for you" },
  { "rewind", "rewind the files and the conversation to before prompt N (through a review)" },
  { "restart", "stop the server (the next command starts it)" },
}

local function usage()
  local names = {}
  for _, sub in ipairs(M.SUBCOMMANDS) do
    names[#names + 1] = sub[1]
  end
  return "usage: :LspAgent {" .. table.concat(names, "|") .. "} (see :help :LspAgent)"
end

--- Run `:LspAgent` with the options Neovim passes to a user command.
--- @param opts table
function M.run(opts)
  local agent = require("lsp_agent")
  local sub, rest = (opts.args or ""):match("^%s*(%S*)%s*(.-)%s*$")
  if sub == "ask" then
    local range = opts.range and opts.range > 0 and { opts.line1, opts.line2 } or nil
    agent.ask(rest ~= "" and rest or nil, { range = range })
  elseif sub == "chat" then
    local range = opts.range and opts.range > 0 and { opts.line1, opts.line2 } or nil
    agent.chat({ range = range })
  elseif sub == "undo" then
    agent.undo()
  elseif sub == "rewind" then
    local turn = tonumber(rest:match("^%d+$") or "")
    if not turn or turn < 1 then
      vim.notify(
        "lsp-agent: usage: :LspAgent rewind N (N: the turn whose prompt to go back to)",
        vim.log.levels.ERROR
      )
      return
    end
    agent.rewind(turn)
  elseif sub == "cancel" then
    agent.cancel()
  elseif sub == "new" then
    agent.new_session()
  elseif sub == "sessions" then
    agent.sessions()
  elseif sub == "status" then
    agent.show_status()
  elseif sub == "model" then
    agent.model(rest ~= "" and rest or nil)
  elseif sub == "answer" then
    agent.show_answer()
  elseif sub == "review" then
    agent.review()
  elseif sub == "restart" then
    agent.restart()
  else
    vim.notify("lsp-agent: " .. usage(), vim.log.levels.ERROR)
  end
end

--- Complete the subcommand (the prompt after `ask` is free text).
function M.complete(arglead, cmdline)
  local words = vim.split(vim.trim((cmdline:gsub("^%S*LspAgent!?", ""))), "%s+")
  if #words > 1 or (words[1] ~= "" and arglead == "") then
    return {}
  end
  local found = {}
  for _, sub in ipairs(M.SUBCOMMANDS) do
    if vim.startswith(sub[1], arglead) then
      found[#found + 1] = sub[1]
    end
  end
  return found
end

return M
