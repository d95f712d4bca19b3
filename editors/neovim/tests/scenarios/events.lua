-- The events the server is getting in parallel (start, usage, question states) and its
-- `$/cancelRequest` for a question, injected into the plugin's handlers as the server will send
-- them. The questions themselves are real: the real server asks, and hears the plugin's answer.
local H = require("harness")

local function client_id()
  return next(require("lsp_agent.state").clients)
end

--- Deliver a message to the plugin as the server would: through the client's own handler.
local function from_server(method, params)
  local id = client_id()
  local handler = vim.lsp.get_client_by_id(id).handlers[method]
  H.expect(handler ~= nil, "the plugin handles " .. method)
  handler(nil, params, { method = method, client_id = id })
end

local function waiting_question()
  local first = require("lsp_agent.decisions").pending()[1]
  return first and first.kind == "question" and first
end

H.run(function()
  H.setup()
  vim.cmd("edit hello.py")
  vim.cmd("LspAgent ask run two commands")

  -- The first question: the statusline says it waits; the server withdraws it.
  local first = H.wait_for("the first question", waiting_question)
  H.result.statusline_while_asking = require("lsp_agent").status()
  H.result.first_request_id = first.request_id
  H.result.first_window_open = vim.api.nvim_win_is_valid(first.win)
  local running = require("lsp_agent.state").clients[client_id()].session
  from_server("lspAgent/event", {
    session = running,
    turn = 1,
    kind = "question",
    id = first.request_id,
    state = "open",
    name = "bash",
    text = first.message,
    actions = first.actions,
    timeoutSeconds = 120,
  })
  from_server("$/cancelRequest", { id = first.request_id })
  H.result.first_window_after = first.win and vim.api.nvim_win_is_valid(first.win)
  H.result.first_still_waiting = require("lsp_agent.decisions").pending()[1] == first

  -- The second: closed by a `timedOut` question event, matched by its text.
  local second = H.wait_for("the second question", function()
    local q = waiting_question()
    return q and q ~= first and q
  end)
  from_server("lspAgent/event", {
    session = running,
    turn = 1,
    kind = "question",
    id = "not-a-request-id",
    state = "timedOut",
    name = "bash",
    text = second.message,
  })
  H.result.second_still_waiting = require("lsp_agent.decisions").pending()[1] == second
  H.wait_turn()

  -- A turn that continues an earlier session says so; usage shows in :LspAgent status.
  local session = require("lsp_agent.state").clients[client_id()].session
  from_server("lspAgent/event", {
    session = session,
    turn = 2,
    kind = "start",
    prompt = "again",
    continuing = true,
    turns = 7,
    message = ("continuing session %s, 7 turns — `:LspAgent new` for a fresh one"):format(
      session
    ),
  })
  from_server("lspAgent/event", {
    session = session,
    turn = 2,
    kind = "usage",
    inputTokens = 1200,
    cachedTokens = 1000,
    outputTokens = 40,
    contextTokens = 1500,
    contextWindow = 128000,
  })
  require("lsp_agent").show_status(function(lines)
    H.result.status = lines
  end)
  H.wait_for("the status", function()
    return H.result.status
  end)
  H.result.answer = H.answer_lines()
end)
