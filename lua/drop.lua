--[[
drop.lua: a task that no longer exists (deleted from its queue) leaves its
line; an unclaimed grant's places go with it, and its class is due. Or a
granted task is absent (ARGV[10]): it waits again, at the tail. The
caller looks first (its record, its flow's stored rules) and names the
keys; a record or rules changed since make the script touch nothing.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4]   the lines of its class and level, <base>qL:<class>:<level>
KEYS[5]   its class's flow records, <base>qF:<class>
KEYS[6]   the ready flows of its class and level, <base>qr:<class>:<level>
KEYS[7]   its class's blocked flows, <base>qb:<class>
KEYS[8]   the idle flows of its class and level, <base>qi:<class>:<level>
KEYS[9]   its class's hash, <base>q:<class>
KEYS[10]  the tasks absent lately, <base>qa: a sorted set by the time of
          their first absence
KEYS[11..] a granted task's sliding logs, each followed by its frontier
          note (the log's key with 'p' after the hash tag), and its caps'
          slots
ARGV[7]   task id
ARGV[8]   its record in <base>qt as the caller read it
ARGV[9]   a granted task's flow's stored rules as read (field r), else ''
ARGV[10]  "1": absent: a granted task that runs elsewhere and did not
          claim its grant at once goes to the tail of its flow, its grant
          taken back; absent again a second or more later, it leaves. A
          task not granted stays as it is

Reply: {0, 0, -1, 0}; {1, 0, -1, 0} when the record or the rules changed
since the caller read them: it looks again; {2, 0, -1, 0} when an absent
task left the lines.
]]
-- #include lines_head.lua
-- #include lines_room.lua
-- #include lines_base.lua
-- #include counters.lua
-- #include lines_logs.lua
-- #include lines_flows.lua

local id = ARGV[7]
local absentFor, absentAgain = 60000000, 1000000
local raw = redis.call('HGET', ktasks, id)
if not raw then
  return {0, 0, -1, 0}
elseif raw ~= ARGV[8] then
  return {1, 0, -1, 0}
end
local task = cjson.decode(raw)
local absent = ARGV[10] == '1'
if absent and task.s ~= 'G' then
  return {0, 0, -1, 0}
end
if task.s == 'G' then
  if (redis.call('HGET', KEYS[5], field('r', task.l, task.t)) or '') ~= ARGV[9] then
    return {1, 0, -1, 0}
  end
  if ARGV[9] ~= '' then -- no rules (an expired record): no places to find
    unplace(rulesFrom(cjson.decode(ARGV[9])), id)
  end
  redis.call('ZREM', kgrants, id)
  redis.call('ZADD', kwake, 'XX', now, task.c) -- its slot is free again
  if absent then
    -- The first time, it waits again at the tail: its worker was slow to
    -- hand it back, or died. Absent again a second or more later (KEYS[10]
    -- keeps the first time a minute), it leaves the lines: its worker
    -- died, and the caller brings it back if it stops running.
    redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now - absentFor)
    local first = tonumber(redis.call('ZSCORE', KEYS[10], id) or '')
    if not (first and now - first >= absentAgain) then
      if not first then
        redis.call('ZADD', KEYS[10], now, id)
        redis.call('PEXPIRE', KEYS[10], absentFor / 1000)
      end
      local seq = lineAdd(task.c, task.l, task.t, task.q, id)
      redis.call('HSET', ktasks, id, waitingRecord(task.c, task.l, task.t, task.q, seq))
      waiting(flowOf(task.c, task.l, task.t))
      return {0, 0, -1, 0}
    end
    redis.call('ZREM', KEYS[10], id)
  end
else
  redis.call('ZREM', KEYS[4], member(task.t, tonumber(task.n) or 0, task.q, id))
  if not lineEnd(task.c, task.l, task.t) then
    -- Its flow's line is empty: it leaves the ready and blocked flows, as
    -- at a dispatch that finds it empty, so that the balancer's read of
    -- the demand (demand.lua), which counts them, counts it no more.
    redis.call('ZREM', kready(task.c, task.l), task.t)
    redis.call('ZREM', kblocked(task.c), task.l .. ':' .. task.t)
    idle(task.c, task.l, task.t)
  end
end
redis.call('HDEL', ktasks, id)
if absent then
  return {2, 0, -1, 0}
end
return {0, 0, -1, 0}
