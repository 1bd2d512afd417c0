-- lines_logs.lua: what the fair lines read and write in the rules' logs:
-- room, places, admissions, and the pace of a shared log. Included after
-- lines_base.lua and counters.lua.

local countersReady = false
local function counters()
  if not countersReady then
    define_counters()
    countersReady = true
  end
end

-- The lead of a class: how far ahead of now a parked task of it is given
-- its place. It starts at ARGV[2] and follows the median delivery (a
-- granted task's time from grant to worker) by an eighth of each gap,
-- within minLead and maxLead (docs/FAIRNESS.md, "The horizon"). The lead
-- in use falls with it at once but rises at most half as fast as time
-- (class hash field 'e', "<lead in use>:<when>"): the horizon then never
-- leaps past the places the pace gave ahead of it, a gap lost for good.
local maxLead, minLead = 2000000, 1000
local leads = {}
local function leadRead(class)
  if not leads[class] then
    local h = redis.call('HMGET', kclass(class), 'lead', 'e')
    local learned = tonumber(h[1]) or startLead
    local inUse = learned
    local used, at = string.match(h[2] or '', '^(%d+):(%d+)$')
    if used then
      inUse = math.min(learned, tonumber(used) + math.floor(math.max(0, now - tonumber(at)) / 2))
    end
    leads[class] = {learned = learned, inUse = math.max(minLead, inUse)}
  end
  return leads[class]
end

local function leadOf(class)
  return leadRead(class).inUse
end

local function learn(class, delivery)
  if delivery > 2 * maxLead then
    return -- a stale sample (its task came back from a long park)
  end
  local l = leadRead(class)
  local lead = l.learned
  if delivery > lead then
    lead = lead + math.ceil((delivery - lead) / 8)
  else
    lead = lead - math.floor((lead - delivery) / 8)
  end
  l.learned = math.min(maxLead, math.max(minLead, lead))
  l.inUse = math.min(l.inUse, l.learned)
  redis.call('HSET', kclass(class), 'lead', num(l.learned), 'e', num(l.inUse) .. ':' .. num(now))
end

local pruned = {}
-- free is the earliest time at or after `at` at which rule has room for its
-- cost, places counted. A counter rule is asked now; denied, it is looked
-- at again a lead after its retry.
local function free(rule, at, class)
  if rule.algorithm == 'sliding-log' then
    if not pruned[rule.key] then
      redis.call('ZREMRANGEBYSCORE', rule.key, '-inf', now - rule.window)
      pruned[rule.key] = true
    end
    return logFree(rule.key, rule.limit, rule.window, rule.cost, at)
  end
  counters()
  local allowed, _, retry = counter_check(rule.algorithm, rule.key, rule.limit, rule.window, rule.cost, now)
  if allowed == 1 then
    return at
  end
  if rule.algorithm == 'concurrency' then
    -- Full now: no grant until a slot frees, whatever its time (a holder
    -- may renew), so past any horizon a step gives places up to. A
    -- release makes the class due at once; a lapse, a lead after it.
    return math.max(at, now + retry + leadOf(class), now + leadOf(class) + batch * leaseBatch + 1)
  end
  return math.max(at, now + retry + leadOf(class))
end

-- expire makes log key live until its member at place has left the window.
local function expire(key, window, place)
  local need = math.floor((place + window - now) / 1000) + 1
  if redis.call('PTTL', key) < need then
    redis.call('PEXPIRE', key, need)
  end
end

-- hold writes task id's slot of cap rule, lapsing at `lapse`.
local function hold(rule, id, lapse)
  redis.call('ZREMRANGEBYSCORE', rule.key, '-inf', now)
  redis.call('ZADD', rule.key, lapse, id)
  expire(rule.key, 0, lapse)
end

-- record writes task id's units into every rule at place: as a place
-- ('@id#j') or, when `taken`, as its admission ('<place>-c<id>#j'). A
-- cap's slot is held from a grant, until its place plus `late` (when an
-- unclaimed grant is taken back), and from an admission for its lease.
local function record(rules, id, place, taken)
  for _, rule in ipairs(rules) do
    if rule.algorithm == 'concurrency' then
      hold(rule, id, taken and math.max(place, now) + rule.window or place + late)
    elseif rule.algorithm == 'sliding-log' then
      local args = {}
      for j = 1, rule.cost do
        args[2 * j - 1] = place
        if taken then
          args[2 * j] = num(place) .. '-c' .. id .. '#' .. j
        else
          args[2 * j] = '@' .. id .. '#' .. j
        end
      end
      redis.call('ZADD', rule.key, unpack(args))
      expire(rule.key, rule.window, place)
    else
      counters()
      local _, _, _, _, state = counter_check(rule.algorithm, rule.key, rule.limit, rule.window, rule.cost, now)
      counter_record(rule.algorithm, rule.key, rule.limit, rule.window, rule.cost, now, state)
    end
  end
end

-- forgetFrontier deletes the frontier note decide.lua keeps beside log key
-- ('p' after the hash tag): a member left, so the note may no longer hold.
local function forgetFrontier(key)
  local e = string.find(key, '}[^}]*$')
  if e then
    redis.call('DEL', string.sub(key, 1, e) .. 'p' .. string.sub(key, e + 1))
  end
end

-- unplace removes task id's places from the log rules, and its slots from
-- the caps, or, given `claim` (a time), turns them into its admission
-- then. It reports whether some log or cap had lost them. Given `only` (a set of keys), it leaves the places
-- in other logs: they count until they move or leave with their window.
local function unplace(rules, id, claim, only)
  local lost = false
  for _, rule in ipairs(rules) do
    if rule.algorithm == 'concurrency' and (not only or only[rule.key]) then
      -- A grant's slot: held for the lease from the claim, else freed.
      if not tonumber(redis.call('ZSCORE', rule.key, id) or '') then
        lost = true
      elseif claim then
        hold(rule, id, math.max(claim, now) + rule.window)
      else
        redis.call('ZREM', rule.key, id)
      end
    elseif rule.algorithm == 'sliding-log' and (not only or only[rule.key]) then
      local removed = false
      for j = 1, rule.cost do
        if redis.call('ZREM', rule.key, '@' .. id .. '#' .. j) == 0 then
          lost = true
        elseif claim then
          redis.call('ZADD', rule.key, claim, num(claim) .. '-c' .. id .. '#' .. j)
        else
          removed = true
        end
      end
      if removed then
        forgetFrontier(rule.key)
      end
      if claim == now then
        expire(rule.key, rule.window, now) -- later than the place it lived for
      end
    end
  end
  return lost
end

-- movable reports whether the places at `place` of a task that comes later
-- may move to now in every log: the windows ending in [place + window,
-- now + window) then gain it, and hold only members in (place, now + window).
local function movable(rules, place)
  for _, rule in ipairs(rules) do
    if rule.algorithm == 'sliding-log' then
      if now >= place + rule.window or
        redis.call('ZCOUNT', rule.key, '(' .. num(place), '(' .. num(now + rule.window)) + rule.cost > rule.limit then
        return false
      end
    end
  end
  return true
end

-- The pace of a shared log: the last place its lines gave (class hash,
-- field 'p<log>'). While paced, no two places are closer than a slot
-- interval, window / limit (docs/FAIRNESS.md, "Pacing").
local paces = {}
local function pace(class, key)
  if paces[key] == nil then
    paces[key] = tonumber(redis.call('HGET', kclass(class), 'p' .. key)) or false
  end
  return paces[key]
end

local function advance(class, rules, place)
  for _, rule in ipairs(rules) do
    if rule.shared == 1 and rule.algorithm == 'sliding-log' then
      local last = math.max(pace(class, rule.key) or place, place)
      paces[rule.key] = last
      redis.call('HSET', kclass(class), 'p' .. rule.key, num(last))
    end
  end
end

-- earliest returns the earliest times at or after `at` at which the flow's
-- own rules, and its shared ones, fit. With `paced`, a shared log that held
-- a backlog back within its last two windows (class hash field 'f<log>')
-- also waits for its pace. A rule with room to spare is not paced.
local function earliest(flow, at, paced)
  local own, shared = at, at
  for _, rule in ipairs(flow.rules) do
    local x = free(rule, at, flow.class)
    if rule.shared == 1 then
      if paced and rule.algorithm == 'sliding-log' then
        local field = 'f' .. rule.key
        local full = tonumber(redis.call('HGET', kclass(flow.class), field))
        local last = pace(flow.class, rule.key)
        if full and now - full <= 2 * rule.window and last and rule.limit >= rule.cost then
          x = math.max(x, last + math.floor(rule.window / (rule.pace or rule.limit)))
        end
        if x > at then
          redis.call('HSET', kclass(flow.class), field, num(now)) -- a backlog still waits
        end
      end
      shared = math.max(shared, x)
    else
      own = math.max(own, x)
    end
  end
  return own, shared
end
