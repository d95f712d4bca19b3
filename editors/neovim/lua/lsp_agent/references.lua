--- Files named in a prompt: `#buffer` (the file the user was in before the chat) and
--- `#file:path` (a file of the workspace, completed with <C-x><C-o> in the chat's input).
---
--- The prompt goes to the server as typed, followed by one line that lists the files for the
--- agent to read, the line the VS Code extension writes for its `#` files (`model.ts`), so
--- that a conversation reads alike in both; the conversation shows the prompt without it.
local M = {}

--- The line that lists the files (its start).
M.LEAD = "Files the user added as context (read them):"

--- The `#` references of `prompt`, in order: `{ kind = "buffer" }` or
--- `{ kind = "file", path = "src/a.py" }`.
--- @param prompt string
--- @return table[]
function M.parse(prompt)
  local found = {}
  for token in prompt:gmatch("#[%w:_./%-~]+") do
    if token == "#buffer" then
      found[#found + 1] = { kind = "buffer" }
    else
      local path = token:match("^#file:(.+)$")
      if path then
        found[#found + 1] = { kind = "file", path = (path:gsub("[.,;:]+$", "")) }
      end
    end
  end
  return found
end

--- The prompt as sent: as typed, then the line that lists `files` (none: as typed).
--- @param prompt string
--- @param files string[] paths relative to the workspace
--- @return string
function M.with_files(prompt, files)
  if #files == 0 then
    return prompt
  end
  local quoted = vim.tbl_map(function(file)
    return "`" .. file .. "`"
  end, files)
  return ("%s\n\n%s %s"):format(prompt, M.LEAD, table.concat(quoted, ", "))
end

--- The inverse of `with_files`: what the user typed, and the files.
--- @param prompt string
--- @return string text, string[] files
function M.split(prompt)
  local at = prompt:find("\n\n" .. M.LEAD .. " ", 1, true)
  if not at then
    return prompt, {}
  end
  local tail = prompt:sub(at + #M.LEAD + 3)
  local files = {}
  for file in tail:gmatch("`([^`]+)`") do
    files[#files + 1] = file
  end
  if #files == 0 or tail:gsub("`[^`]+`", ""):gsub(", ", "") ~= "" then
    return prompt, {}
  end
  return prompt:sub(1, at - 1), files
end

--- The files of the workspace `root` a `#file:` completion offers: git's list (tracked and
--- untracked, ignored ones left out) in a repository, else the files under `root`.
--- @param root string
--- @return string[]
function M.workspace_files(root)
  if vim.fn.isdirectory(root .. "/.git") == 1 or vim.fn.filereadable(root .. "/.git") == 1 then
    local listed = vim.fn.systemlist({
      "git",
      "-C",
      root,
      "ls-files",
      "--cached",
      "--others",
      "--exclude-standard",
    })
    if vim.v.shell_error == 0 then
      return listed
    end
  end
  local files = {}
  for _, path in ipairs(vim.fn.globpath(root, "**/*", false, true)) do
    if vim.fn.isdirectory(path) == 0 then
      files[#files + 1] = path:sub(#root + 2)
    end
  end
  return files
end

--- The completion items for `base` (what is typed from the `#`): `#buffer`, `#codebase` (the
--- server searches the workspace for the prompt's terms), and `#file:` with each workspace file
--- whose path contains what follows it.
--- @param base string
--- @param root string
--- @param buffer_name string|nil the file `#buffer` stands for now
--- @return table[] complete-items
function M.complete(base, root, buffer_name)
  local items = {}
  if vim.startswith("#buffer", base) then
    items[#items + 1] = {
      word = "#buffer",
      menu = buffer_name and ("the file you were in: " .. buffer_name) or "the file you were in",
    }
  end
  if vim.startswith("#codebase", base) then
    items[#items + 1] = { word = "#codebase", menu = "search the workspace for the prompt's terms" }
  end
  if vim.startswith("#file:", base) or vim.startswith(base, "#file:") then
    local wanted = base:match("^#file:(.*)$") or ""
    for _, file in ipairs(M.workspace_files(root)) do
      if wanted == "" or file:find(wanted, 1, true) then
        items[#items + 1] = { word = "#file:" .. file, menu = "a file of the workspace" }
      end
      if #items >= 200 then
        break
      end
    end
  end
  return items
end

return M
