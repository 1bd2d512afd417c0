--[[
lease_give.lua: shard i gives part of its share of a global rule to shard
j, the first step of a move (docs/SCALING.md, "A global rule kept exact
across shards"): only what no window of its log that ends now or later
needs (a cap's: the slots it holds, docs/INFLIGHT.md, "Across shards"),
and no lower than its target.

The lease is a hash beside the rule's log (lease_worth.lua: s, the share,
t, the balancer's target, and g, its goal), and out:<X>, "<to> <d> <time>", a move
given and not yet settled, which recovery completes.

KEYS[1]  the lease (<prefix>{<group>}e:<body>)
KEYS[2]  the rule's log (<prefix>{<group>}:<body>), or a cap's slots
         (<prefix>{<group>}i:<body>); the pool's is the default group's,
         empty unless Redis ran one group before
ARGV[1]  X, the move's id
ARGV[2]  to: the receiving group
ARGV[3]  the shares asked for; 0 confirms a give of X made before (recovery)
ARGV[4]  the rule's limit, units
ARGV[5]  the rule's window, us, the margin included; 0 for a cap, whose
         slots not lapsed are what it keeps (docs/INFLIGHT.md, "Across
         shards")

Reply: the shares given, 0 to ARGV[3]; a move X given and not settled
replies its own again, giving nothing more, and writes out:X again, so
that a WAIT on the caller's connection covers it (SCALING.md,
"Acknowledged by a replica"). With ARGV[3] 0, X settled replies 0.
]]

-- #include lease_worth.lua

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local lease, log = KEYS[1], KEYS[2]
local id, to, asked = ARGV[1], ARGV[2], tonumber(ARGV[3])
local limit, window = tonumber(ARGV[4]), tonumber(ARGV[5])

local done = redis.call('HGET', lease, 'out:' .. id)
if done then
  redis.call('HSET', lease, 'out:' .. id, done)
  return tonumber(string.match(done, '^%S+ (%d+)'))
end
if asked < 1 then
  return 0
end

-- peak: the most members of the log in a window (e - window, e] that ends
-- now or later; such a window ends at now or at a member ahead of now (a
-- place), where its count can grow. A cap's: its slots not lapsed.
local function count(e)
  return redis.call('ZCOUNT', log, '(' .. string.format('%d', e - window), string.format('%d', e))
end
local peak
if window == 0 then
  peak = redis.call('ZCOUNT', log, '(' .. string.format('%d', now), '+inf')
else
  peak = count(now)
  local ahead = redis.call('ZRANGE', log, '(' .. string.format('%d', now), '+inf', 'BYSCORE', 'WITHSCORES')
  for i = 2, #ahead, 2 do
    peak = math.max(peak, count(tonumber(ahead[i])))
  end
end

local h = redis.call('HMGET', lease, 's', 't')
local share = tonumber(h[1]) or 0
local keep = math.ceil(peak * leaseParts / limit)
if h[2] then
  keep = math.max(keep, tonumber(h[2]))
end
local given = math.min(asked, share - keep)
if given <= 0 then
  return 0
end
redis.call('HSET', lease, 's', string.format('%d', share - given),
  'out:' .. id, to .. ' ' .. string.format('%d', given) .. ' ' .. string.format('%d', now))
return given
