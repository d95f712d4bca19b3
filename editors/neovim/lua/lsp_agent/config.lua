--- The plugin's options: defaults, and `setup()` merging the user's over them.
local M = {}

--- @class lsp_agent.Keys
--- @field accept string apply the ticked hunks
--- @field reject string reject the edit (asks for an optional reason)
--- @field toggle string tick or untick the hunk under the cursor
--- @field next_hunk string
--- @field prev_hunk string
--- @field quit string reject without a reason
--- @field help string

M.defaults = {
  --- The server command; `lsp-agent` must be on PATH, or give the full path.
  cmd = { "lsp-agent", "serve" },
  --- The `lspAgent` settings section sent to the server (`baseUrl`, `model`, `mode`, ...).
  --- Keep `apiKey` out of your config: set `LSP_AGENT_API_KEY` in the environment instead.
  settings = {},
  --- Files or folders that mark the workspace root, searched upwards from the current file.
  root_markers = { ".git" },
  --- A fixed root folder, or a function(bufnr) returning one; overrides `root_markers`.
  root_dir = nil,
  answer = {
    --- "right" (vertical split), "bottom" (horizontal split) or "float".
    position = "right",
    --- Width (right), height (bottom) in cells; nil picks a size from the editor's.
    size = nil,
    --- Move the cursor into the answer window when a question is asked.
    focus = false,
  },
  review = {
    --- Lines of context shown around each hunk.
    context = 3,
    --- Where the review opens: "bottom", "right" or "tab".
    position = "bottom",
    --- @type lsp_agent.Keys
    keys = {
      accept = "a",
      reject = "r",
      toggle = "t",
      next_hunk = "]c",
      prev_hunk = "[c",
      quit = "q",
      help = "?",
    },
  },
  --- Global keymaps: false (none), true (the defaults below), or a table of lhs by action.
  keymaps = false,
}

--- The keymaps `keymaps = true` installs.
M.default_keymaps = {
  ask = "<leader>aa",
  cancel = "<leader>ac",
  new = "<leader>an",
  sessions = "<leader>as",
  status = "<leader>ai",
  answer = "<leader>ao",
}

--- Options in effect (the defaults until `setup()` is called).
M.options = vim.deepcopy(M.defaults)

-- The type of each top-level option (vim.validate's table form is deprecated in 0.11).
local OPTION_TYPES = {
  cmd = { "table" },
  settings = { "table" },
  root_markers = { "table" },
  root_dir = { "string", "function" },
  answer = { "table" },
  review = { "table" },
  keymaps = { "boolean", "table" },
}

--- Merge `opts` over the defaults; returns the options in effect.
--- @param opts table|nil
function M.set(opts)
  opts = opts or {}
  for key, types in pairs(OPTION_TYPES) do
    local value = opts[key]
    if value ~= nil and not vim.tbl_contains(types, type(value)) then
      error(
        ("lsp-agent: setup option %s must be a %s, not a %s"):format(
          key,
          table.concat(types, " or "),
          type(value)
        )
      )
    end
  end
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  -- Lists replace rather than merge: a shorter `cmd` must not keep the default's tail.
  if opts.cmd then
    M.options.cmd = vim.deepcopy(opts.cmd)
  end
  if opts.root_markers then
    M.options.root_markers = vim.deepcopy(opts.root_markers)
  end
  local position = M.options.answer.position
  if position ~= "right" and position ~= "bottom" and position ~= "float" then
    error(("lsp-agent: answer.position must be right, bottom or float, not %q"):format(position))
  end
  return M.options
end

return M
