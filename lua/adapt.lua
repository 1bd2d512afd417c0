--[[
adapt.lua: a provider's answer to a send of an adaptive rule moves the
rule's limit in force (docs/INFLIGHT.md, "Adaptive limits"). The limit in
force l is a real number between the rule's min and its ceiling; the
limiter holds the rule to floor(l).

  slow  (a 429 or 503, or a cap's send timed out): at most once a
        cooldown, l falls to the level it rose from (g), when it rose
        since it last fell (and at least `below`), and stays there; else
        to beta * l, l being the level that failed (f); never under min.
  ok    (a send accepted): at most once a cooldown, and only while the
        rule holds tasks back (its log or its slots are full at
        floor(l), or its log holds places ahead), l rises by `probe` of
        itself, at least 1, and never past `below` under the level that
        failed, which is forgotten after `forget` cooldowns without a
        fall: back fast to just under the level that failed, then held
        there.

KEYS[1]  the rule's state, <prefix>{<group>}a:<body>: a hash {l, d (when
         it last fell, us), u (when it last rose), f (the level that
         failed), g (the level it last rose from)}; it expires a day
         after its last change
KEYS[2]  the rule's log (a sliding log) or slots (a cap); not read when
         ARGV[7] is given
ARGV[1]  'slow' or 'ok'
ARGV[2]  the ceiling, a whole number
ARGV[3]  the floor (min), 1 to the ceiling
ARGV[4]  where l starts when the hash holds none
ARGV[5]  the cooldown, us
ARGV[6]  the rule's window (a log) or 0 (a cap's slots)
ARGV[7]  optional: '1' or '0', whether the rule holds tasks back, as the
         caller found it where the rule's log or slots are (a global rule
         over shards, whose state is the pool's: docs/INFLIGHT.md,
         "Across shards")

Reply: {l as a string, d, u}.
]]
local beta, probe, below, forget = 0.9, 0.05, 0.02, 30
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local key, held = KEYS[1], KEYS[2]
local answer = ARGV[1]
local ceiling, floor, cooldown = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
local window = tonumber(ARGV[6])

local h = redis.call('HMGET', key, 'l', 'd', 'u', 'f', 'g')
local l = math.min(ceiling, math.max(floor, tonumber(h[1]) or tonumber(ARGV[4])))
local d, u, f, g = tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(h[4]), tonumber(h[5])
local changed = false

-- full reports whether the rule holds tasks back at floor(l): its window
-- (or its slots) holds that many, or a log holds places ahead of now,
-- given to tasks that wait.
local function full()
  if ARGV[7] then
    return ARGV[7] == '1'
  end
  if window > 0 and redis.call('ZCOUNT', held, string.format('(%d', now), '+inf') > 0 then
    return true
  end
  local from = window > 0 and now - window or now
  return redis.call('ZCOUNT', held, string.format('(%d', from), '+inf') >= math.floor(l)
end

if answer == 'slow' and now - d >= cooldown then
  local to, failed = l * beta, l
  if g and g < l then
    -- Back to where it rose from, and no higher until f is forgotten:
    -- the failed level is taken as just above it.
    to = math.min(g, l * (1 - below))
    failed = to / (1 - below)
  end
  f, g, l, d, changed = failed, nil, math.max(floor, to), now, true
elseif answer == 'ok' and now - d >= cooldown and now - u >= cooldown and l < ceiling and full() then
  if f and now - d >= forget * cooldown then
    f = nil
  end
  local to = l + math.max(1, probe * l)
  if f then
    to = math.min(to, f * (1 - below))
  end
  if to > l then
    g, l, u, changed = l, math.min(ceiling, to), now, true
  end
end
if changed or not h[1] then
  redis.call('HSET', key, 'l', string.format('%.17g', l), 'd', string.format('%d', d), 'u', string.format('%d', u))
  for field, v in pairs({f = f or false, g = g or false}) do
    if v then
      redis.call('HSET', key, field, string.format('%.17g', v))
    else
      redis.call('HDEL', key, field)
    end
  end
  redis.call('PEXPIRE', key, 86400000)
end
return {string.format('%.17g', l), string.format('%d', d), string.format('%d', u)}
