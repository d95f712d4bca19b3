--- The plugin's highlight groups, each linked to a standard group with `default`, so that a
--- colourscheme (or the user) can define them and keep its own colours.
local M = {}

--- Group → the standard group it links to unless defined otherwise.
M.LINKS = {
  LspAgentReviewAdd = "DiffAdd", -- added lines of a ticked hunk
  LspAgentReviewDelete = "DiffDelete", -- removed lines of a ticked hunk
  LspAgentReviewChange = "DiffChange", -- a hunk's `@@` line
  LspAgentReviewSkipped = "Comment", -- the lines of an unticked hunk
  LspAgentReviewFile = "Title", -- the file lines (`diff`, `---`, `+++`)
  LspAgentInlineAdd = "DiffAdd", -- the inline review: lines a hunk adds (shown below)
  LspAgentInlineDelete = "DiffDelete", -- the inline review: lines a hunk removes
  LspAgentHint = "Comment", -- key hints, and notes in the answer buffer
  LspAgentQuestion = "Question", -- the agent's question
  LspAgentChoice = "Identifier", -- the answers to choose from
  LspAgentChoiceSelected = "PmenuSel", -- the answer under the cursor, which <CR> gives
}

--- Define the links (again after `:colorscheme`, which clears every group first).
function M.define()
  for group, link in pairs(M.LINKS) do
    vim.cmd(("highlight default link %s %s"):format(group, link))
  end
end

--- Namespace of the plugin's highlights in its own buffers.
M.namespace = vim.api.nvim_create_namespace("lsp_agent")

--- Highlight whole lines of `bufnr`: `groups[i]` (a group name or nil) for line i (1-based).
--- @param bufnr integer
--- @param groups table<integer, string>
function M.apply(bufnr, groups)
  vim.api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
  for line, group in pairs(groups) do
    vim.api.nvim_buf_add_highlight(bufnr, M.namespace, group, line - 1, 0, -1)
  end
end

return M
