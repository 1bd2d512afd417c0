--[[
lease_demand.lua: what a group's first-come-first-served callers want of
the global rules leased to it, the balancer's read of the demand where no
fair lines run (docs/SCALING.md, "First come, first served over shards").
Read only.

KEYS[2r-1]  rule r's log in the group (<prefix>{<group>}:<body>)
KEYS[2r]    its lease (<prefix>{<group>}e:<body>)

Reply: for each rule r, two integers: the places in line ahead of now in
its log (members scored after now), and the asks its lease has counted
(field a: callers refused a place, decide.lua), which only grows.
]]

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local r = {}
for i = 1, #KEYS, 2 do
  r[#r + 1] = redis.call('ZCOUNT', KEYS[i], string.format('(%d', now), '+inf')
  r[#r + 1] = tonumber(redis.call('HGET', KEYS[i + 1], 'a')) or 0
end
return r
