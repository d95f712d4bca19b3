-- :help lsp-agent works once tags are generated (into a copy of doc/, so that the checkout
-- stays clean), and every |link| in the help file leads somewhere.
local H = require("harness")

H.run(function()
  local rtp = assert(os.getenv("LSP_AGENT_TEST_DOC_RTP"))
  vim.opt.runtimepath:append(rtp)
  vim.cmd("helptags " .. vim.fn.fnameescape(rtp .. "/doc"))
  H.result.opened = {}
  for _, topic in ipairs({
    "lsp-agent",
    ":LspAgent",
    "lsp-agent-setup",
    "lsp-agent-review",
    ":LspAgent-review",
    "lsp-agent-chat",
    ":LspAgent-chat",
    ":LspAgent-undo",
    "lsp-agent-undo",
    "lsp-agent-highlights",
    "lsp_agent.status()",
  }) do
    vim.cmd("help " .. topic)
    H.result.opened[topic] = vim.fn.expand("%:t")
    vim.cmd("helpclose")
  end
  H.result.broken = {}
  for _, line in ipairs(vim.fn.readfile(rtp .. "/doc/lsp-agent.txt")) do
    for link in line:gmatch("|([^|%s]+)|") do
      if not pcall(vim.cmd, "help " .. link) then
        table.insert(H.result.broken, link)
      end
      pcall(vim.cmd, "helpclose")
    end
  end
end)
