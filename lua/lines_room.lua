-- lines_room.lua: what the arrival's short paths need besides the head:
-- the room of a sliding log, what a lease is worth, and the constants of a
-- line. Included after lines_head.lua, before lines_base.lua.

-- #include lease_worth.lua

local function num(x) return string.format('%d', x) end

-- A class's flow records go a day after they were last written.
local flowTTL = 86400000
-- A line's sequence numbers start here (lines_base.lua, lineAdd).
local seqStart = 2 ^ 52

-- logFree is the earliest time at or after `at` at which sliding log key
-- (limit, window) has room for cost, counting every member, places too.
local function logFree(key, limit, window, cost, at)
  if limit < cost then
    -- A lease worth less than the cost (docs/SCALING.md): free only far
    -- ahead, past any horizon, until its share grows.
    return at + 2 ^ 40
  end
  local over = redis.call('ZCOUNT', key, '(' .. num(at - window), '+inf') + cost - limit
  if over <= 0 then
    return at
  end
  local member = redis.call('ZRANGE', key, '(' .. num(at - window), '+inf', 'BYSCORE', 'LIMIT', over - 1, 1, 'WITHSCORES')
  local score = tonumber(member[2])
  if not (score < 2 ^ 53) then
    -- +inf (or past the year 2255) is damage, not a wait forever.
    error({err = 'ERR damaged log ' .. key .. ': a member scored ' .. member[2] .. ', not a time in microseconds'})
  end
  return math.max(at, score + window)
end
