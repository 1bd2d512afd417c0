--[[
waiting.lua: the waiting flows, ready or blocked, each with its tasks in
line, its weight and its tenant's grants in the class over the current
and the previous share span. Read only.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4..]  the keys of each class (lua.LinesSettings.ClassKeys)
ARGV[7]  at most this many flows
ARGV[8..]  the classes, as read from <base>qw

Reply: {0, 0, -1, share span us, then per flow: class, level, tenant,
tasks in line, weight, grants}.
]]
-- #include lines_head.lua
-- #include lines_room.lua
-- #include lines_base.lua

local atMost = tonumber(ARGV[7])
local r = {0, 0, -1, shareSpan}
local span = math.floor(now / shareSpan)
for _, class in ipairs({unpack(ARGV, 8)}) do
  local recent = {}
  for _, key in ipairs({kshares(class, span - 1), kshares(class, span)}) do
    local h = redis.call('HGETALL', key)
    local counts = {}
    for i = 1, #h, 2 do
      counts[h[i]] = h[i + 1]
    end
    if counts[''] == num(span) or counts[''] == num(span - 1) then
      for tenant, n in pairs(counts) do
        if tenant ~= '' then
          recent[tenant] = (recent[tenant] or 0) + tonumber(n)
        end
      end
    end
  end
  local listed = {}
  for level = 1, levels do
    for _, tenant in ipairs(redis.call('ZRANGE', kready(class, level), 0, atMost - 1)) do
      listed[#listed + 1] = {level, tenant}
    end
  end
  for _, member in ipairs(redis.call('ZRANGE', kblocked(class), 0, atMost - 1)) do
    local level, tenant = string.match(member, '^(%d):(.*)$')
    listed[#listed + 1] = {tonumber(level), tenant}
  end
  for _, x in ipairs(listed) do
    if #r >= 4 + 6 * atMost then
      return r
    end
    local k, weight = #r, redis.call('HGET', kflows(class), field('w', x[1], x[2])) or '1'
    local from = lineOf(x[2])
    r[k + 1], r[k + 2], r[k + 3] = class, tostring(x[1]), x[2]
    r[k + 4] = redis.call('ZLEXCOUNT', kline(class, x[1]), '[' .. from, '(' .. from .. '\255')
    r[k + 5], r[k + 6] = weight, recent[x[2]] or 0
  end
end
return r
