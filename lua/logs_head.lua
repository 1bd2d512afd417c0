-- logs_head.lua: the start of decide.lua and peek.lua: the clock, the
-- checks and their keys, and the reading of a log's scores.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Members admitted now are named <seconds>.<microseconds>-<sequence>, the
-- clock's two figures as Redis gives them: no formatting to pay for.
local stamp = t[1] .. '.' .. t[2] .. '-'
local mode = ARGV[1]
local n = (#ARGV - 3) / 4
if #KEYS < 2 * n then
  return redis.error_reply('ERR the limiter script: ' .. #KEYS .. ' keys for ' .. n .. ' checks: want each log, then each note')
end
local counts = {} -- units of each check after pruning, places included

-- #include lease_worth.lua

-- limits[i]: the most units of check i in a window. A check whose lease
-- is given after the notes (a global rule split over shards,
-- docs/SCALING.md) is leased: leased[i] names the lease, and the limit is
-- what the lease is worth here, never more than the rule's.
local limits, leased = {}, {}
for i = 1, n do
  limits[i] = tonumber(ARGV[4 * i])
end
if #KEYS > 2 * n then
  local given = {}
  for k = 2 * n + 1, #KEYS do
    given[KEYS[k]] = true
  end
  for i = 1, n do
    local lease = leaseOf(KEYS[i])
    if given[lease] then
      leased[i] = lease
      limits[i] = math.min(limits[i], leaseWorth(lease, limits[i]))
    end
  end
end

-- newest[i]: the score of log check i's newest member, once read.
local newest = {}

-- score reads the score s of a member of log key as a time in
-- microseconds. +inf, or a score past 2^53 (the year 2255), is no time:
-- the log is damaged, and every search on it would run to its budget.
local function score(key, s)
  local x = tonumber(s)
  if not (x and x < 2 ^ 53) then
    error({err = 'ERR damaged log ' .. key .. ': a member scored ' .. s .. ', not a time in microseconds'})
  end
  return x
end

