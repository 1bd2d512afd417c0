--[[
slots_release.lua: a send has ended (success, failure, a return to the
queue): its holder frees its slot in each of its caps, and, when its class
waits in the fair lines, the class is due at once and the dispatch loops
are woken, so that the freed slot goes to the next task in fair order
(docs/INFLIGHT.md). A slot not held (lapsed) is no error.

KEYS[i]    the slots of cap i, <prefix>{<group>}i:<body>, i = 1 .. n
KEYS[n+1]  with a class: the lines' waiting classes, <base>qw
KEYS[n+2]  with a class: its blocked flows, <base>qb:<class>
ARGV[1]    the holder (a task id)
ARGV[2]    the class (a task type), or "" without the lines
ARGV[3]    with a class: the lines' wake channel, <base>qwake

Reply: the number of slots freed.
]]
local holder, class = ARGV[1], ARGV[2]
local n = #KEYS
if class ~= '' then
  n = n - 2
end
local freed = 0
for i = 1, n do
  freed = freed + redis.call('ZREM', KEYS[i], holder)
end
if freed > 0 and class ~= '' and redis.call('ZSCORE', KEYS[n + 1], class) then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- As wake.lua: blocked flows are looked at again, and the class now.
  for _, member in ipairs(redis.call('ZRANGE', KEYS[n + 2], 0, -1)) do
    redis.call('ZADD', KEYS[n + 2], now, member)
  end
  redis.call('ZADD', KEYS[n + 1], 'XX', now, class)
  redis.call('PUBLISH', ARGV[3], 'wake')
end
return freed
