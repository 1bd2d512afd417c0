-- lease_worth.lua: what a group's lease of a global rule is worth
-- (docs/SCALING.md, "A global rule kept exact across shards"). The lease
-- is a hash: s, the share, in parts of leaseParts of the rule's limit; t,
-- the balancer's target, if any, which holds the worth down; g, the
-- balancer's goal for the group, which only its pace reads.

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

-- leasePace is the units of a rule of limit `whole` a window that the
-- lines of a lease worth `worth` pace its grants at: the balancer's goal
-- for the group (field g) when above the worth, so that a share on its
-- way is used as it arrives (docs/SCALING.md, "Moving a busy share").
local function leasePace(key, worth, whole)
  local goal = tonumber(redis.call('HGET', key, 'g'))
  if not goal then
    return worth
  end
  return math.max(worth, math.min(whole, math.floor(goal * whole / leaseParts)))
end

-- leaseWorth is the units of a rule of limit that the lease at key allows:
-- floor(min(s, t) * limit / leaseParts); 0 when there is none.
local function leaseWorth(key, limit)
  local h = redis.call('HMGET', key, 's', 't')
  local share = tonumber(h[1]) or 0
  return math.floor(math.min(share, tonumber(h[2]) or share) * limit / leaseParts)
end
