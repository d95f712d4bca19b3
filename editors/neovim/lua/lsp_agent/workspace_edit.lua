--- A `WorkspaceEdit` as the review sees it: which files change how, whether it is still current,
--- and applying the hunks the user kept.
---
--- Neovim's own handler answers `applied = true` even when it skipped an edit made for an older
--- buffer version; everything here answers what really happened.
local compat = require("lsp_agent.compat")
local text = require("lsp_agent.text")

local M = {}

--- @class lsp_agent.FileChange
--- @field uri string
--- @field path string
--- @field create boolean a `CreateFile` for this file comes first
--- @field create_options table|nil
--- @field version integer|nil the buffer version the edits were made for (nil: not pinned)
--- @field edits table[] the `TextEdit`s, as sent
--- @field snapshot table what the file looked like when the edit arrived
--- @field hunks lsp_agent.Hunk[]

local function is_null(value)
  return value == nil or value == vim.NIL
end

--- The loaded buffer for `path`, or nil.
local function loaded_buffer(path)
  local bufnr = vim.fn.bufnr(path)
  if bufnr ~= -1 and vim.api.nvim_buf_is_loaded(bufnr) then
    return bufnr
  end
  return nil
end

--- Split a `WorkspaceEdit` into one change per file, in order. Returns nil and a reason for the
--- server when the edit holds something this plugin does not apply (rename, delete).
--- @param edit table
--- @return lsp_agent.FileChange[]|nil, string|nil
function M.parse(edit)
  local changes, by_uri = {}, {}
  local function entry(uri)
    if not by_uri[uri] then
      by_uri[uri] = { uri = uri, path = vim.uri_to_fname(uri), create = false, edits = {} }
      changes[#changes + 1] = by_uri[uri]
    end
    return by_uri[uri]
  end
  if not is_null(edit.documentChanges) then
    for _, change in ipairs(edit.documentChanges) do
      if change.kind == "create" then
        local file = entry(change.uri)
        file.create = true
        file.create_options = not is_null(change.options) and change.options or {}
      elseif change.kind == "rename" or change.kind == "delete" then
        return nil, ("lsp-agent.nvim does not apply %s operations"):format(change.kind)
      else
        local file = entry(change.textDocument.uri)
        local version = change.textDocument.version
        if not is_null(version) then
          file.version = version
        end
        vim.list_extend(file.edits, change.edits or {})
      end
    end
  elseif not is_null(edit.changes) then
    local uris = vim.tbl_keys(edit.changes)
    table.sort(uris)
    for _, uri in ipairs(uris) do
      vim.list_extend(entry(uri).edits, edit.changes[uri])
    end
  end
  return changes, nil
end

--- True unless every change annotation the edit uses says `needsConfirmation = false`
--- (the server's `auto` mode); edits without annotations are always reviewed.
--- @param edit table
function M.needs_confirmation(edit)
  local annotations = edit.changeAnnotations
  if is_null(annotations) or vim.tbl_isempty(annotations) then
    return true
  end
  for _, annotation in pairs(annotations) do
    if annotation.needsConfirmation ~= false then
      return true
    end
  end
  return false
end

--- What a file is now: its buffer's changedtick, else its size and modification time on disk.
local function snapshot(path)
  local bufnr = loaded_buffer(path)
  if bufnr then
    return { bufnr = bufnr, tick = vim.api.nvim_buf_get_var(bufnr, "changedtick") }
  end
  local stat = compat.uv.fs_stat(path)
  if not stat then
    return { missing = true }
  end
  return { size = stat.size, sec = stat.mtime.sec, nsec = stat.mtime.nsec }
end

--- The file's lines as the editor shows them: the loaded buffer, else the disk.
local function current_lines(path)
  local bufnr = loaded_buffer(path)
  if bufnr then
    return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  end
  if vim.fn.filereadable(path) == 0 then
    return {}
  end
  local lines = vim.fn.readfile(path)
  for i, line in ipairs(lines) do
    lines[i] = line:gsub("\r$", "")
  end
  return lines
end

--- Record each file's state and compute its hunks, once, when the edit arrives.
--- @param changes lsp_agent.FileChange[]
--- @param encoding string the client's position encoding
--- @param context integer lines of context per hunk
function M.prepare(changes, encoding, context)
  for _, change in ipairs(changes) do
    change.snapshot = snapshot(change.path)
    change.hunks = text.hunks(current_lines(change.path), change.edits, encoding, context)
  end
end

local function display(path)
  return vim.fn.fnamemodify(path, ":~:.")
end

--- Why the edit no longer fits the buffer it was made for, or nil when it does.
--- Checked against the version the server pinned and against the state recorded by `prepare`.
--- @param changes lsp_agent.FileChange[]
--- @return string|nil
function M.stale(changes)
  for _, change in ipairs(changes) do
    local name = display(change.path)
    local bufnr = loaded_buffer(change.path)
    if change.version then
      if not bufnr then
        return ("%s was closed in the editor after the edit was made"):format(name)
      end
      local now = compat.buffer_version(bufnr)
      if now ~= change.version then
        local why = "%s changed in the editor (buffer version %d, the edit was made for version %d)"
        return why:format(name, now, change.version)
      end
    end
    local before = change.snapshot
    if before then
      local after = snapshot(change.path)
      local same
      if before.bufnr then
        same = after.bufnr == before.bufnr and after.tick == before.tick
      elseif after.bufnr then
        -- Opened during the review: fine as long as nothing was typed into it yet.
        same = not vim.bo[after.bufnr].modified
      else
        same = before.missing == after.missing
          and before.size == after.size
          and before.sec == after.sec
          and before.nsec == after.nsec
      end
      if not same then
        return ("%s changed while the edit was being reviewed"):format(name)
      end
    end
    if
      change.create
      and not before.missing
      and not change.create_options.overwrite
      and not change.create_options.ignoreIfExists
    then
      return ("%s already exists"):format(name)
    end
  end
  return nil
end

--- Write a buffer as it is, keeping a file without a final newline without one.
local function write(bufnr)
  local fix = vim.bo[bufnr].fixendofline
  vim.bo[bufnr].fixendofline = false
  -- No autocommands: a format-on-save hook would change what the user just reviewed.
  local ok, err = pcall(vim.api.nvim_buf_call, bufnr, function()
    vim.cmd("silent noautocmd keepalt write!")
  end)
  vim.bo[bufnr].fixendofline = fix
  return ok, err
end

local function create_file(path, options)
  local stat = compat.uv.fs_stat(path)
  if stat and not options.overwrite then
    return
  end
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local fd = assert(compat.uv.fs_open(path, "w", 420))
  compat.uv.fs_close(fd)
  local bufnr = loaded_buffer(path)
  if bufnr then
    vim.api.nvim_buf_call(bufnr, function()
      vim.cmd("silent edit!")
    end)
  end
end

--- Apply the kept edits of each change (`keep[i]` lists indices into `changes[i].edits`),
--- then write the buffers that had no unsaved changes before, so that commands the agent runs
--- see the new text. Returns the number of files changed and the write failures.
--- @param changes lsp_agent.FileChange[]
--- @param keep table<integer, integer[]>
--- @param encoding string
--- @return integer, string[]
function M.apply(changes, keep, encoding)
  local changed, failures = 0, {}
  for i, change in ipairs(changes) do
    local kept = {}
    for _, index in ipairs(keep[i] or {}) do
      kept[#kept + 1] = change.edits[index]
    end
    local wanted = #kept > 0 or (change.create and #change.edits == 0)
    if wanted then
      if change.create then
        create_file(change.path, change.create_options)
      end
      local bufnr = vim.fn.bufadd(change.path)
      local was_loaded = vim.api.nvim_buf_is_loaded(bufnr)
      local modified_before = was_loaded and vim.bo[bufnr].modified
      if not was_loaded then
        vim.fn.bufload(bufnr)
      end
      vim.bo[bufnr].buflisted = true
      local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
      if #kept > 0 and #lines == 1 and lines[1] == "" then
        -- An empty buffer (a new file): set its text whole, final newline or not, which
        -- apply_text_edits gets wrong (it leaves an extra empty line).
        local new_text = text.apply_text({}, kept, encoding)
        vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, text.split_lines(new_text))
        vim.bo[bufnr].endofline = new_text == "" or new_text:sub(-1) == "\n"
      elseif #kept > 0 then
        vim.lsp.util.apply_text_edits(kept, bufnr, encoding)
      end
      changed = changed + 1
      if not modified_before and vim.bo[bufnr].modified then
        local ok, err = write(bufnr)
        if not ok then
          failures[#failures + 1] = ("%s: %s"):format(display(change.path), err)
        end
      end
    end
  end
  return changed, failures
end

return M
