--[[
lease_held.lua: what a group's log of a global rule holds in the window
that ends now, and ahead (docs/SCALING.md, "Moving a busy share"). Read
only.

KEYS[1]  the rule's log in the group (<prefix>{<group>}:<body>), or a
         cap's slots (<prefix>{<group>}i:<body>)
ARGV[1]  the rule's window, us, the margin included; 0 for a cap

Reply: the log's members scored after now - window: its admissions of
the last window and its places in line; a cap's slots not lapsed.
]]

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now - tonumber(ARGV[1])), '+inf')
