-- A clean Neovim for the plugin's tests: only this plugin on the runtimepath, no swap or shada
-- files. Used as `nvim --headless --clean -u editors/neovim/tests/minimal_init.lua`.
local here = debug.getinfo(1, "S").source:sub(2)
local tests = vim.fn.fnamemodify(here, ":p:h")
local plugin = vim.fn.fnamemodify(tests, ":h")

vim.opt.runtimepath:prepend(plugin)
vim.opt.swapfile = false
vim.opt.shadafile = "NONE"
vim.opt.more = false
vim.opt.hidden = true
package.path = tests .. "/?.lua;" .. package.path
