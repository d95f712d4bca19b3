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
  H.answer_select("2<CR>") -- newest first: the second line is the first session
  vim.cmd("LspAgent sessions")
  H.wait_for("the resumed session", function()
    return H.answer_has("_resumed session ")
  end)
  H.answer_input("three<CR>")
  vim.cmd("LspAgent ask")
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
  H.wait_for("the new model in effect", function()
    require("lsp_agent").show_status(function(lines)
      H.result.status_after_setup = lines
    end)
    H.sleep(100)
    local lines = H.result.status_after_setup
    return lines and lines[2]:match("^model: other%-model")
  end)
  local ok, err = pcall(vim.cmd, "LspAgent nonsense")
  H.result.nonsense = { ok = ok, error = tostring(err) }
  H.result.answer = H.answer_lines()
  H.result.completion = vim.fn.getcompletion("LspAgent s", "cmdline")
end)
