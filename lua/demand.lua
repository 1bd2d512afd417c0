--[[
demand.lua: what one class's waiting flows weigh, by level: the
balancer's read of a group's demand (throttle.Lines.Demand). Read only;
unlike waiting.lua, it reads no share counts and replies no flow.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4..]  the class's keys (lua.LinesSettings.ClassKeys)
ARGV[7]  the class
ARGV[8]  at most this many flows in all, the most urgent first (those
         past it count for nothing)

Reply: {0, 0, -1, 0, then for levels 1 to 5 the sum of the weights of
the level's flows, ready or blocked, as text}. A ready or blocked flow
has tasks in line: a grant, a dispatch that finds its line empty, and a
drop that empties it (drop.lua) take it out; a damaged flow stays
blocked, and counted, until its key is repaired or its lines reset. No
line is read: with a count of each line, a read of about a hundred
flows took 535 us by SLOWLOG (BenchmarkShardsDrain).
]]
-- #include lines_head.lua
-- #include lines_room.lua
-- #include lines_base.lua

local class, atMost = ARGV[7], tonumber(ARGV[8])
local flows = {}
for level = 1, levels do
  flows[level] = redis.call('ZRANGE', kready(class, level), 0, atMost - 1)
end
for _, m in ipairs(redis.call('ZRANGE', kblocked(class), 0, atMost - 1)) do
  local level, tenant = string.match(m, '^(%d):(.*)$')
  level = tonumber(level)
  if level and level >= 1 and level <= levels then
    table.insert(flows[level], tenant)
  end
end
local r, left = {0, 0, -1, 0}, atMost
for level = 1, levels do
  local sum, fields, tenants = 0, {}, flows[level]
  for i = 1, math.min(#tenants, left) do
    fields[i] = field('w', level, tenants[i])
  end
  left = left - #fields
  local weights = {}
  for i = 1, #fields, 1000 do -- unpack takes a few thousand values at most
    for _, w in ipairs(redis.call('HMGET', kflows(class), unpack(fields, i, math.min(i + 999, #fields)))) do
      weights[#weights + 1] = w
    end
  end
  for i = 1, #fields do
    sum = sum + (tonumber(weights[i]) or 1)
  end
  r[#r + 1] = string.format('%.17g', sum)
end
return r
