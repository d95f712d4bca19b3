--- The plugin's options: defaults, and `setup()` checking the user's and merging them over.
---
--- `set()` never throws: an unknown key or a bad value is a warning (with "did you mean" for a
--- near miss) and the default stays, so a typo never aborts the rest of the user's init.lua.
local M = {}

--- @class lsp_agent.Keys
--- @field accept string apply the ticked hunks
--- @field reject string reject the edit (asks for an optional reason)
--- @field toggle string tick or untick the hunk under the cursor
--- @field next_hunk string
--- @field prev_hunk string
--- @field close string close the window; the edit still waits (`:LspAgent review`)
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
  chat = {
    --- "right" (vertical split), "bottom" (horizontal split) or "tab".
    position = "right",
    --- Width (right), height (bottom) in cells; nil picks a size from the editor's.
    size = nil,
    --- Lines of the input window below the conversation.
    input_height = 5,
    --- Keys of the chat's buffers. In insert mode only `send_insert` is mapped: typing a
    --- prompt is only text.
    keys = {
      send = "<CR>", -- normal mode, in the input
      send_insert = "<C-s>", -- insert mode, in the input
      cancel = "<C-c>", -- normal mode: cancel the running turn
      review = "gR", -- normal mode: go to the edit or question that waits
      input = "i", -- in the conversation: go to the input
      close = "q", -- in the conversation: close the chat
    },
  },
  review = {
    --- Lines of context shown around each hunk.
    context = 3,
    --- "diff": each edit in a diff window of its own; "inline": in the real buffer, the
    --- removed lines marked and the added ones shown below them (files the edit creates are
    --- still reviewed as a diff).
    style = "diff",
    --- Where the diff review opens: "bottom", "right" or "tab".
    position = "bottom",
    --- Decisions take two keys, which typing text never produces by accident.
    --- @type lsp_agent.Keys
    keys = {
      accept = "ga",
      reject = "gr",
      toggle = "t",
      next_hunk = "]c",
      prev_hunk = "[c",
      close = "q",
      help = "?",
    },
  },
  --- Global keymaps: false (none), true (the defaults below), or a table of lhs by action.
  keymaps = false,
}

--- The keymaps `keymaps = true` installs.
M.default_keymaps = {
  ask = "<leader>aa",
  chat = "<leader>ak",
  undo = "<leader>au",
  cancel = "<leader>ac",
  new = "<leader>an",
  sessions = "<leader>as",
  status = "<leader>ai",
  model = "<leader>am",
  answer = "<leader>ao",
  review = "<leader>ar",
}

--- Options in effect (the defaults until `setup()` is called).
M.options = vim.deepcopy(M.defaults)

--- Checks of one value: each returns nil when the value is fine, else what it must be.
local function one_of(...)
  local choices = { ... }
  return function(value)
    if vim.tbl_contains(choices, value) then
      return nil
    end
    return "one of "
      .. table.concat(
        vim.tbl_map(function(choice)
          return ("%q"):format(choice)
        end, choices),
        ", "
      )
  end
end

local function strings(allow_empty)
  return function(value)
    local ok = type(value) == "table" and (allow_empty or #value > 0)
    for key, item in pairs(type(value) == "table" and value or {}) do
      ok = ok and type(key) == "number" and type(item) == "string" and item ~= ""
    end
    return not ok and ("a list of strings" .. (allow_empty and "" or ", not empty")) or nil
  end
end

local function whole(minimum, or_nil)
  return function(value)
    if
      (value == nil and or_nil) or (type(value) == "number" and value >= minimum and value % 1 == 0)
    then
      return nil
    end
    return ("a whole number, %d or more"):format(minimum) .. (or_nil and ", or nil" or "")
  end
end

local function kind(...)
  local types = { ... }
  return function(value)
    if vim.tbl_contains(types, type(value)) then
      return nil
    end
    return "a " .. table.concat(types, " or ")
  end
end

local function key_sequence(value)
  return (type(value) ~= "string" or value == "") and 'a key sequence such as "ga"' or nil
end

local function keymaps(value)
  return kind("boolean", "table")(value)
end

--- The shape of the options: a check for each leaf, a table for each nested group.
local SCHEMA = {
  cmd = strings(false),
  settings = kind("table"),
  root_markers = strings(false),
  root_dir = kind("string", "function"),
  answer = {
    position = one_of("right", "bottom", "float"),
    size = whole(1, true),
    focus = kind("boolean"),
  },
  chat = {
    position = one_of("right", "bottom", "tab"),
    size = whole(1, true),
    input_height = whole(1),
    keys = {
      send = key_sequence,
      send_insert = key_sequence,
      cancel = key_sequence,
      review = key_sequence,
      input = key_sequence,
      close = key_sequence,
    },
  },
  review = {
    context = whole(0),
    style = one_of("diff", "inline"),
    position = one_of("bottom", "right", "tab"),
    keys = {
      accept = key_sequence,
      reject = key_sequence,
      toggle = key_sequence,
      next_hunk = key_sequence,
      prev_hunk = key_sequence,
      close = key_sequence,
      help = key_sequence,
    },
  },
  keymaps = keymaps,
}

--- Edit distance between two short strings, a swap of two neighbours counting as one edit
--- (optimal string alignment: "focsu" is one edit from "focus").
local function distance(a, b)
  local d = {}
  for i = 0, #a do
    d[i] = { [0] = i }
  end
  for j = 0, #b do
    d[0][j] = j
  end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if
        i > 1
        and j > 1
        and a:sub(i, i) == b:sub(j - 1, j - 1)
        and a:sub(i - 1, i - 1) == b:sub(j, j)
      then
        d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
      end
    end
  end
  return d[#a][#b]
end

--- The known key closest to `key`, when it is close enough to be a typo.
--- @param key string
--- @param known string[]
--- @return string|nil
function M.did_you_mean(key, known)
  local best, best_distance
  local lowered = tostring(key):lower()
  for _, candidate in ipairs(known) do
    local d = distance(lowered, candidate:lower())
    if not best_distance or d < best_distance then
      best, best_distance = candidate, d
    end
  end
  if best and best_distance <= math.max(1, math.floor(#best / 3)) then
    return best
  end
  return nil
end

local function describe(value)
  if type(value) == "string" then
    return ("%q"):format(value)
  end
  return type(value) == "table" and "a table" or tostring(value)
end

local function sorted_keys(tbl)
  local keys = vim.tbl_keys(tbl)
  table.sort(keys)
  return keys
end

--- A deep copy of a value of the user's: tables are copied, anything else (`vim.NIL`, which
--- `vim.deepcopy` of 0.7 refuses, a function) is kept as it is.
local function copy(value)
  if type(value) ~= "table" then
    return value
  end
  local copied = {}
  for key, item in pairs(value) do
    copied[key] = copy(item)
  end
  return setmetatable(copied, getmetatable(value))
end

--- Check `given` against `schema`, writing the good values over `into`; warnings go to `problems`.
local function merge(given, schema, defaults, into, path, problems)
  for _, key in ipairs(sorted_keys(given)) do
    local value = given[key]
    local name = path .. tostring(key)
    local check = type(key) == "string" and schema[key] or nil
    if check == nil then
      local hint = M.did_you_mean(key, sorted_keys(schema))
      problems[#problems + 1] = ("unknown option %s%s"):format(
        name,
        hint and (": did you mean " .. path .. hint .. "?") or ""
      )
    elseif type(check) == "table" then
      if type(value) == "table" then
        into[key] = into[key] or {}
        merge(value, check, defaults[key] or {}, into[key], name .. ".", problems)
      else
        problems[#problems + 1] = ("%s must be a table, not %s: using the default"):format(
          name,
          describe(value)
        )
      end
    else
      local wrong = check(value)
      if wrong then
        problems[#problems + 1] = ("%s must be %s, not %s: using the default%s"):format(
          name,
          wrong,
          describe(value),
          defaults[key] ~= nil and (" " .. vim.inspect(defaults[key])) or ""
        )
      else
        -- Lists and functions replace the default whole: a shorter `cmd` keeps no default tail.
        into[key] = copy(value)
      end
    end
  end
end

--- Actions a `keymaps` table may name.
local function keymap_problems(maps, problems)
  if type(maps) ~= "table" then
    return
  end
  local actions = sorted_keys(M.default_keymaps)
  for _, action in ipairs(sorted_keys(maps)) do
    local lhs = maps[action]
    if not M.default_keymaps[action] then
      local hint = M.did_you_mean(action, actions)
      problems[#problems + 1] = ("unknown keymap action %s%s"):format(
        tostring(action),
        hint and (": did you mean keymaps." .. hint .. "?") or ""
      )
      maps[action] = nil
    elseif lhs ~= false and key_sequence(lhs) then
      problems[#problems + 1] = ("keymaps.%s must be a key sequence or false, not %s"):format(
        action,
        describe(lhs)
      )
      maps[action] = nil
    end
  end
end

--- Decision keys that typing text produces (one printable character) can decide by accident.
local function risky_keys(keys, problems)
  for _, action in ipairs({ "accept", "reject" }) do
    local lhs = keys[action]
    if type(lhs) == "string" and #lhs == 1 and lhs:match("%g") then
      problems[#problems + 1] = ("review.keys.%s = %q is a key typing text produces; "):format(
        action,
        lhs
      ) .. 'two keys such as "ga" are safer'
    end
  end
end

--- Settings that decide where the code and the API key go and what the agent may do unasked:
--- taken only from setup() in the user's own configuration, never from a project's files (a
--- cloned repository's `.nvim.lua` could send both elsewhere, or allow every command).
M.USER_LEVEL = {
  "baseUrl",
  "apiKey",
  "provider",
  "permissions",
  "mode",
  "mcpServers",
  "commandMemoryMB",
  "commandFileMB",
  "commandDiskMB",
}

--- Project-local configuration files: what 'exrc' sources (`.nvim.lua`, `.nvimrc`, `.exrc`),
--- and lazy.nvim's per-project spec (`.lazy.lua`).
M.PROJECT_FILES =
  { [".nvim.lua"] = true, [".nvimrc"] = true, [".exrc"] = true, [".lazy.lua"] = true }

local function project_file(path)
  return type(path) == "string" and M.PROJECT_FILES[vim.fn.fnamemodify(path, ":t")] and path or nil
end

--- The project-local file the running code was called from, or nil: a Lua file on the call
--- stack, or the Vim script being sourced (a `.nvimrc` that runs `:lua`).
--- @return string|nil
function M.project_caller()
  for level = 2, 60 do
    local info = debug.getinfo(level, "S")
    if not info then
      break
    end
    local source = info.source or ""
    local found = source:sub(1, 1) == "@" and project_file(source:sub(2))
    if found then
      return found
    end
  end
  local ok, sourced = pcall(vim.fn.expand, "<sfile>")
  if ok and project_file(sourced) then
    return sourced
  end
  local stacked, stack = pcall(vim.fn.expand, "<stack>")
  for _, part in ipairs(stacked and vim.split(stack or "", "..", { plain = true }) or {}) do
    local found = project_file((part:gsub("%[%d+%]$", "")))
    if found then
      return found
    end
  end
  return nil
end

--- Check `opts` and merge them over the defaults. Never throws. When `project` names the
--- project-local file that called setup(), they are merged over the options in effect instead,
--- and the `USER_LEVEL` settings keep their values.
--- @param opts table|nil
--- @param project string|nil
--- @return table options, string[] problems (one sentence each)
function M.set(opts, project)
  local problems = {}
  local options = copy(project and M.options or M.defaults)
  if opts ~= nil and type(opts) ~= "table" then
    problems[#problems + 1] = ("setup() takes a table of options, not %s"):format(describe(opts))
    opts = {}
  end
  merge(opts or {}, SCHEMA, M.defaults, options, "", problems)
  keymap_problems(options.keymaps, problems)
  risky_keys(options.review.keys, problems)
  if project then
    local kept = M.options.settings or {}
    local refused = {}
    for _, key in ipairs(M.USER_LEVEL) do
      if options.settings[key] ~= nil and not vim.deep_equal(options.settings[key], kept[key]) then
        refused[#refused + 1] = key
      end
      options.settings[key] = copy(kept[key])
    end
    if #refused > 0 then
      problems[#problems + 1] = (
        "settings %s from %s ignored: these are taken only from setup() in your own "
        .. "configuration, never from a project's files"
      ):format(table.concat(refused, ", "), project)
    end
  end
  M.options = options
  return options, problems
end

return M
