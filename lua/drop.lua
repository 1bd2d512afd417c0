--[[
drop.lua: a task that no longer exists (deleted from its queue) leaves its
line; an unclaimed grant's places go with it, and its class is due.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
ARGV[7]  task id

Reply: {0, 0, -1, 0}, then a pair ('', what Redis refused) per refusal.
]]
-- #include lines_head.lua
-- #include lines_base.lua
-- #include counters.lua
-- #include lines_logs.lua
-- #include lines_flows.lua

local id = ARGV[7]
reap()
local raw = redis.call('HGET', ktasks, id)
if raw then
  local task = cjson.decode(raw)
  if task.s == 'G' then
    unplace(flowOf(task.c, task.l, task.t).rules, id)
    redis.call('ZREM', kgrants, id)
    redis.call('ZADD', kwake, 'XX', now, task.c) -- its slot is free again
  else
    redis.call('LREM', kline(task.c, task.l, task.t), 1, entry(task.q, id))
  end
  redis.call('HDEL', ktasks, id)
end
return reply(0, 0)
