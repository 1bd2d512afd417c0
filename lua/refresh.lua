--[[
refresh.lua: new rules and weights for waiting flows (a policies reload).
Their classes are due now, as the new rules may have room.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4..]  each flow's class's records, <base>qF:<class>, and blocked
           flows, <base>qb:<class>
ARGV[7]  a JSON array of {c class, l level, t tenant, f the index in KEYS
         of its class's records, b of its blocked flows, w weight, r rules
         (their values as strings, six a rule: lines_head.lua)}; a flow
         with no record (it no longer waits) is left alone

Reply: {0, 0, -1, 0}.
]]
-- #include lines_head.lua
-- #include lines_room.lua
-- #include lines_base.lua

local blocked = {}
for _, x in ipairs(cjson.decode(ARGV[7])) do
  local key = KEYS[x.f]
  if redis.call('HEXISTS', key, field('f', x.l, x.t)) == 1 then
    redis.call('HSET', key, field('w', x.l, x.t), tag(x.w), field('r', x.l, x.t), cjson.encode(x.r))
    blocked[x.c] = KEYS[x.b]
  end
end
for class, key in pairs(blocked) do
  wakeClass(class, key)
end
return {0, 0, -1, 0}
