--- The `window/showMessageRequest` handler: the agent's permission questions ("run this
--- command?") with the answers `Allow`, `Allow for this session` and `Deny`.
---
--- On Neovim 0.10+ the question goes through `vim.ui.select`, so a picker plugin shows it, and the
--- handler yields until it is answered. Neovim 0.7 to 0.9 answer as soon as the handler returns,
--- so there the question is asked with `inputlist()`, which waits in place. Dismissing the
--- question answers null, which the server counts as Deny.
local compat = require("lsp_agent.compat")

local M = {}

local function title(action)
  return action.title
end

--- Ask with `inputlist()`; returns the chosen action or nil.
local function ask_in_place(message, actions)
  local lines = { "lsp-agent: " .. message }
  for i, action in ipairs(actions) do
    lines[#lines + 1] = ("%d. %s"):format(i, action.title)
  end
  local ok, choice = pcall(vim.fn.inputlist, lines)
  if ok and choice >= 1 and choice <= #actions then
    return actions[choice]
  end
  return nil
end

--- Handler of `window/showMessageRequest` for the lsp-agent client.
function M.handler(_, params, _)
  local actions = params.actions
  local message = params.message or ""
  if type(actions) ~= "table" or #actions == 0 then
    vim.notify("lsp-agent: " .. message, vim.log.levels.WARN)
    return vim.NIL
  end
  compat.user_event("LspAgentQuestion")
  local choice
  if compat.can_yield() then
    local co = coroutine.running()
    vim.ui.select(actions, {
      prompt = "lsp-agent: " .. message,
      format_item = title,
      kind = "lsp_agent.permission",
    }, function(selected)
      -- Resume after the yield below, also when vim.ui.select answers synchronously.
      vim.schedule(function()
        coroutine.resume(co, selected)
      end)
    end)
    choice = coroutine.yield()
  else
    choice = ask_in_place(message, actions)
  end
  return choice or vim.NIL
end

return M
