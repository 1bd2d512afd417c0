--[[
claim.lua: a process claims a role that one process at a time should
play (the balancer of a class), or renews its claim.

KEYS[1]  the claim (<prefix>{limits}claim:<role>), a string: the holder
ARGV[1]  the holder, unique per process
ARGV[2]  how long the claim lasts unless renewed, in milliseconds

Reply: 2 when ARGV[1] took the claim now, 1 when it renewed it, 0 when
another holds it.
]]

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 2
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
