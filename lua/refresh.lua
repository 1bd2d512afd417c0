--[[
refresh.lua: new rules and weights for waiting flows (a policies reload).
Their classes are due now, as the new rules may have room.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
ARGV[7]  a JSON array of {c class, l level, t tenant, w weight, r rules
         (their values as strings, six a rule: lines_head.lua)}; a flow
         with no hash (it no longer waits) is left alone

Reply: {0, 0, -1, 0}.
]]
-- #include lines_head.lua
-- #include lines_base.lua

local classes = {}
for _, x in ipairs(cjson.decode(ARGV[7])) do
  local key = kflow(x.c, x.l, x.t)
  if redis.call('EXISTS', key) == 1 then
    redis.call('HSET', key, 'w', tag(x.w), 'r', cjson.encode(x.r))
    classes[x.c] = true
  end
end
for class in pairs(classes) do
  wakeClass(class, kblocked(class))
end
return {0, 0, -1, 0}
