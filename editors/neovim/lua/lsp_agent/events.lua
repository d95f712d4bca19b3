--- `lspAgent/event`: each step of a turn, shown where the turn is shown (the answer buffer for
--- `:LspAgent ask`, the chat for its prompts and for asks made while it is on screen; the chat
--- also writes every turn of the session it shows), and the statusline's step.
local answer = require("lsp_agent.answer")
local chat = require("lsp_agent.chat")
local decisions = require("lsp_agent.decisions")
local state = require("lsp_agent.state")

local M = {}

local STEP_OF = {
  text = "writing",
  compaction = "compacting the context",
}

--- Handler of `lspAgent/event`.
function M.on_event(_, event, ctx)
  if type(event) ~= "table" then
    return
  end
  local entry = state.get(ctx.client_id)
  local running = entry.running
  if running and not running.session and event.session then
    running.session = event.session
    if running.cancel_when_known then
      require("lsp_agent").cancel()
    end
  end
  if not entry.session then
    entry.session = event.session
  end
  if not running or running.view ~= "chat" then
    answer.on_event(entry, event)
  end
  chat.on_event(entry, event)
  local kind = event.kind
  if kind == "usage" then
    entry.usage = event
  elseif kind == "question" then
    decisions.on_question_event(ctx.client_id, event)
    answer.set_step(entry, event.state == "open" and "waiting for your answer" or "thinking")
  elseif kind == "status" then
    -- The turn is over even if its `lspAgent.ask` answer never comes (a cancelled request).
    entry.running = nil
    answer.set_step(entry, nil)
  elseif kind == "tool" then
    answer.set_step(entry, event.name)
  else
    answer.set_step(entry, STEP_OF[kind] or "thinking")
  end
end

--- The server process ended: say so where its running turn was shown.
function M.server_exited(client_id, code, signal)
  local entry = state.clients[client_id]
  if not entry then
    return
  end
  local running = entry.running
  if running then
    if running.view == "chat" then
      chat.server_exited(entry, code, signal)
    else
      answer.server_exited(entry, code, signal)
    end
    entry.running = nil
  end
  answer.set_step(entry, nil)
end

return M
