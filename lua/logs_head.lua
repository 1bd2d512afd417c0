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

