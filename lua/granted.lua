--[[
granted.lua: whether a task holds a grant not yet claimed and not lapsed
(its place at most `late` ago). Read only.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
ARGV[7]  task id

Reply: {1, 0, -1, 0} when it does, else {0, 0, -1, 0}.
]]
-- #include lines_head.lua

local raw = redis.call('HGET', ktasks, ARGV[7])
local task = raw and cjson.decode(raw)
if task and task.s == 'G' and tonumber(task.p) >= now - late then
  return {1, 0, -1, 0}
end
return {0, 0, -1, 0}
