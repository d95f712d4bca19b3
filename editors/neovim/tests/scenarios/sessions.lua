-- Two questions in two sessions (:LspAgent new between them), then the user picks the first
-- session again with :LspAgent sessions and asks a third question (typed at the prompt of a bare
-- :LspAgent ask); :LspAgent status shows the model and the sessions, and a second setup() changes
-- the model of the running server.
local H = require("harness")

H.run(function()
  H.setup()
  vim.cmd("LspAgent ask one")
  H.wait_turn("completed", 1)
  vim.cmd("LspAgent new")
  H.wait_for("the new session", function()
    return H.answer_has("_new session ")
  end)
  vim.cmd("LspAgent ask two")
  H.wait_turn("completed", 2)
  -- The prompts below block inside the commands (inputlist, input on 0.7): the commands are
  -- typed, as a user does, so that they run from Neovim's main loop, not inside this test's
  -- coroutine, where 0.7.2 can panic ("unprotected error in call to Lua API").
  H.answer_select("2<CR>") -- newest first: the second line is the first session
  H.feed(":LspAgent sessions<CR>")
  H.wait_for("the resumed session", function()
    return H.answer_has("_resumed session ")
  end)
  H.answer_input("three<CR>")
  H.feed(":LspAgent ask<CR>")
  H.wait_turn("completed", 3)
  vim.cmd("LspAgent status")
  H.wait_for("the status", function()
    for _, note in ipairs(H.result.notifications) do
      if note.message:match("^lsp%-agent %S+, workspace") then
        H.result.status = vim.split(note.message, "\n")
        return true
      end
    end
    return false
  end)
  -- setup() again changes the settings of the running server.
  require("lsp_agent").setup({
    cmd = { os.getenv("LSP_AGENT_TEST_SERVER"), "serve" },
    settings = { baseUrl = os.getenv("LSP_AGENT_TEST_BASE_URL"), model = "other-model" },
  })
  -- Ask for the status until it names the new model (the server reads settings again when
  -- told they changed): each round waits for its answer.
  for round = 1, 200 do
    local asked = {}
    require("lsp_agent").show_status(function(lines)
      asked.lines = lines
    end)
    H.wait_for("the status answer", function()
      return asked.lines
    end)
    H.result.status_after_setup = asked.lines
    if asked.lines[2]:match("^model: other%-model") then
      break
    end
    H.expect(round < 200, "the new model never took effect: " .. asked.lines[2])
  end
  H.feed(":LspAgent nonsense<CR>")
  H.result.nonsense = H.wait_for("the usage error", function()
    local last = H.result.notifications[#H.result.notifications]
    return last and last.level == vim.log.levels.ERROR and last
  end)
  H.result.answer = H.answer_lines()
  H.result.completion = vim.fn.getcompletion("LspAgent s", "cmdline")
end)
