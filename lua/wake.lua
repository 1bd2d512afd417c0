--[[
wake.lua: a waiting class is due now, and its blocked flows with it,
whatever its last step found (a window reset by hand may have made room).

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4]  the class's blocked flows, <base>qb:<class>
ARGV[7]  class

Reply: {0, 0, -1, 0}.
]]
-- #include lines_head.lua

wakeClass(ARGV[7], KEYS[4])
return {0, 0, -1, 0}
