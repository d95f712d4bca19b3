-- The answer window follows the stream while it is at the end, also once the text is taller
-- than the window and from the second question on; a window the user scrolled up stays where
-- they put it; a reopened window shows the end.
local H = require("harness")

--- The answer window: its first and last visible lines and the buffer's last line, as drawn.
local function view()
  vim.cmd("redraw")
  local bufnr = vim.fn.bufnr("lsp-agent://answer")
  local win = vim.fn.bufwinid(bufnr)
  H.expect(win ~= -1, "the answer window is open")
  local info = vim.fn.getwininfo(win)[1]
  return { top = info.topline, bottom = info.botline, last = vim.api.nvim_buf_line_count(bufnr) }
end

--- While the turn streams, look at every poll whether the window shows the end; returns how
--- many looks there were while the text was taller than the window.
local function follow_while_streaming(turn, label)
  local samples, misses = 0, {}
  H.wait_for(label .. " to end", function()
    local seen = view()
    if seen.last > seen.bottom - seen.top + 1 then -- taller than the window
      samples = samples + 1
      if seen.bottom ~= seen.last then
        misses[#misses + 1] = ("lines %d-%d of %d"):format(seen.top, seen.bottom, seen.last)
      end
    end
    return H.turns_ended("completed") >= turn and require("lsp_agent").status() == ""
  end)
  H.expect(#misses == 0, label .. ": the window showed " .. table.concat(misses, ", "))
  local seen = view()
  H.expect(seen.bottom == seen.last, label .. ": the end is shown after the turn")
  return samples
end

H.run(function()
  H.setup(nil, { answer = { position = "bottom", size = 6 } })
  vim.cmd("edit hello.py")
  H.result.samples = {}

  vim.cmd("LspAgent ask first")
  H.result.samples[1] = follow_while_streaming(1, "the first answer")
  vim.cmd("LspAgent ask second")
  H.result.samples[2] = follow_while_streaming(2, "the second answer")

  -- Third question: once its answer starts, the user scrolls the window up to read.
  vim.cmd("LspAgent ask third")
  H.wait_for("the third answer to start", function()
    return H.answer_has("third row 3")
  end)
  vim.cmd("LspAgent answer") -- moves to the answer window
  H.feed("gg<C-w>p")
  H.wait_for("the user back in hello.py, the answer scrolled to its top", function()
    return vim.fn.expand("%:t") == "hello.py" and view().top == 1
  end)
  H.wait_turn("completed", 3)
  H.result.scrolled_up = view()

  -- Closed and reopened, the window shows the end.
  vim.cmd("LspAgent answer")
  vim.cmd("close")
  H.expect(vim.fn.bufwinid(vim.fn.bufnr("lsp-agent://answer")) == -1, "the window is closed")
  vim.cmd("LspAgent answer")
  H.result.reopened = view()
  H.result.answer = H.answer_lines()
end)
