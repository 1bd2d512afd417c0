-- lease_worth.lua: what a group's lease of a global rule is worth
-- (docs/SCALING.md, "A global rule kept exact across shards"). The lease
-- is a hash: s, the share, in parts of leaseParts of the rule's limit; t,
-- the balancer's target, if any.

-- leaseParts is a whole limit in shares (throttle.LeaseParts).
local leaseParts = 37800000

-- leaseRetry is how soon, in microseconds, a caller refused a place under
-- a lease asks again: one balancer period (throttle.BalancePeriod).
local leaseRetry = 100000

-- leaseOf is the lease beside a log: its key with 'e' after the hash tag.
local function leaseOf(log)
  local tag = string.find(log, '}', 1, true)
  return string.sub(log, 1, tag) .. 'e' .. string.sub(log, tag + 1)
end

-- leaseWorth is the units of a rule of limit that the lease at key allows:
-- floor(min(s, t) * limit / leaseParts); 0 when there is none.
local function leaseWorth(key, limit)
  local h = redis.call('HMGET', key, 's', 't')
  local share = tonumber(h[1]) or 0
  return math.floor(math.min(share, tonumber(h[2]) or share) * limit / leaseParts)
end
