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
  local config = require("lsp_agent.config")
  agent.setup({})
  same(vim.fn.maparg("<leader>aa", "n"), "", "no keymaps unless asked")
  agent.setup({ keymaps = true, cmd = { "/bin/lsp-agent" } })
  H.expect(vim.fn.maparg("<leader>aa", "n"):match("LspAgent ask"), "ask in normal mode")
  H.expect(vim.fn.maparg("<leader>aa", "x"):match("LspAgent ask"), "ask in visual mode")
  H.expect(vim.fn.maparg("<leader>ar", "n"):match("LspAgent review"), "review in normal mode")
  same(config.options.cmd, { "/bin/lsp-agent" }, "a list option is replaced, not merged")
  same(agent.status(), "", "idle statusline")
end

checks["setup warns and never throws"] = function()
  local agent = require("lsp_agent")
  local config = require("lsp_agent.config")
  local said = {}
  local notify = vim.notify
  vim.notify = function(message, level)
    said[#said + 1] = { message = message, level = level }
  end
  local ok, err = pcall(agent.setup, {
    answer = { position = "left", size = 30, focsu = true },
    keymaps = "yes",
    reveiw = {},
    review = { context = -1, keys = { accept = "A", reject = "" } },
    cmd = { "/bin/lsp-agent", "serve" },
  })
  local again = pcall(agent.setup, {
    answer = { position = "left", size = 30, focsu = true },
    keymaps = "yes",
    reveiw = {},
    review = { context = -1, keys = { accept = "A", reject = "" } },
    cmd = { "/bin/lsp-agent", "serve" },
  })
  local options = config.options
  local bad_types = pcall(agent.setup, "model")
  vim.notify = notify
  H.expect(ok and again and bad_types, "setup() threw: " .. tostring(err))
  same(options.answer.position, "right", "a bad position falls back to the default")
  same(options.answer.size, 30, "the good options next to it are kept")
  same(options.cmd, { "/bin/lsp-agent", "serve" }, "and so are the other top-level ones")
  same(options.keymaps, false, "a bad keymaps value falls back")
  same(options.review.context, 3, "a negative context falls back")
  same(options.review.keys.accept, "A", "a one-letter key is allowed, with a warning")
  same(options.review.keys.reject, "gr", "an empty key falls back")
  H.expect(#said == 2, ("one notification per setup() with news, got %d"):format(#said))
  local first = said[1].message
  same(said[1].level, vim.log.levels.WARN, "a warning")
  for _, expected in ipairs({
    'answer.position must be one of "right", "bottom", "float", not "left": using the default',
    "unknown option answer.focsu: did you mean answer.focus?",
    "unknown option reveiw: did you mean review?",
    'keymaps must be a boolean or table, not "yes"',
    "review.context must be a whole number, 0 or more, not -1",
    'review.keys.accept = "A" is a key typing text produces',
    "review.keys.reject must be a key sequence",
  }) do
    H.expect(first:find(expected, 1, true), ("%q not in:\n%s"):format(expected, first))
  end
  H.expect(
    said[2].message:find("setup() takes a table of options", 1, true)
      and not said[2].message:find("focsu", 1, true),
    "the same problems are not said twice: " .. said[2].message
  )
  same(config.did_you_mean("modle", { "model", "mode" }), "model", "a transposition")
  same(config.did_you_mean("zzz", { "model", "mode" }), nil, "nothing close")
  agent.setup({})
end

checks["highlight groups link to defaults a colourscheme can override"] = function()
  local function target(group)
    return vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.hlID(group)), "name")
  end
  require("lsp_agent").setup({})
  same(target("LspAgentReviewAdd"), "DiffAdd", "added lines")
  same(target("LspAgentReviewDelete"), "DiffDelete", "removed lines")
  same(target("LspAgentReviewChange"), "DiffChange", "hunk headers")
  same(target("LspAgentQuestion"), "Question", "questions")
  vim.cmd("highlight LspAgentReviewAdd guifg=#123456 ctermfg=1")
  require("lsp_agent.highlights").define()
  same(target("LspAgentReviewAdd"), "LspAgentReviewAdd", "a colourscheme's own colours stay")
  vim.cmd("highlight clear")
  vim.cmd("doautocmd ColorScheme")
  same(target("LspAgentReviewAdd"), "DiffAdd", "linked again after :colorscheme")
end

checks["a tool of an MCP server reads as server · tool"] = function()
  local render = require("lsp_agent.render")
  same(render.tool_label("mcp__github__get_issue"), "github · get_issue", "an MCP tool")
  same(render.tool_label("mcp__docs__a__b"), "docs · a__b", "the server part ends first")
  same(render.tool_label("read_file"), "read_file", "our own tools as they are")
end

checks["a tool call in one line: a patch by its files, a plan by its items"] = function()
  local render = require("lsp_agent.render")
  same(render.describe_arguments({ path = "a.py", old = "x" }), "a.py", "a path")
  local unified =
    "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x\n+y\n--- /dev/null\n+++ b/new.py\n"
  same(render.describe_arguments({ patch = unified }), "src/a.py, new.py", "a unified diff")
  local envelope = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** Add File: b.py\n+z\n"
    .. "*** Delete File: c.py\n*** End Patch"
  same(render.describe_arguments({ patch = envelope }), "a.py, b.py, c.py", "an envelope")
  same(render.describe_arguments({ patch = "nonsense" }), "(a patch)", "no file named")
  same(render.describe_arguments({ items = { {}, {} } }), "2 items", "a plan")
  same(render.describe_arguments({ flag = true }), '{"flag":true}', "anything else as JSON")
end

checks["when a session started, as a person says it"] = function()
  local when = require("lsp_agent").when
  local now = os.time({ year = 2026, month = 7, day = 15, hour = 12, min = 0, sec = 0 })
  local function iso(t)
    return os.date("!%Y-%m-%dT%H:%M:%S", t) .. ".123+00:00"
  end
  same(when(iso(now - 3600), now), "today " .. os.date("%H:%M", now - 3600), "today")
  same(when(iso(now - 86400), now), "yesterday " .. os.date("%H:%M", now - 86400), "yesterday")
  local earlier = now - 40 * 86400
  same(when(iso(earlier), now), os.date("%a %d %b %H:%M", earlier), "this year")
  local older = now - 400 * 86400
  same(when(iso(older), now), os.date("%Y-%m-%d %H:%M", older), "another year")
  same(when("not a time"), "not a time", "anything else as it came")
end

checks["files named with # in a prompt"] = function()
  local references = require("lsp_agent.references")
  same(references.parse("see #buffer and #file:src/a.py, then #file:b.txt. #nothing"), {
    { kind = "buffer" },
    { kind = "file", path = "src/a.py" },
    { kind = "file", path = "b.txt" },
  }, "parsed")
  local sent = references.with_files("compare #buffer", { "a.py", "b c.py" })
  same(
    sent,
    "compare #buffer\n\nFiles the user added as context (read them): `a.py`, `b c.py`",
    "the line VS Code's chat writes too"
  )
  local typed, files = references.split(sent)
  same({ typed, files }, { "compare #buffer", { "a.py", "b c.py" } }, "split back")
  same({ references.split("plain") }, { "plain", {} }, "a prompt without files")
end

checks["typeahead is flushed"] = function()
  H.feed("iabc")
  require("lsp_agent.compat").flush_typeahead()
  same(vim.fn.getchar(0), 0, "nothing left to read")
  same(vim.api.nvim_get_mode().mode, "n", "the keys did not run")
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
