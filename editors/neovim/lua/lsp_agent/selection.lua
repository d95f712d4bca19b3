--- What the user points at when they ask: a file of the workspace, and the lines or characters
--- of a range (`:'<,'>LspAgent ask`, `:'<,'>LspAgent chat`).
local compat = require("lsp_agent.compat")
local render = require("lsp_agent.render")
local text = require("lsp_agent.text")

local M = {}

--- @class lsp_agent.Target
--- @field uri string
--- @field name string the path relative to the workspace root
--- @field first integer|nil first line (1-based) of the range
--- @field last integer|nil last line
--- @field chars table|nil byte positions of the range's ends, made LSP positions once the
---   encoding is known

--- The file of `bufnr` (and the lines of `range`) when it is a file under `root`, else nil.
--- Byte positions are taken now; they become LSP positions once the encoding is known.
--- @param bufnr integer
--- @param root string
--- @param range integer[]|nil {line1, line2}
--- @return lsp_agent.Target|nil
function M.of(bufnr, root, range)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.bo[bufnr].buftype ~= "" or name == "" then
    return nil
  end
  local path = vim.fn.fnamemodify(name, ":p")
  local real = compat.uv.fs_realpath(path) or path
  if not vim.startswith(real, root .. "/") then
    return nil
  end
  local target = { uri = vim.uri_from_fname(path), name = real:sub(#root + 2) }
  if not range then
    return target
  end
  local line1, line2 = range[1], range[2]
  local lines = vim.api.nvim_buf_get_lines(bufnr, line1 - 1, line2, false)
  if #lines == 0 then
    return target
  end
  target.first, target.last = line1, line2
  -- Linewise: from the start of the first line to the end of the last one.
  target.chars =
    { first_line = lines[1], start_byte = 0, last_line = lines[#lines], end_byte = #lines[#lines] }
  local from, to = vim.api.nvim_buf_get_mark(bufnr, "<"), vim.api.nvim_buf_get_mark(bufnr, ">")
  if vim.fn.visualmode() == "v" and from[1] == line1 and to[1] == line2 then
    -- The characterwise selection the range came from: its first to its last character.
    local end_byte = math.min(to[2], #lines[#lines])
    target.chars.start_byte = math.min(from[2], #lines[1])
    target.chars.end_byte = end_byte + text.char_length_at(lines[#lines], end_byte)
  end
  return target
end

--- The target's range in LSP positions of `encoding`, or nil for a whole file.
--- @param target lsp_agent.Target
--- @param encoding string
function M.lsp_range(target, encoding)
  if not target.first then
    return nil
  end
  local c = target.chars
  return {
    start = {
      line = target.first - 1,
      character = text.column_of(c.first_line, c.start_byte, encoding),
    },
    ["end"] = {
      line = target.last - 1,
      character = text.column_of(c.last_line, c.end_byte, encoding),
    },
  }
end

--- The target in a few words, as the conversation shows it ("hello.py, lines 2-4").
--- @param target lsp_agent.Target|nil
--- @return string|nil
function M.describe(target)
  return target and render.where(target.name, target.first, target.last) or nil
end

--- The `uri` and `range` fields of an `ask`/`start` argument for the target.
--- @param argument table
--- @param target lsp_agent.Target|nil
--- @param encoding string
function M.add_to(argument, target, encoding)
  if target then
    argument.uri = target.uri
    argument.range = M.lsp_range(target, encoding)
  end
  return argument
end

return M
