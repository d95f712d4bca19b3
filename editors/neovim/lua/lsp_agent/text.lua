--- Pure text helpers: LSP positions in any encoding, and text edits shown as diff hunks.
---
--- Nothing here touches the editor, so the review can be computed (and tested) from plain
--- lists of lines. Lines are Lua strings without their newline; the text they make up is
--- taken to end with a newline, as Neovim writes files by default.
local M = {}

--- Length in bytes of the UTF-8 character whose first byte is `byte`.
local function char_length(byte)
  if byte >= 0xF0 then
    return 4
  elseif byte >= 0xE0 then
    return 3
  elseif byte >= 0xC0 then
    return 2
  end
  return 1
end

--- Code units of one character of `length` UTF-8 bytes in `encoding`.
local function units_of(length, encoding)
  if encoding == "utf-8" then
    return length
  elseif encoding == "utf-32" then
    return 1
  end
  return length == 4 and 2 or 1
end

--- The byte index (0-based) in `line` of an LSP column counted in `encoding` code units.
--- Columns past the end of the line give the line's length.
--- @param line string
--- @param column integer
--- @param encoding string "utf-8", "utf-16" or "utf-32"
--- @return integer
function M.byte_of(line, column, encoding)
  if encoding == "utf-8" then
    return math.min(column, #line)
  end
  local byte, units = 0, 0
  while byte < #line and units < column do
    local length = char_length(line:byte(byte + 1))
    units = units + units_of(length, encoding)
    byte = byte + length
  end
  return math.min(byte, #line)
end

--- The LSP column in `encoding` code units of the byte index (0-based) `byte` in `line`.
--- @param line string
--- @param byte integer
--- @param encoding string
--- @return integer
function M.column_of(line, byte, encoding)
  byte = math.min(byte, #line)
  if encoding == "utf-8" then
    return byte
  end
  local at, units = 0, 0
  while at < byte do
    local length = char_length(line:byte(at + 1))
    units = units + units_of(length, encoding)
    at = at + length
  end
  return units
end

--- The byte length of the character that starts at byte index (0-based) `byte` of `line`.
function M.char_length_at(line, byte)
  if byte >= #line then
    return 0
  end
  return char_length(line:byte(byte + 1))
end

--- Split `text` on newlines (a final newline does not start another line).
--- @param text string
--- @return string[]
function M.split_lines(text)
  if text == "" then
    return {}
  end
  local lines = vim.split(text, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  return lines
end

--- The lines of a file as a list: an empty buffer ({""}) is an empty file.
local function normalized(lines)
  if #lines == 1 and lines[1] == "" then
    return {}
  end
  return lines
end

--- Byte offset (0-based) in the joined text of an LSP position.
local function offset(lines, starts, position, encoding)
  local line = position.line
  if line >= #lines then
    return starts[#lines + 1]
  end
  return starts[line + 1] + M.byte_of(lines[line + 1], position.character, encoding)
end

local function count_newlines(text)
  local _, count = text:gsub("\n", "")
  return count
end

--- Text edits sorted by start, each with `index`, its place in the list the server sent.
local function sorted(edits)
  local list = {}
  for index, edit in ipairs(edits) do
    list[#list + 1] = { edit = edit, index = index }
  end
  table.sort(list, function(a, b)
    local x, y = a.edit.range.start, b.edit.range.start
    if x.line ~= y.line then
      return x.line < y.line
    end
    if x.character ~= y.character then
      return x.character < y.character
    end
    return a.index < b.index
  end)
  return list
end

--- The text after applying `edits` (LSP `TextEdit`s in `encoding`) to `lines`.
--- @param lines string[]
--- @param edits table[]
--- @param encoding string
--- @return string
function M.apply_text(lines, edits, encoding)
  lines = normalized(lines)
  local text = #lines > 0 and (table.concat(lines, "\n") .. "\n") or ""
  local starts = { 0 }
  for i, line in ipairs(lines) do
    starts[i + 1] = starts[i] + #line + 1
  end
  local list = sorted(edits)
  for k = #list, 1, -1 do
    local edit = list[k].edit
    local first = offset(lines, starts, edit.range.start, encoding)
    local last = offset(lines, starts, edit.range["end"], encoding)
    local new_text = (edit.newText or ""):gsub("\r\n?", "\n")
    text = text:sub(1, first) .. new_text .. text:sub(last + 1)
  end
  return text
end

--- The lines after applying `edits` to `lines`.
--- @param lines string[]
--- @param edits table[]
--- @param encoding string
--- @return string[]
function M.apply(lines, edits, encoding)
  return M.split_lines(M.apply_text(lines, edits, encoding))
end

--- @class lsp_agent.Hunk
--- @field edit integer index of the text edit (in the list the server sent) the hunk shows
--- @field old_start integer 1-based first line of the hunk in the old text (context included)
--- @field old_count integer
--- @field new_start integer
--- @field new_count integer
--- @field lines string[] the hunk body: " context", "-removed", "+added"

--- One diff hunk per text edit, with up to `context` lines around each.
---
--- An edit is the unit the user accepts or rejects, so it is also the unit shown: the lines it
--- touches, removed then added, between unchanged context.
--- @param lines string[] the text the edits apply to
--- @param edits table[] LSP `TextEdit`s
--- @param encoding string
--- @param context integer|nil
--- @return lsp_agent.Hunk[], string[] the hunks, and the lines after every edit
function M.hunks(lines, edits, encoding, context)
  context = context or 3
  lines = normalized(lines)
  local after = M.apply(lines, edits, encoding)
  local hunks = {}
  local shift = 0 -- lines added minus lines removed by the edits before this one
  for _, item in ipairs(sorted(edits)) do
    local edit = item.edit
    local first, last = edit.range.start, edit.range["end"]
    local new_text = (edit.newText or ""):gsub("\r\n?", "\n")
    local start_byte = first.line < #lines
        and M.byte_of(lines[first.line + 1], first.character, encoding)
      or 0
    local end_byte = last.line < #lines
        and M.byte_of(lines[last.line + 1], last.character, encoding)
      or 0
    -- Old lines [a, b) are touched. Whole lines replaced by whole lines leave line `last` alone;
    -- otherwise the line the edit ends in is rewritten too (joined with what precedes it).
    local a = math.min(first.line, #lines)
    local whole_lines = start_byte == 0
      and end_byte == 0
      and (new_text == "" or new_text:sub(-1) == "\n")
    local b = whole_lines and last.line or last.line + 1
    b = math.min(math.max(b, a), #lines)
    local removed_newlines = math.min(last.line, #lines) - math.min(first.line, #lines)
    local delta = count_newlines(new_text) - removed_newlines
    local new_a, new_b = a + shift, b + shift + delta
    shift = shift + delta

    local before = math.min(context, a)
    local after_count = math.min(context, #lines - b)
    local body = {}
    for i = a - before + 1, a do
      body[#body + 1] = " " .. lines[i]
    end
    for i = a + 1, b do
      body[#body + 1] = "-" .. lines[i]
    end
    for i = new_a + 1, new_b do
      body[#body + 1] = "+" .. (after[i] or "")
    end
    for i = b + 1, b + after_count do
      body[#body + 1] = " " .. lines[i]
    end
    local old_count = before + (b - a) + after_count
    local new_count = before + (new_b - new_a) + after_count
    hunks[#hunks + 1] = {
      edit = item.index,
      old_start = old_count > 0 and a - before + 1 or a,
      old_count = old_count,
      new_start = new_count > 0 and new_a - before + 1 or new_a,
      new_count = new_count,
      lines = body,
    }
  end
  return hunks, after
end

--- The `@@ -a,b +c,d @@` header of a hunk.
--- @param hunk lsp_agent.Hunk
function M.hunk_header(hunk)
  return ("@@ -%d,%d +%d,%d @@"):format(
    hunk.old_start,
    hunk.old_count,
    hunk.new_start,
    hunk.new_count
  )
end

return M
