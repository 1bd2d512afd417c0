--[[
peek.lua: what decide.lua would decide over the same checks, recording
nothing (Peek), or with the places in line counted (Usage). It writes only
the logs' TTLs, as decide.lua does.

KEYS, ARGV   as decide.lua's, with ARGV[1]
             "0": only look (Peek)
             "3": as "0", and the reply counts the places in line (Usage)
Reply        decide.lua's full reply; with "3", 2n more integers (see
             decide.lua)
]]
-- #include logs_head.lua
-- #include counters.lua
-- #include logs_search.lua

local at, by = fit()
settle()
if at == now then
  return finish(1, 0, 0, 0, 0)
end
local far, wait, farBy = beyondLease(at)
if far then
  return finish(0, wait, farBy, 0, 0)
end
return finish(0, at - now, by, 0, 0)
