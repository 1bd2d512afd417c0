--[[
wake.lua: a waiting class is due now, and its blocked flows with it,
whatever its last step found (a window reset by hand may have made room).

KEYS, ARGV[1..6]  the lines' (lines_head.lua)
ARGV[7]  class

Reply: {0, 0, -1, 0}.
]]
-- #include lines_head.lua
-- #include lines_base.lua

wakeClass(ARGV[7])
return {0, 0, -1, 0}
