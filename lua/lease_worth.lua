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

-- leaseOf is the lease beside a log or a cap's slots: the key with 'e'
-- after the hash tag, in place of the slots' 'i'.
local function leaseOf(key)
  local tag = string.find(key, '}', 1, true)
  local rest = string.sub(key, tag + 1)
  if string.sub(rest, 1, 2) == 'i:' then
    rest = string.sub(rest, 2)
  end
  return string.sub(key, 1, tag) .. 'e' .. rest
end

-- leaseTerms reads the lease at key of a rule of limit, in one command:
-- the units it allows, floor(min(s, t) * limit / leaseParts), 0 when
-- there is none; and the units a window its lines pace grants at, the
-- balancer's goal for the group (g) when above that, so that a share on
-- its way is used as it arrives (docs/SCALING.md, "Moving a busy share").
local function leaseTerms(key, limit)
  local h = redis.call('HMGET', key, 's', 't', 'g')
  local share = tonumber(h[1]) or 0
  local worth = math.floor(math.min(share, tonumber(h[2]) or share) * limit / leaseParts)
  local goal = tonumber(h[3])
  if not goal then
    return worth, worth
  end
  return worth, math.max(worth, math.min(limit, math.floor(goal * limit / leaseParts)))
end

-- leaseWorth is the units of a rule of limit that the lease at key allows.
local function leaseWorth(key, limit)
  return (leaseTerms(key, limit))
end
