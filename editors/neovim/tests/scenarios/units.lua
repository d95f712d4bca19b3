-- Unit checks of the pure parts (positions, hunks, edit parsing, options), on each Neovim.
-- Each check is recorded by name; a failing one fails the scenario with its message.
local H = require("harness")
local text = require("lsp_agent.text")
local workspace_edit = require("lsp_agent.workspace_edit")

local function edit(l1, c1, l2, c2, new_text)
  return {
    range = { start = { line = l1, character = c1 }, ["end"] = { line = l2, character = c2 } },
    newText = new_text,
  }
end

local function same(actual, expected, what)
  H.expect(
    vim.deep_equal(actual, expected),
    ("%s: expected %s, got %s"):format(what, vim.inspect(expected), vim.inspect(actual))
  )
end

local checks = {}

checks["columns in each encoding"] = function()
  local line = "a🙂é b" -- a (1 byte), 🙂 (4 bytes, 2 UTF-16 units), é (2 bytes), space, b
  same(text.byte_of(line, 3, "utf-16"), 5, "utf-16 column 3 is after the emoji")
  same(text.byte_of(line, 2, "utf-32"), 5, "utf-32 column 2 is after the emoji")
  same(text.byte_of(line, 5, "utf-8"), 5, "utf-8 columns are bytes")
  same(text.byte_of(line, 99, "utf-16"), #line, "past the end clamps")
  same(text.column_of(line, 7, "utf-16"), 4, "byte 7 (after é) is utf-16 column 4")
  same(text.column_of(line, 7, "utf-32"), 3, "byte 7 is utf-32 column 3")
  same(text.char_length_at(line, 1), 4, "the emoji is 4 bytes")
end

checks["applying edits"] = function()
  same(
    text.apply({ "one", "two" }, { edit(1, 0, 1, 3, "2") }, "utf-16"),
    { "one", "2" },
    "replace in a line"
  )
  same(
    text.apply({ "one", "two" }, { edit(2, 0, 2, 0, "three\n") }, "utf-16"),
    { "one", "two", "three" },
    "append"
  )
  same(
    text.apply({ "" }, { edit(0, 0, 0, 0, "new\n") }, "utf-16"),
    { "new" },
    "an empty buffer is an empty file"
  )
  same(
    text.apply_text({}, { edit(0, 0, 0, 0, "no newline") }, "utf-8"),
    "no newline",
    "text without final newline"
  )
  same(
    text.apply({ "a", "b", "c" }, { edit(0, 0, 1, 0, ""), edit(2, 0, 2, 1, "C") }, "utf-16"),
    { "b", "C" },
    "two edits"
  )
end

checks["one hunk per edit, with context"] = function()
  local lines = {}
  for i = 1, 12 do
    lines[i] = "line " .. i
  end
  local hunks, after =
    text.hunks(lines, { edit(9, 5, 9, 7, "ten"), edit(0, 5, 0, 6, "one") }, "utf-16", 2)
  same(#hunks, 2, "two hunks")
  same(hunks[1].edit, 2, "hunks follow the text, and name the edit they show")
  same(hunks[1].lines, { "-line 1", "+line one", " line 2", " line 3" }, "first hunk")
  same(text.hunk_header(hunks[1]), "@@ -1,3 +1,3 @@", "first header")
  same(
    hunks[2].lines,
    { " line 8", " line 9", "-line 10", "+line ten", " line 11", " line 12" },
    "second hunk"
  )
  same(after[10], "line ten", "the new text")
end

checks["whole-line insertions and deletions"] = function()
  local hunks = text.hunks(
    { "a", "b", "c" },
    { edit(1, 0, 2, 0, ""), edit(3, 0, 3, 0, "d\n") },
    "utf-16",
    1
  )
  same(hunks[1].lines, { " a", "-b", " c" }, "a deleted line")
  same(text.hunk_header(hunks[1]), "@@ -1,3 +1,2 @@", "deletion header")
  same(hunks[2].lines, { " c", "+d" }, "an appended line")
  local created = text.hunks({}, { edit(0, 0, 0, 0, "x = 1\ny = 2\n") }, "utf-8", 3)
  same(created[1].lines, { "+x = 1", "+y = 2" }, "a new file")
  same(text.hunk_header(created[1]), "@@ -0,0 +1,2 @@", "new file header")
end

checks["a line split in two"] = function()
  local hunks = text.hunks({ "f(a, b)" }, { edit(0, 4, 0, 5, "\n  ") }, "utf-16", 3)
  same(hunks[1].lines, { "-f(a, b)", "+f(a,", "+  b)" }, "split")
end

checks["parsing a workspace edit"] = function()
  local uri = vim.uri_from_fname("/tmp/lsp-agent-units/x.py")
  local changes = workspace_edit.parse({
    documentChanges = {
      { kind = "create", uri = uri, options = vim.NIL },
      { textDocument = { uri = uri, version = vim.NIL }, edits = { edit(0, 0, 0, 0, "x") } },
    },
  })
  same(#changes, 1, "one file")
  same(changes[1].create, true, "created")
  same(changes[1].version, nil, "null version is no version")
  local refused, why =
    workspace_edit.parse({ documentChanges = { { kind = "delete", uri = uri } } })
  same(refused, nil, "deletes are refused")
  H.expect(why:match("delete"), "the reason names the operation")
  local plain = workspace_edit.parse({ changes = { [uri] = { edit(0, 0, 0, 0, "y") } } })
  same(#plain[1].edits, 1, "the `changes` form")
end

checks["confirmation follows the change annotations"] = function()
  local function annotated(confirm)
    return { changeAnnotations = { a = { needsConfirmation = confirm } } }
  end
  same(workspace_edit.needs_confirmation({ changes = {} }), true, "no annotations: review")
  same(workspace_edit.needs_confirmation(annotated(false)), false, "auto")
  same(workspace_edit.needs_confirmation(annotated(true)), true, "review")
end

checks["options and keymaps"] = function()
  local agent = require("lsp_agent")
  agent.setup({})
  same(vim.fn.maparg("<leader>aa", "n"), "", "no keymaps unless asked")
  agent.setup({ keymaps = true, cmd = { "/bin/lsp-agent" } })
  H.expect(vim.fn.maparg("<leader>aa", "n"):match("LspAgent ask"), "ask in normal mode")
  H.expect(vim.fn.maparg("<leader>aa", "x"):match("LspAgent ask"), "ask in visual mode")
  same(
    require("lsp_agent.config").options.cmd,
    { "/bin/lsp-agent" },
    "a list option is replaced, not merged"
  )
  local ok, err = pcall(agent.setup, { answer = { position = "left" } })
  H.expect(
    not ok and tostring(err):match("answer.position"),
    "a bad position is refused: " .. tostring(err)
  )
  ok, err = pcall(agent.setup, { keymaps = "yes" })
  H.expect(not ok and tostring(err):match("keymaps"), "a bad type is refused: " .. tostring(err))
  same(agent.status(), "", "idle statusline")
end

H.run(function()
  H.result.checks = {}
  local names = vim.tbl_keys(checks)
  table.sort(names)
  for _, name in ipairs(names) do
    checks[name]()
    table.insert(H.result.checks, name)
  end
end)
