--[[
waits.lua: whether a class (a task type) waits in the fair lines, for a
producer deciding to park a task at enqueue (docs/FAIRNESS.md, "Parked at
enqueue").

A waiting class is in the lines' wake set, scored by the next time a grant
could be given. A dispatch loop looks at a due class at least every second
and moves that time on, so a time older than `stale` says no loop serves
the lines (workers stopped, or serving first come, first served): the
task is better off on the pending list.

KEYS[1]  the wake set: <prefix>{<group>}qw
ARGV[1]  class (key-encoded)
ARGV[2]  stale, us

Reply: 1 the class waits and a loop serves it; 0 otherwise.
]]

local w = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not w then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if tonumber(w) < now - tonumber(ARGV[2]) then
  return 0
end
return 1
