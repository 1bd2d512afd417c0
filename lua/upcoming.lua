--[[
upcoming.lua: the tasks the lines of one class will serve next, read only:
the heads of its ready flows of the most urgent level that has any, in
order of start tag. A worker calls them to a worker ahead of their turn
when a cap holds the class (docs/INFLIGHT.md, "In the fair lines").

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4..]  the class's keys (lua.LinesSettings.ClassKeys)
ARGV[7]  class
ARGV[8]  at most this many

Reply: {0, 0, -1, 0, queue1, id1, ...}.
]]
-- #include lines_head.lua
-- #include lines_room.lua
-- #include lines_base.lua

local class, most = ARGV[7], tonumber(ARGV[8])
local out = {0, 0, -1, 0}
for level = 1, levels do
  local found = redis.call('ZRANGE', kready(class, level), 0, most - 1)
  for _, tenant in ipairs(found) do
    local head = lineEnd(class, level, tenant)
    if head then
      out[#out + 1], out[#out + 2] = head.queue, head.id
    end
  end
  if #found > 0 then
    break
  end
end
return out
