--[[
slots_renew.lua: a holder still sending renews its slots, one in each of
its caps (docs/INFLIGHT.md, "Slots"): each lapses a lease from now. A slot
that lapsed, or was taken back, is not written again: the cap may have
given it to another.

KEYS[i]    the slots of cap i, <prefix>{<group>}i:<body>, i = 1 .. n
ARGV[1]    the holder (a task id)
ARGV[1+i]  the lease of cap i, in microseconds

Reply: an array of n integers, 1 when cap i's slot was renewed, 0 when the
holder no longer held it.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local holder = ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  local lapse = tonumber(redis.call('ZSCORE', key, holder) or '')
  out[i] = 0
  if lapse and lapse > now then
    local lease = tonumber(ARGV[1 + i])
    redis.call('ZADD', key, 'XX', now + lease, holder)
    if redis.call('PTTL', key) < math.floor(lease / 1000) + 1 then
      redis.call('PEXPIRE', key, math.floor(lease / 1000) + 1)
    end
    out[i] = 1
  end
end
return out
