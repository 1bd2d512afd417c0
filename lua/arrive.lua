--[[
arrive.lua: a task at a worker asks to be sent (docs/FAIRNESS.md). It
claims its grant, or is admitted at once when nothing waits and every rule
has room, or waits in its flow's line, and the slots due are given.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4..23]  the class's keys (lua.LinesSettings.ClassKeys): q, qF, qb,
          qr:1..5, qL:1..5, qi:1..5, qn:0, qn:1
KEYS[24+3i] .. KEYS[26+3i]  rule i's key (from 0), its frontier note and
          its lease (read when the rule is leased, docs/SCALING.md)
ARGV[7]   class       ARGV[8]   level (1 most urgent .. 5)
ARGV[9]   tenant      ARGV[10]  weight
ARGV[11]  queue       ARGV[12]  task id
ARGV[13+6i] .. ARGV[18+6i]  rule i (from 0): key, limit, window us, cost,
          algorithm, shared (lines_head.lua)

Reply: the bare integer now (us) when admitted at once by the first common
case; else {outcome, wait, -1, by, queue1, id1, ...}:
  outcome  1 admitted now; 2 given a place `wait` us from now (wait, then
           send); 3 parked (wait 0)
  by       parked: the rule (1-based) it waits for, the one that frees last
           or the first shared one; else 0
  queue, id  parked tasks given a grant, to move to the front of their
           queues; a pair whose queue is "" says what Redis refused, and
           for outcomes 1 and 2 the pair ("\1", at) the time its entries
           stand at, us
]]
-- #include lines_head.lua
-- #include lines_room.lua
local class, level, tenant = ARGV[7], tonumber(ARGV[8]), ARGV[9]
local weight, queue, id = tonumber(ARGV[10]), ARGV[11], ARGV[12]
local allLogs = true
for i = 13, #ARGV, 6 do
  allLogs = allLogs and ARGV[i + 4] == 'sliding-log'
end
-- limitOf is the limit of the rule at ARGV[i] now, read when a short path
-- needs it: a leased rule's is what its lease (KEYS[26 + 3r] for rule r)
-- is worth here.
local function limitOf(i)
  if ARGV[i + 5] == '2' then
    return leaseWorth(KEYS[26 + (i - 13) / 2], tonumber(ARGV[i + 1]))
  end
  return tonumber(ARGV[i + 1])
end

-- The most common arrival first: a task new to the lines whose rules are
-- all sliding logs, in a class where nothing waits, while no grant has
-- lapsed (lapsed grants' tasks go first). Admitted if every log has room
-- now: pruned, ZCARD counts the window. A log that held members has a
-- TTL, which PEXPIRE GT keeps when a place ahead needs it.
local known = redis.call('HGET', ktasks, id)
local wakeAt
if not known and allLogs then
  wakeAt = redis.call('ZSCORE', kwake, class)
end
if not known and allLogs and not wakeAt and
  redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
  local fits, counts = true, {}
  for i = 13, #ARGV, 6 do
    redis.call('ZREMRANGEBYSCORE', ARGV[i], '-inf', now - ARGV[i + 2])
    counts[i] = redis.call('ZCARD', ARGV[i])
    if counts[i] + ARGV[i + 3] > limitOf(i) then
      fits = false
      break
    end
  end
  if fits then
    local member = clock[1] .. '.' .. clock[2] .. '-c' .. id .. '#'
    for i = 13, #ARGV, 6 do
      local key, cost = ARGV[i], tonumber(ARGV[i + 3])
      if cost == 1 then
        redis.call('ZADD', key, now, member .. 1)
      else
        local args = {}
        for j = 1, cost do
          args[2 * j - 1], args[2 * j] = now, member .. j
        end
        redis.call('ZADD', key, unpack(args))
      end
      local ttl = math.floor(ARGV[i + 2] / 1000) + 1
      if counts[i] == 0 then
        redis.call('PEXPIRE', key, ttl)
      else
        redis.call('PEXPIRE', key, ttl, 'GT')
      end
    end
    return now
  end
end

-- The other common arrival: a task new to the lines, its rules all
-- sliding logs, whose class waits and is not due before wakeAt, while no
-- grant has lapsed. If its flow is ready but not first of its level, with
-- the weight and rules the task brings, the general path would only append
-- it and park it: done here, with the rule it waits for named as there,
-- before lines_base.lua defines its functions (their closures cost). The
-- append is lines_base.lua's lineAdd, written out; a ready flow is not idle.
-- "First" as a step orders them: on a tie of start tags a flow that joined
-- at V goes first (lines_grants.lua, turns).
if wakeAt and tonumber(wakeAt) > now and redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
  local kr = base .. 'qr:' .. class .. ':' .. level
  local start = tonumber(redis.call('ZSCORE', kr, tenant))
  local first = start and redis.call('ZRANGE', kr, 0, 0, 'WITHSCORES')
  if first and first[1] ~= tenant then
    local records, name = base .. 'qF:' .. class, level .. ':' .. tenant
    local stored = redis.call('HMGET', records, 'w' .. name, 'r' .. name, 'f' .. name)
    local ahead = tonumber(first[2]) < start or (tonumber(stored[3]) or 0) >= start or
      (tonumber(redis.call('HGET', records, 'f' .. level .. ':' .. first[1])) or 0) < start
    if ahead and stored[2] == cjson.encode({unpack(ARGV, 13)}) and tonumber(stored[1]) == weight then
      local line, from = base .. 'qL:' .. class .. ':' .. level, #tenant .. ':' .. tenant
      local last = redis.call('ZRANGE', line, '(' .. from .. '\255', '[' .. from, 'BYLEX', 'REV', 'LIMIT', 0, 1)[1]
      local seq = last and tonumber(string.sub(last, #from + 1, #from + 16), 16) + 1 or seqStart
      redis.call('ZADD', line, 0, from .. string.format('%016x', seq) .. #queue .. ':' .. queue .. id)
      redis.call('HSET', ktasks, id, cjson.encode({s = 'W', c = class, l = level, t = tenant, q = queue, n = num(seq)}))
      redis.call('PEXPIRE', records, flowTTL)
      local by, latest = 0, now
      for i = 13, #ARGV, 6 do
        local window = tonumber(ARGV[i + 2])
        redis.call('ZREMRANGEBYSCORE', ARGV[i], '-inf', now - window)
        local x = logFree(ARGV[i], limitOf(i), window, tonumber(ARGV[i + 3]), now)
        if x > latest or (by == 0 and ARGV[i + 5] == '1') then
          by, latest = (i - 7) / 6, math.max(latest, x)
        end
      end
      return {3, 0, -1, by}
    end
  end
end

-- #include lines_base.lua

-- The rules as the flow stores them, and read.
local rulesText = cjson.encode({unpack(ARGV, 13)})
local rules = rulesFrom(ARGV, 13)
-- The logs of the task's rules: the only ones it declares. Lapsed grants
-- are left to dispatch, which declares theirs.
local ownLogs = {}
for _, rule in ipairs(rules) do
  ownLogs[rule.key] = true
end

-- #include counters.lua
-- #include lines_logs.lua
-- #include lines_flows.lua
-- #include lines_grants.lua

-- swapFor is when flow's head would take the slot of grant id at place: at
-- place, or now if it has passed. In a log where the granted task holds
-- as many members at place, they are taken over one for one (moved to now
-- as a late claim would: movable); every other rule must have room then.
-- The members are looked up in the log, not in the granted flow's rules,
-- which may have changed. It returns the time and the logs taken over, or
-- nil.
local function swapFor(flow, id, place)
  local at, swap = math.max(place, now), {}
  for _, rule in ipairs(flow.rules) do
    local owns = rule.algorithm == 'sliding-log'
    for j = 1, (owns and rule.cost or 0) do
      owns = owns and tonumber(redis.call('ZSCORE', rule.key, '@' .. id .. '#' .. j)) == place
    end
    if rule.algorithm == 'concurrency' and redis.call('ZSCORE', rule.key, id) then
      swap[#swap + 1] = rule -- its slot, freed by takeBack below
    elseif owns then
      if at > place and not movable({rule}, place) then
        return nil
      end
      swap[#swap + 1] = rule
    elseif free(rule, at, flow.class) > at then
      return nil
    end
  end
  return at, swap
end

-- takeOver gives `here`, the task at the calling worker, the place of the
-- earliest unclaimed grant it is owed: when its flow is first of its level,
-- no more urgent level waits and its flow holds no grant ahead, a grant of
-- a less urgent level, or of a flow of its level that holds two or more of
-- the grants ahead, the first that swapFor allows. The bumped task goes
-- back to the head of its flow.
-- With `unlessNear` it declines when here's own slot is within the
-- tolerance. It returns here's place or false, and whether it declined.
local function takeOver(flow, here, unlessNear)
  local head = lineEnd(flow.class, flow.level, flow.tenant)
  local start = tonumber(redis.call('ZSCORE', kready(flow.class, flow.level), flow.tenant))
  if not head or head.id ~= here or not start then
    return false, false
  end
  local first = redis.call('ZRANGE', kready(flow.class, flow.level), 0, 0, 'WITHSCORES')
  if tonumber(first[2]) < start then
    return false, false
  end
  for more = 1, flow.level - 1 do
    if redis.call('EXISTS', kready(flow.class, more)) == 1 then
      return false, false
    end
  end
  if unlessNear and math.max(earliest(flow, now, true)) <= now + tolerance then
    return false, true
  end
  -- The grants ahead are the places given up to the lead and the batch
  -- (a step gives that far). Those whose place has passed count too: their
  -- tasks are late (up to `late`), and a slot taken over is here's at once.
  local ahead, held = {}, {}
  local upTo = num(now + leadOf(flow.class) + batchOf(flow))
  for _, gid in ipairs(redis.call('ZRANGE', kgrants, '-inf', upTo, 'BYSCORE', 'LIMIT', 0, 4 * scan)) do
    local raw = redis.call('HGET', ktasks, gid)
    local task = raw and cjson.decode(raw)
    if task and task.s == 'G' and task.c == flow.class then
      local who = task.l .. ':' .. task.t
      held[who] = (held[who] or 0) + 1
      ahead[#ahead + 1] = {id = gid, task = task, who = who}
    end
  end
  if held[flow.level .. ':' .. flow.tenant] then
    return false
  end
  for _, a in ipairs(ahead) do
    local task = a.task
    if task.l > flow.level or (task.l == flow.level and
      (held[a.who] >= 2 or lineEnd(flow.class, task.l, task.t))) then
      local at, swap = swapFor(flow, a.id, tonumber(task.p))
      if at then
        takeBack(a.id, task, ownLogs)
        for _, rule in ipairs(swap) do
          -- Gone already, unless its rules changed.
          if rule.algorithm == 'concurrency' then
            redis.call('ZREM', rule.key, a.id)
          else
            for j = 1, rule.cost do
              redis.call('ZREM', rule.key, '@' .. a.id .. '#' .. j)
            end
          end
        end
        grant(flow, start, at, here, true)
        return at
      end
    end
  end
  return false
end

-- lapsed reports whether a grant of the class's has its place more than
-- `late` ago (its task goes first). Another class's does not hold this
-- one: dispatch may not be able to take it back (a damaged key).
local function lapsed()
  if redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
    return false
  end
  for _, gid in ipairs(redis.call('ZRANGE', kgrants, '-inf', num(now - late - 1), 'BYSCORE', 'LIMIT', 0, 4 * scan)) do
    local ok, task = pcall(cjson.decode, redis.call('HGET', ktasks, gid) or 'null')
    if ok and type(task) == 'table' and task.c == class then
      return true
    end
  end
  return false
end

-- The task's flow, written with the rules and weight this task brings:
-- only when the task waits, not when it is admitted at once.
local own
local function ownFlow()
  if not own then
    own = flowOf(class, level, tenant)
    own.weight, own.rules, own.raw, own.known = weight, rules, rulesText, true
    save(own, true)
  end
  return own
end

-- admitted replies Admitted (1), or Placed (2) until its place, for a task
-- whose entries stand at `at`, given as the pair ('\1', at): the record of
-- its admission (docs/SCALING.md, "The history checker").
local function admitted(at)
  out[#out + 1], out[#out + 2] = '\1', at
  if at == now then
    return reply(1, 0)
  end
  return reply(2, math.max(0, at - now))
end

local task = known and cjson.decode(known)
if task and task.s == 'G' and task.r ~= redis.sha1hex(rulesText) then
  -- A grant given under other rules than the task brings (a reload, or a
  -- stored copy damaged or forged) is taken back: placed again under its own.
  takeBack(id, task, ownLogs)
elseif task and task.s == 'G' then
  -- A granted task claims its grant: before its place, its places become
  -- its admission there; after it, up to `late`, its admission now when
  -- every log allows (movable), else within the tolerance at its place;
  -- later it is placed again from the head of its flow. Its places are in
  -- the logs of the rules it brings, which it was granted under (task.r).
  local granted = flowOf(task.c, task.l, task.t)
  local place = tonumber(task.p)
  learn(task.c, now - (tonumber(task.g) or now))
  local at = nil
  if now <= place then
    at = place
  elseif now <= place + late and movable(rules, place) then
    at = now
  elseif now <= place + tolerance then
    at = place
  end
  if at and not unplace(rules, id, at) then
    redis.call('HDEL', ktasks, id)
    redis.call('ZREM', kgrants, id)
    return admitted(at)
  end
  if at then
    -- A window had lost a place (a reset): the admission stands, and the
    -- task is placed again.
    redis.call('ZREM', kgrants, id)
    local seq = lineAdd(task.c, task.l, task.t, task.q, id, true)
    redis.call('HSET', ktasks, id, waitingRecord(task.c, task.l, task.t, task.q, seq))
    waiting(granted)
  else
    takeBack(id, task, ownLogs)
  end
elseif not task then
  -- New, with nothing waiting in its class nor a grant lapsed, and it fits
  -- now: admitted.
  if not redis.call('ZSCORE', kwake, class) and not lapsed() then
    local ownAt, sharedAt = earliest({class = class, rules = rules}, now)
    if ownAt == now and sharedAt == now then
      record(rules, id, now, true)
      return admitted(now)
    end
  end
  local seq = lineAdd(class, level, tenant, queue, id)
  redis.call('HSET', ktasks, id, waitingRecord(class, level, tenant, queue, seq))
  waiting(ownFlow())
else
  -- Back while it waits (its grant was taken back, or its park ended): it
  -- keeps its turn, and is timed from its grant once. One whose member is
  -- not in its line (a line deleted, or 0.1.0's layout) joins its tail.
  local changed = false
  if not (task.n and redis.call('ZSCORE', kline(task.c, task.l), member(task.t, tonumber(task.n), task.q, id))) then
    task.n, changed = num(lineAdd(task.c, task.l, task.t, task.q, id)), true
  end
  if task.g then
    learn(task.c, now - tonumber(task.g))
    task.g, changed = nil, true
  end
  if changed then
    redis.call('HSET', ktasks, id, cjson.encode(task))
  end
  waiting(flowOf(task.c, task.l, task.t))
end

ownFlow()
-- A task whose own slot is not at once first tries to take over one it is
-- owed; then the step gives the slots due, to it if still in line; if not,
-- and its slot had seemed near, it tries to take one over after all. While
-- a grant has lapsed, its task goes first: it waits, and dispatch, which
-- declares that task's keys, takes the grant back and serves the class.
local mine, near, stopped = false, false, false
if lapsed() then
  redis.call('ZADD', kwake, now, class)
else
  mine, near = takeOver(own, id, true)
  local placed
  placed, stopped = step(class, id, function(flow) return flow == own end)
  mine = placed or mine
  if not mine and near then
    mine = takeOver(own, id)
  end
end
if stopped then
  -- Another flow comes first. While the class's shared logs are full past
  -- the horizon, no flow of it can be served before: the class is due
  -- then, as a step would have said (lines_grants.lua, pick).
  local _, shared = earliest(own, now, true)
  if shared > now + leadOf(class) + batchOf(own) then
    redis.call('ZADD', kwake, num(shared - leadOf(class)), class)
  end
end
if mine then
  return admitted(mine)
end
-- Parked: name the rule it waits for.
local by, latest = 0, now
for i, rule in ipairs(own.rules) do
  local x = free(rule, now, class)
  if x > latest or (by == 0 and rule.shared == 1) then
    by, latest = i, math.max(latest, x)
  end
end
return reply(3, 0, by)
