--[[
lease_take.lua: shard j takes the shares of move X that another shard
gave, the second step of a move (docs/SCALING.md): once, whoever runs it,
so that a recovery that runs it again gives nothing twice.

KEYS[1]  the lease (<prefix>{<group>}e:<body>), a hash: s, the share
KEYS[2]  the moves it took (<prefix>{<group>}E:<body>), a sorted set of
         move ids by when, kept an hour
ARGV[1]  X, the move's id
ARGV[2]  the shares, at least 1

Reply: 1 when it took them, 0 when it had taken move X before (and
writes the moves' expiry again, so that a WAIT after it covers the take).
]]

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local hour = 3600000000
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  -- A write all the same, which a WAIT on the caller's connection covers
  -- (Redis 7.2 and later count only the connection's own writes).
  redis.call('PEXPIRE', KEYS[2], hour / 1000)
  return 0
end
redis.call('HINCRBY', KEYS[1], 's', ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - hour)
redis.call('PEXPIRE', KEYS[2], hour / 1000)
return 1
