-- luacheck: Neovim's Lua (LuaJIT) with the `vim` global.
std = "luajit"
globals = { "vim" }
max_line_length = 100
