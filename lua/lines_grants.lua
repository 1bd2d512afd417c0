-- lines_grants.lua: a step of a class's lines: the levels in order, the
-- flow to serve, and its grant. Included after lines_flows.lua.

-- shareOf is the reserve each less urgent level earns while n levels wait,
-- cut to 100 / n so that they can never be owed every grant.
local function shareOf(n)
  return math.min(reserve, math.floor(100 / n))
end

-- order returns class's levels with ready flows in the order they are
-- served (owed a grant by the reserve first, then the most urgent), the
-- ready levels, and the credits.
local function order(class)
  local owed, ready, credit = {}, {}, {}
  local h = redis.call('HGETALL', kclass(class))
  for i = 1, #h, 2 do
    credit[h[i]] = tonumber(h[i + 1])
  end
  for level = 1, levels do
    if redis.call('EXISTS', kready(class, level)) == 1 then
      ready[#ready + 1] = level
    end
  end
  local share = shareOf(#ready)
  for _, level in ipairs(ready) do
    if share > 0 and (credit['r' .. level] or 0) >= 100 - share then
      owed[#owed + 1] = level
    end
  end
  local all = {}
  for _, level in ipairs(owed) do
    all[#all + 1] = level
  end
  for _, level in ipairs(ready) do
    all[#all + 1] = level
  end
  return all, ready, credit
end

-- served updates the credits after a grant to level, in hundredths of a
-- grant: each other ready level but the most urgent earns its share, and
-- one that has 100 - share is served first and spends it.
local function served(class, level, readyLevels, credit)
  local share = shareOf(#readyLevels)
  for _, other in ipairs(readyLevels) do
    local field = 'r' .. other
    if other ~= level and other > readyLevels[1] then
      credit[field] = math.min(100, (credit[field] or 0) + share)
      redis.call('HSET', kclass(class), field, credit[field])
    elseif other == level and (credit[field] or 0) >= 100 - share then
      credit[field] = credit[field] - (100 - share)
      redis.call('HSET', kclass(class), field, credit[field])
    end
  end
end

-- share counts a grant to tenant in class in the current share span, for
-- the status page: two keys by the span's parity, each knowing its span
-- (field ''). HGET and HSET: a Sluice user's ACL has no HINCRBY.
local function share(class, tenant)
  local span = math.floor(now / shareSpan)
  local key = kshares(class, span)
  if redis.call('HGET', key, '') ~= num(span) then
    redis.call('DEL', key)
    redis.call('HSET', key, '', num(span))
    redis.call('PEXPIRE', key, math.floor(2 * shareSpan / 1000))
  end
  redis.call('HSET', key, tenant, (tonumber(redis.call('HGET', key, tenant)) or 0) + 1)
end

-- grant gives the head task of flow (start tag) a place and moves the
-- flow's tags. It returns the task's queue and id, and whether it is
-- `here`, the task at the calling worker, recorded as admitted. A slot
-- `swapped` (taken over) is on the pace already.
local function grant(flow, start, place, here, swapped)
  local head = lineEnd(flow.class, flow.level, flow.tenant)
  -- The keys a damage may fail first, before the grant writes anything.
  sweep(flow.class, flow.level)
  share(flow.class, flow.tenant)
  redis.call('ZREM', kline(flow.class, flow.level), head.member)
  local taken = head.id == here
  record(flow.rules, head.id, place, taken)
  if not swapped then
    advance(flow.class, flow.rules, place)
  end
  if taken then
    redis.call('HDEL', ktasks, head.id)
  else
    -- Times go as text (cjson keeps 14 digits). g: when it was granted; r:
    -- the rules it was given under, which its claim checks.
    redis.call('HSET', ktasks, head.id, cjson.encode({s = 'G', c = flow.class, l = flow.level, t = flow.tenant,
      q = head.queue, p = num(place), S = tag(start), g = num(now), r = redis.sha1hex(flow.raw)}))
    redis.call('ZADD', kgrants, place, head.id)
  end
  redis.call('HSET', kclass(flow.class), 'v' .. flow.level, tag(start))
  flow.finish = start + 1 / flow.weight
  save(flow)
  if lineEnd(flow.class, flow.level, flow.tenant) then
    ready(flow, flow.finish)
  else
    redis.call('ZREM', kready(flow.class, flow.level), flow.tenant)
    idle(flow.class, flow.level, flow.tenant)
  end
  return head.queue, head.id, taken
end

-- hasLog reports whether some rule of flow is a sliding log: only a log
-- has a place in time.
local function hasLog(flow)
  for _, rule in ipairs(flow.rules) do
    if rule.algorithm == 'sliding-log' then
      return true
    end
  end
  return false
end

-- batchOf is how far beyond the lead a step gives flow's shared places:
-- `batch`, more under a lease worth part of its rule (rule.batch).
local function batchOf(flow)
  local b = batch
  for _, rule in ipairs(flow.rules) do
    if rule.shared == 1 and rule.batch then
      b = math.max(b, rule.batch)
    end
  end
  return b
end

-- turns returns the ready flows of class's level that a pick looks at (the
-- first `scan`) as {tenant, start}, in the order they are served: by start
-- tag, and on a tie a flow that joined at V (new, or back from idle or a
-- block: its start above its finish tag) before one served at every tag
-- below, each side by name. A newcomer is owed the next slot (Bounds).
local function turns(class, level)
  local found = redis.call('ZRANGE', kready(class, level), 0, scan - 1, 'WITHSCORES')
  local list = {}
  for i = 1, #found, 2 do
    list[#list + 1] = {tenant = found[i], start = tonumber(found[i + 1])}
  end
  local i = 1
  while i < #list do
    local j = i
    while j < #list and list[j + 1].start == list[i].start do
      j = j + 1
    end
    if j > i then
      local joined, rest = {}, {}
      for k = i, j do
        -- A flow whose record fails is set aside by pick, in either place.
        local ok, flow = pcall(flowOf, class, level, list[k].tenant)
        local side = (ok and flow.finish < list[k].start) and joined or rest
        side[#side + 1] = list[k]
      end
      for k, x in ipairs(joined) do
        list[i + k - 1] = x
      end
      for k, x in ipairs(rest) do
        list[i + #joined + k - 1] = x
      end
    end
    i = j + 1
  end
  return list
end

-- pick returns the flow of class to serve next, its start tag and place;
-- or nil, the time the shared rules are full until (if they are), whether
-- flows were blocked or dropped on the way, and whether it stopped at a
-- flow that `gate` refused: the call may not serve it (its keys are not
-- declared).
local function pick(class, levelsInOrder, here, gate)
  local lead = leadOf(class)
  local horizon = now + lead
  local changed = false
  for _, level in ipairs(levelsInOrder) do
    for _, turn in ipairs(turns(class, level)) do
      -- Every key a grant writes is read first, guarded: one Redis refuses
      -- sets the flow aside before anything of it is written.
      local ok, flow = pcall(flowOf, class, level, turn.tenant)
      if ok and not gate(flow) then
        return nil, nil, changed, true
      end
      local err, head, own, shared = flow, nil, nil, nil
      if ok then
        ok, head = pcall(lineEnd, class, level, flow.tenant)
        err = head
      end
      if ok and head then
        -- A parked task needs a lead to reach a worker, less the tolerance
        -- it may be late by; a task at a worker needs none, nor a flow
        -- without a log (its caps and counters admit it when it comes).
        local at = math.max(now, horizon - tolerance)
        if head.id == here or not hasLog(flow) then
          at = now
        end
        ok, own, shared = pcall(earliest, flow, at, true)
        err = own
      end
      if not ok then
        damaged(class, level, turn.tenant, err)
        changed = true
      elseif not head then
        redis.call('ZREM', kready(class, level), flow.tenant)
        idle(class, level, flow.tenant)
        changed = true
      else
        if not flow.known then
          -- Its rules are gone (its hash expired): its next task brings them.
          own = now + lead + 60000000
        end
        if shared > horizon + batchOf(flow) and flow.known then
          return nil, shared, changed -- full until then, for every flow
        elseif own > horizon then
          redis.call('ZREM', kready(class, level), flow.tenant)
          redis.call('ZADD', kblocked(class), num(own - lead), level .. ':' .. flow.tenant)
          changed = true
        else
          return {flow = flow, start = turn.start, place = math.max(own, shared)}
        end
      end
    end
  end
  return nil, nil, changed
end

-- step gives class's slots up to now + lead to its ready flows, fairly, at
-- most `most`, appending parked tasks' grants to out. `here` is a task at
-- the calling worker; step returns its place, or false. It serves only the
-- flows `gate` lets through, and stops at the first that it does not (an
-- arrival serves its own flow, a dispatch the flows whose keys it was
-- given), leaving the class's wake to its caller, and says so.
local function step(class, here, gate)
  unblock(class)
  local lead = leadOf(class)
  local given, mine, wake, passes = 0, false, nil, 0
  while given < most and passes < 8 do
    local all, readyLevels, credit = order(class)
    local chosen, full, changed, stopped = pick(class, all, here, gate)
    if stopped then
      return mine, true -- the class's wake stays: the caller decides
    end
    if chosen then
      local queue, id, taken = grant(chosen.flow, chosen.start, chosen.place, here)
      served(class, chosen.flow.level, readyLevels, credit)
      given = given + 1
      if taken then
        mine = chosen.place
      else
        out[#out + 1], out[#out + 2] = queue, id
      end
    elseif full then
      wake = full - lead
      break
    elseif changed then
      passes = passes + 1 -- flows were blocked or dropped: look again
    else
      break
    end
  end
  if given >= most then
    wake = now
  end
  local blocked = redis.call('ZRANGE', kblocked(class), 0, 0, 'WITHSCORES')
  local any = blocked[2] ~= nil
  if any then
    wake = math.min(wake or math.huge, tonumber(blocked[2]))
  end
  for level = 1, levels do
    if any then
      break
    end
    any = redis.call('EXISTS', kready(class, level)) == 1
  end
  if not any then
    redis.call('ZREM', kwake, class)
  else
    redis.call('ZADD', kwake, num(math.max(now, wake or (now + lead))), class)
  end
  return mine
end
