--- What waits for the user: edit reviews and the agent's questions.
---
--- Each is shown without taking the cursor (typing goes on where it was), announced, and decided
--- only in its own window, which the user goes to with `:LspAgent review`; the keys typed before
--- that are discarded, so nothing typed for a buffer ever decides. One is on screen at a time;
--- the others wait in arrival order.
---
--- A decision is a review (`review.lua`) or a question (`questions.lua`) with:
---   kind        "review" or "question"
---   client_id   the server that asked
---   request_id  the JSON-RPC id of its request, when known
---   title       a few words for the announcement ("an edit to hello.py")
---   show(focus) open (or reopen) its window; focus: move the cursor there
---   close()     close its window (it still waits)
---   withdraw(reason)  decide on the user's behalf: rejected, or no answer
local compat = require("lsp_agent.compat")
local state = require("lsp_agent.state")

local M = {}

--- The waiting decisions, oldest first.
--- @return table[]
function M.pending()
  return state.decisions
end

local function redraw_status()
  pcall(vim.cmd, "redrawstatus!")
  compat.user_event("LspAgentStatus")
end

--- Tell the user, in one line that fits (a longer one would stop the typing at a hit-enter
--- prompt).
local function announce(decision)
  local head, tail = "lsp-agent: ", " waits for you: :LspAgent review"
  local room = math.max(10, vim.o.columns - 15 - #head - #tail)
  local title = decision.title
  if vim.fn.strdisplaywidth(title) > room then
    title = vim.fn.strcharpart(title, 0, room - 1) .. "…"
  end
  vim.notify(head .. title .. tail, vim.log.levels.WARN)
end

--- A new decision arrived: show it (without the cursor) if none is on screen, and announce it.
--- @param decision table
function M.add(decision)
  table.insert(state.decisions, decision)
  if state.decisions[1] == decision then
    decision:show(false)
  end
  announce(decision)
  redraw_status()
  compat.user_event(decision.kind == "review" and "LspAgentReview" or "LspAgentQuestion")
end

--- A decision was taken (or withdrawn): close it and show the next one.
--- @param decision table
function M.done(decision)
  local was_first = state.decisions[1] == decision
  for i, item in ipairs(state.decisions) do
    if item == decision then
      table.remove(state.decisions, i)
      break
    end
  end
  decision:close()
  local nxt = state.decisions[1]
  if was_first and nxt then
    nxt:show(false)
    announce(nxt)
  end
  redraw_status()
end

--- `:LspAgent review`: go to the oldest waiting decision. Keys typed before are discarded.
--- @return boolean true if there was one
function M.focus()
  local decision = state.decisions[1]
  if not decision then
    vim.notify("lsp-agent: nothing waits for your review", vim.log.levels.INFO)
    return false
  end
  vim.cmd("stopinsert")
  compat.flush_typeahead()
  decision:show(true)
  return true
end

--- What the statusline says while something waits (a question first: it holds a command),
--- with the way there: a message in the command line is gone with the next mode message.
--- @return string|nil
function M.waiting()
  local found
  for _, decision in ipairs(state.decisions) do
    if decision.kind == "question" then
      return "waiting for your answer (:LspAgent review)"
    end
    found = "an edit to review (:LspAgent review)"
  end
  return found
end

--- Withdraw every waiting decision of a server (all servers when `client_id` is nil).
--- @param client_id integer|nil
--- @param reason string
function M.withdraw_all(client_id, reason)
  for _, decision in ipairs(vim.list_slice(state.decisions)) do
    if client_id == nil or decision.client_id == client_id then
      decision:withdraw(reason)
    end
  end
end

--- Handler of `$/cancelRequest` from the server: it no longer wants that answer (the question
--- timed out, or the turn ended); close what shows it. A late answer would be ignored anyway.
function M.on_cancel_request(_, params, ctx)
  local id = type(params) == "table" and params.id or nil
  for _, decision in ipairs(vim.list_slice(state.decisions)) do
    if decision.client_id == ctx.client_id and id ~= nil and decision.request_id == id then
      decision:withdraw("the agent withdrew it")
      vim.notify(("lsp-agent: %s was withdrawn"):format(decision.title), vim.log.levels.INFO)
    end
  end
end

--- A `question` event that is no longer open (answered elsewhere, timed out, withdrawn): close
--- its window if it is still waiting. Matched by request id, else by its text.
--- @param client_id integer
--- @param event table
function M.on_question_event(client_id, event)
  if event.state == "open" then
    return
  end
  for _, decision in ipairs(vim.list_slice(state.decisions)) do
    local same = decision.kind == "question"
      and decision.client_id == client_id
      and (
        (event.id ~= nil and decision.request_id == event.id)
        or (type(event.text) == "string" and decision.message == event.text)
      )
    if same then
      local why = ({
        timedOut = "it timed out: no answer counts as Deny",
        answered = "it was answered",
      })[event.state] or "the agent withdrew it"
      decision:withdraw(why)
      vim.notify(("lsp-agent: %s closed: %s"):format(decision.title, why), vim.log.levels.INFO)
    end
  end
end

return M
