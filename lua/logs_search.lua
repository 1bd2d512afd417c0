-- logs_search.lua: the search of decide.lua and peek.lua for the earliest
-- time a request fits every check, with the logs' frontier notes (see
-- decide.lua's header). Included after logs_head.lua and counters.lua.

local look = mode == '0' or mode == '3' -- record nothing
local id = ARGV[2]
local tolerance = tonumber(ARGV[3])

-- Lua prints numbers with 14 digits: times in microseconds need %d.
local function num(x) return string.format('%d', x) end
local function excl(x) return string.format('(%d', x) end

-- How many commands one check's search may run before it settles for the
-- end of the window's members, a time that always fits.
local budget = 200

local windows, costs, algs = {}, {}, {}
local logs, counters = {}, {}
for i = 1, n do
  windows[i] = tonumber(ARGV[4 * i + 1])
  costs[i] = tonumber(ARGV[4 * i + 2])
  algs[i] = ARGV[4 * i + 3]
  if algs[i] == 'sliding-log' then
    logs[#logs + 1] = i
    if not counts[i] then
      redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - windows[i])
      counts[i] = redis.call('ZCARD', KEYS[i])
    end
  else
    counters[#counters + 1] = i
  end
end

local own, retries, resets, states = {}, {}, {}, {}

-- last returns the score of log check i's newest member (false when it has
-- none), read once (newest, above): writes that know it keep it up to
-- date, others forget it.
local function last(i)
  if newest[i] == nil then
    newest[i] = false
    if counts[i] > 0 then
      local e = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
      if e[2] then
        newest[i] = score(KEYS[i], e[2])
      end
    end
  end
  return newest[i]
end

-- wrote notes a member of log check i written at score.
local function wrote(i, score)
  if newest[i] ~= nil then
    newest[i] = math.max(newest[i] or score, score)
  end
end

-- tail is the time from which cost units always fit log check i: one window
-- after the member that the request needs gone when it counts every member,
-- future places included. No window holding that time or a later one holds
-- any member up to that one. It is read once for each count of the log.
local tails, tailCounts = {}, {}
local function tail(i)
  if limits[i] < costs[i] then
    return now + 2 ^ 40 -- a lease worth less than the cost: no time fits
  end
  local idx = counts[i] - limits[i] + costs[i] - 1
  if idx < 0 then
    return now
  end
  if tailCounts[i] ~= counts[i] then
    local e = redis.call('ZRANGE', KEYS[i], idx, idx, 'WITHSCORES')
    tails[i], tailCounts[i] = math.max(now, tonumber(e[2]) + windows[i]), counts[i]
  end
  return tails[i]
end

-- walk searches log check i for the earliest time at or after from that
-- fits cost units (see earliest). It returns that time and the time before
-- which it proved every time full: the same, or, when the budget ran out,
-- the time it had reached (it then returns the tail).
local function walk(i, from)
  local key, limit, window, cost = KEYS[i], limits[i], windows[i], costs[i]
  local at, spent = from, 0
  while spent < budget do
    local c = redis.call('ZCOUNT', key, excl(at - window), num(at))
    spent = spent + 1
    if c + cost > limit then
      local e = redis.call('ZRANGE', key, excl(at - window), '+inf', 'BYSCORE',
        'LIMIT', c + cost - limit - 1, 1, 'WITHSCORES')
      spent = spent + 1
      at = tonumber(e[2]) + window
    else
      -- The windows ending at the first limit - cost - c members after at
      -- have room whatever else they hold; look at the others.
      local offset, blocked = limit - cost - c, nil
      while not blocked and spent < budget do
        local later = redis.call('ZRANGE', key, excl(at), excl(at + window), 'BYSCORE',
          'LIMIT', offset, 16, 'WITHSCORES')
        spent = spent + 1
        for j = 2, #later, 2 do
          local f = tonumber(later[j])
          spent = spent + 1
          if redis.call('ZCOUNT', key, excl(f - window), num(f)) + cost > limit then
            blocked = f
            break
          end
        end
        if not blocked and #later < 32 then
          return at, at
        end
        offset = offset + 16
      end
      if blocked then
        at = blocked
      end
    end
  end
  return tail(i), at
end

-- noteKey returns the key of log check i's frontier note, given in KEYS.
local function noteKey(i)
  return KEYS[n + i]
end

-- frontier returns the time up to which log check i is known full for one
-- unit: its note's F when the note is the policy's and lies ahead, else
-- now. The first call reads the notes of every log check, in one MGET.
local notes = {}
local function frontier(i)
  if notes[i] == nil then
    local at, ks = {}, {}
    for _, j in ipairs(logs) do
      notes[j] = notes[j] or now
      local k = noteKey(j)
      if k and notes[j] == now then
        at[#ks + 1], ks[#ks + 1] = j, k
      end
    end
    local vs = #ks > 0 and redis.call('MGET', unpack(ks)) or {}
    for x, v in ipairs(vs) do
      local j = at[x]
      local f, l, w = string.match(v or '', '^(%d+):(%d+):(%d+)$')
      if f and tonumber(l) == limits[j] and tonumber(w) == windows[j] then
        notes[j] = math.max(now, tonumber(f))
      end
    end
  end
  return notes[i]
end

-- forget deletes log check i's frontier note: a member ahead of now left.
local function forget(i)
  local k = noteKey(i)
  if k then
    redis.call('DEL', k)
  end
  notes[i] = now
end

-- earliest returns the earliest time at or after from at which cost units
-- fit log check i: every window that would hold them has room for them.
-- Such a window ends at the time itself or at a member within a window
-- after it. A full window ending at the time moves the time to the exit of
-- the member that must go; a full one ending at a later member moves it to
-- that member (no time up to it fits). The search starts at the log's
-- frontier when that lies ahead, gives up after budget commands and
-- returns the tail. A search of one unit that proved the log full past its
-- frontier moves the note there, unless nothing is to be recorded.
local function earliest(i, from)
  local limit, window, cost = limits[i], windows[i], costs[i]
  if counts[i] + cost <= limit then
    return from
  elseif limit < cost then
    return tail(i)
  end
  -- With a member ahead of from, the search starts at the frontier.
  local nw, start, known = last(i), from, nil
  if nw and nw > from then
    known = frontier(i)
    from = math.max(from, known)
  end
  local found, reached
  if nw and nw <= from then
    -- Nothing ahead of from: the tail is the answer.
    found = math.max(from, tail(i))
    reached = found
  elseif from == start and redis.call('ZCOUNT', KEYS[i], excl(from - window), excl(from + window)) + cost <= limit then
    -- The windows that would hold from lie within (from - window, from +
    -- window): room there is room in each, one command where the walk
    -- takes two (a rule with room now, asked for its own retry-after).
    -- Where it has none, the walk follows, a command more. Not tried
    -- where the note moved from: a search got there, and its place was
    -- most likely given there, so the count would seldom find room.
    found, reached = from, from
  else
    found, reached = walk(i, from)
  end
  if known and cost == 1 and not look and start <= known and reached > known then
    local k = noteKey(i)
    if k then
      redis.call('SET', k, num(reached) .. ':' .. num(limit) .. ':' .. num(window),
        'PX', math.floor((reached - now) / 1000) + 1)
      notes[i] = reached
    end
  end
  return found
end

local reply = {0}
-- finish replies; at is the time the admission's log entries stand at, 0
-- when nothing was admitted.
local function finish(allowed, wait, by, early, at)
  reply[1] = allowed
  for i = 1, n do
    reply[4 * i - 2] = retries[i] == 0 and 1 or 0
    reply[4 * i - 1] = counts[i]
    reply[4 * i] = retries[i]
    reply[4 * i + 1] = resets[i]
  end
  reply[4 * n + 2] = wait
  reply[4 * n + 3] = by
  reply[4 * n + 4] = early
  if mode == '3' then
    -- A member scored after now is a place in line: admissions are scored
    -- at their time, up to now.
    for i = 1, n do
      local ahead, soon = 0, 0
      if algs[i] == 'sliding-log' then
        ahead = redis.call('ZCOUNT', KEYS[i], excl(now), '+inf')
        if ahead > 0 then
          soon = redis.call('ZCOUNT', KEYS[i], excl(now), num(now + windows[i]))
        end
      end
      reply[4 * n + 3 + 2 * i], reply[4 * n + 4 + 2 * i] = ahead, soon
    end
  end
  reply[#reply + 1] = at
  return reply
end

-- settle sets the TTL and reset-after of every log check: the key goes
-- shortly after its newest member leaves the window. Set on every call so
-- that a changed window applies.
local function settle()
  for _, i in ipairs(logs) do
    resets[i] = 0
    local nw = last(i)
    if nw then
      local reset = nw + windows[i] - now
      resets[i] = reset
      redis.call('PEXPIRE', KEYS[i], math.floor(reset / 1000) + 1)
    end
  end
end

-- Every log's newest member is read before anything is written, so that a
-- damaged log (see score) stops the script with nothing changed. settle
-- reads it anyway: this costs no command.
for _, i in ipairs(logs) do
  last(i)
end

-- The counters first: they only look.
if #counters > 0 then
  define_counters()
end
local counterAt = now
for _, i in ipairs(counters) do
  local allowed, count, retry, reset, state = counter_check(algs[i], KEYS[i], limits[i], windows[i], costs[i], now, id)
  counts[i], retries[i], resets[i], states[i] = count, retry, reset, state
  if allowed == 1 then
    retries[i] = 0
  end
  counterAt = math.max(counterAt, now + retries[i])
end

-- fit returns the time the request fits every check at (the latest of
-- each log check alone and the counters' retry, made to fit them all: a
-- time that fits one check may fall in a full stretch of another), and
-- the check that set it.
local function fit()
  local at, by = counterAt, 0
  for _, i in ipairs(counters) do
    if now + retries[i] == counterAt and counterAt > now and by == 0 then
      by = i
    end
  end
  for _, i in ipairs(logs) do
    own[i] = earliest(i, now)
    retries[i] = own[i] - now
    if own[i] > at then
      at, by = own[i], i
    end
  end
  local settled = true
  for _, i in ipairs(logs) do
    if own[i] < at then
      settled = false
    end
  end
  if not settled then
    -- fitted[i] is a time known to fit log check i: at, once it is, needs
    -- no search again.
    local rounds, fitted = 0, own
    local moved = true
    while moved and rounds < 8 do
      moved, rounds = false, rounds + 1
      for _, i in ipairs(logs) do
        if fitted[i] ~= at then
          local fit = earliest(i, at)
          fitted[i] = fit
          if fit > at then
            at, by, moved = fit, i, true
          end
        end
      end
    end
    if moved then
      -- Not settled: the tails fit every log check at once.
      for _, i in ipairs(logs) do
        local fit = tail(i)
        if fit > at then
          at, by = fit, i
        end
      end
    end
  end
  return at, by
end

-- beyondLease tells whether time `at` lies past what a
-- leased check may place (docs/SCALING.md, "First come, first served over
-- shards"): its lease is worth less than its cost, or `at` is more than
-- one window ahead of now, where the share of the day is not known. Then
-- the caller takes no place, and is told to come back in a balancer
-- period, or, when the checks that are not leased alone put it past that
-- window, once they no longer do, naming the one that does. It returns
-- the first such leased check (nil when none), the wait, and the check
-- that set it; each such check's retry is capped at the period.
local function beyondLease(at)
  local far, horizon = nil, nil
  for _, i in ipairs(logs) do
    if leased[i] and (limits[i] < costs[i] or at > now + windows[i]) then
      far = far or i
      retries[i] = math.min(retries[i], leaseRetry)
    end
    if leased[i] then
      horizon = math.min(horizon or windows[i], windows[i])
    end
  end
  if not far then
    return nil
  end
  local alone, aloneBy = now, 0
  for _, i in ipairs(counters) do
    if now + retries[i] > alone then
      alone, aloneBy = now + retries[i], i
    end
  end
  for _, i in ipairs(logs) do
    -- retries[i], not own[i]: fit's rounds write own[i] over with times
    -- made to fit the other checks too.
    if not leased[i] and now + retries[i] > alone then
      alone, aloneBy = now + retries[i], i
    end
  end
  if alone - now > horizon + leaseRetry then
    return far, alone - now - horizon, aloneBy
  end
  return far, leaseRetry, far
end
