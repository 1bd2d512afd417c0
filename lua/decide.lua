--[[
decide.lua: one decision over one or more checks, all or nothing (Allow,
AllowMulti, line mode); peek.lua looks without recording.

A check of the sliding-window log ('sliding-log') keeps a sorted set with one
member per unit of cost, scored by its time in microseconds of the Redis
clock (TIME): admissions at the time they were admitted, and, in line mode,
places reserved for denied callers at the time they will be admitted. A
member counts in every window (t - window, t] that holds its score. The
scripts keep one invariant: no window of any length-`window` span holds more
than `limit` members. A member leaves the set once its score is a window old.

Checks of the other algorithms ('sliding-window', 'gcra', 'fixed-window') keep
a counter of a few integers (see counters.lua, which is included in this
script and defines counter_check and counter_record). They reserve nothing.

A request is admitted now when every check has room now: counting future
places too, so that a place, once given, is kept. Otherwise each log check
finds the earliest time at or after now at which the request fits, and the
request's time is the latest of them and of the counters' retry times (made
to fit every log check at once).

In line mode (ARGV[1] = "2") a denied caller takes its place: a member named
"@<id>#<j>" at that time in every log check. When it comes back:
  - before its place: it is told the time left ("early"); nothing changes;
  - at its place, or up to `tolerance` after it: it is admitted as of its
    place, if the counters allow it now; the member is renamed, keeping its
    score;
  - later than that, or with its place in only some of the log checks (a
    window pruned it, a key was reset): its places are dropped and it is
    placed again as a new caller.
A place whose caller never comes back takes its slot, and leaves with it.

The search for a place keeps a note beside each log, its frontier: the
string key <prefix>{<group>}p:<body> (the log's key with 'p' after the hash
tag) holds "F:limit:window", and says that no time in [now, F) fits one unit
in the log under that limit and window. Adding members and pruning keep it
true; whatever removes a member ahead of now (a caller placed again, a grant
taken back in the fair lines, Reset) deletes it. A search starts at F when the
note applies, and writes how far it proved the log full (docs/LIMITER.md,
"Places in line, and the frontier").

KEYS[i]      key of check i, i = 1 .. n (all in one hash slot)
KEYS[n+i]    the frontier note of check i: its key with 'p' after the hash
             tag (read and written for a log check only)
KEYS[2n+j]   the leases of the leased checks, if any (a log's key with 'e'
             after the hash tag, a cap's with 'e' for its 'i';
             docs/SCALING.md, "First come, first served over shards"): such
             a check's limit is what its lease is worth (lease_worth.lua;
             a cap worth no slot, free of holders, is asked again in a
             balancer period); a caller that would be placed more than one
             window ahead of now in it, or whose lease is worth less than
             its cost, takes no place, and is told to come back in a
             balancer period, or, when the checks that are not leased put
             its time past that window by themselves, once they no longer
             do, naming the one that does (peek.lua answers alike).
ARGV[1]      "1": record the admission when every check allows (Allow)
             "2": as "1", and a denied caller takes a place (line mode)
             (peek.lua: "0" record nothing, only look (Peek); "3" as "0",
             and the reply counts the places in line (Usage))
ARGV[2]      caller id (line mode, or a 'concurrency' check), else ""
ARGV[3]      tolerance in microseconds (line mode), else 0
ARGV[4i]     limit of check i: most units in any window
ARGV[4i+1]   window of check i, in microseconds
ARGV[4i+2]   cost of check i, in units, 1 <= cost <= limit
ARGV[4i+3]   algorithm of check i: 'sliding-log', 'sliding-window', 'gcra',
             'fixed-window' or 'concurrency' (an in-flight cap, whose slot
             is named by the caller id: ARGV[2] in every mode; a caller
             it refuses takes no place, and is told the time until its
             first slot lapses)
             n = (#ARGV - 3) / 4

Reply, short, for the common admission (ARGV[1] = "1" or "2", every check a
sliding log of cost 1, admitted, none holding a place ahead of now, and in
line mode the caller holding no place in the first check):
             an array of n + 1 integers: the count of each check after this
             decision ([4i-1] below), and the time of the admission (the
             Redis clock, in microseconds); the reset-after of each is its
             window, as the newest member is this admission
Reply, full, in every other case: an array of 5 + 4n integers
  [1]        1 when the request was admitted (recorded unless ARGV[1] = "0"),
             else 0
  [4i-2]     1 when check i alone has room now, else 0
  [4i-1]     units of check i counted after this decision, places included
  [4i]       retry-after of check i alone, in microseconds: 0 when it has
             room now, else the time until the earliest time it would have
             room if nothing else were admitted (for a log check, counting
             the places of others); a leased check that refuses a place,
             at most a balancer period
  [4i+1]     reset-after of check i in microseconds: time until its key holds
             nothing that limits
  [4n+2]     denied: microseconds until the request's time (in line mode, its
             place); else 0
  [4n+3]     denied: the check that set that time (1-based); else 0
  [4n+4]     line mode: 1 when the caller came back before its place (nothing
             changed), else 0
  [4n+5]     admitted: the time its log entries stand at, in microseconds
             (now, or its place when admitted as of it); else 0
Error reply, with nothing written: a log whose newest member's score is not
a time in microseconds (+inf, or 2^53 and beyond) is damaged, and the
reply names its key and that score.
With ARGV[1] = "3" the reply has 2n more integers before the last, 5 + 6n
in all:
  [4n+3+2i]  places in line of check i: its members scored after now (0 for a
             counter check); [4i-1] counts them too
  [4n+4+2i]  of those, the ones scored at most one window after now
]]
-- #include logs_head.lua

-- admit records cost units of the log at key, which holds count members,
-- at now. Members must be unique even when many units land in one
-- microsecond. They are named after the stamp and the count before this
-- call, which only grows within one microsecond for one window. A key
-- called with two windows in one microsecond can repeat a name: ZADD NX
-- refuses it, and the refused units are named after the number of members
-- at this score instead, marked 'z' so the two kinds never meet.
local function admit(key, count, cost)
  local refused = 0
  if cost == 1 then
    refused = 1 - redis.call('ZADD', key, 'NX', now, stamp .. count)
  else
    local done = 0
    while done < cost do
      local args = {'NX'}
      local batch = math.min(cost - done, 500)
      for j = 1, batch do
        args[2 * j] = now
        args[2 * j + 1] = stamp .. (count + done + j - 1)
      end
      refused = refused + batch - redis.call('ZADD', key, unpack(args))
      done = done + batch
    end
  end
  -- The number at this score can fall within a microsecond (a caller's
  -- place there dropped), so a 'z' name is added NX too, and the next
  -- number tried when it is taken.
  if refused > 0 then
    local seq = redis.call('ZCOUNT', key, now, now)
    while refused > 0 do
      refused = refused - redis.call('ZADD', key, 'NX', now, stamp .. 'z' .. seq)
      seq = seq + 1
    end
  end
end

-- The common cases first, before anything else is set up: Allow or line
-- mode, every check a sliding log asked for one unit.
--   - Each with room now for all it holds (places too) and this request,
--     and no place of this caller to claim: admitted. The reply is short
--     when no check holds a place ahead of now: the counts alone (see the
--     header).
--   - Allow, some check full, and no check holding a place ahead of now
--     (newest[i], read here, is the newest member's score): denied. With
--     nothing ahead, a full check frees a unit when the member at index
--     count - limit leaves the window, a check with room keeps it, and the
--     latest of those times fits every check (the rest of the script would
--     find the same). Every key's TTL is set again, so that a changed
--     window applies.
if mode == '1' or mode == '2' then
  local eligible = true
  for i = 1, n do
    if ARGV[4 * i + 3] ~= 'sliding-log' or ARGV[4 * i + 2] ~= '1' or limits[i] < 1 then
      eligible = false
      break
    end
  end
  local room = eligible
  if eligible then
    for i = 1, n do
      redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - ARGV[4 * i + 1])
      counts[i] = redis.call('ZCARD', KEYS[i])
      if counts[i] >= limits[i] then
        room = false
      end
    end
    if room and mode == '2' and redis.call('ZSCORE', KEYS[1], '@' .. ARGV[2] .. '#1') then
      room = false
    end
  end
  if room then
    -- The key goes shortly after its newest member leaves the window: this
    -- admission, or a place ahead, read before any check is written (a
    -- damaged one stops the script).
    local ahead, resets = nil, {} -- reset-after: of the checks with a place ahead, of all
    for i = 1, n do
      local key, window = KEYS[i], tonumber(ARGV[4 * i + 1])
      resets[i] = window
      if counts[i] > 0 and redis.call('ZCOUNT', key, now + 1, '+inf') > 0 then
        local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
        resets[i] = score(key, last[2]) + window - now
        ahead = ahead or {}
        ahead[i] = resets[i]
      end
    end
    for i = 1, n do
      admit(KEYS[i], counts[i], 1)
      counts[i] = counts[i] + 1
      redis.call('PEXPIRE', KEYS[i], math.floor(resets[i] / 1000) + 1)
    end
    if not ahead then
      counts[n + 1] = now
      return counts
    end
    local full = {1}
    for i = 1, n do
      full[4 * i - 2], full[4 * i - 1], full[4 * i], full[4 * i + 1] = 1, counts[i], 0, ahead[i] or tonumber(ARGV[4 * i + 1])
    end
    full[4 * n + 2], full[4 * n + 3], full[4 * n + 4], full[4 * n + 5] = 0, 0, 0, now
    return full
  end
  if eligible and mode == '1' then
    local plain = true
    for i = 1, n do
      newest[i] = false
      if counts[i] > 0 then
        local e = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
        newest[i] = score(KEYS[i], e[2])
        plain = plain and newest[i] <= now
      end
    end
    if plain then
      local denial, at, by = {0}, now, 0
      for i = 1, n do
        local key, limit, window = KEYS[i], limits[i], tonumber(ARGV[4 * i + 1])
        local retry, reset = 0, 0
        if counts[i] >= limit then
          local e = redis.call('ZRANGE', key, counts[i] - limit, counts[i] - limit, 'WITHSCORES')
          retry = tonumber(e[2]) + window - now
          if now + retry > at then
            at, by = now + retry, i
          end
        end
        if newest[i] then
          reset = newest[i] + window - now
          redis.call('PEXPIRE', key, math.floor(reset / 1000) + 1)
        end
        denial[4 * i - 2], denial[4 * i - 1], denial[4 * i], denial[4 * i + 1] = retry == 0 and 1 or 0, counts[i], retry, reset
      end
      denial[4 * n + 2], denial[4 * n + 3], denial[4 * n + 4], denial[4 * n + 5] = at - now, by, 0, 0
      return denial
    end
  end
end

-- #include counters.lua
-- #include logs_search.lua

-- record admits the request now in every check.
local function record()
  for _, i in ipairs(logs) do
    admit(KEYS[i], counts[i], costs[i])
    counts[i] = counts[i] + costs[i]
    wrote(i, now)
  end
  for _, i in ipairs(counters) do
    counts[i], resets[i] = counter_record(algs[i], KEYS[i], limits[i], windows[i], costs[i], now, states[i], id)
  end
end

-- A caller in line that comes back.
if mode == '2' and #logs > 0 then
  -- A caller without a place in the first log check is taken as a new
  -- one, without looking at the others: a place left in another (the first
  -- key was reset) counts in its search, as an abandoned place does, and
  -- then moves to the place it is given.
  local place, same, found = nil, true, 0
  for _, i in ipairs(logs) do
    local s = redis.call('ZSCORE', KEYS[i], '@' .. id .. '#1')
    if not s and found == 0 then
      break
    end
    if s then
      found = found + 1
      s = tonumber(s)
      if place and place ~= s then
        same = false
      end
      place = place or s
    end
  end
  if found == #logs and same and place > now then
    for _, i in ipairs(logs) do
      retries[i] = place - now
    end
    settle()
    return finish(0, place - now, 0, 1, 0)
  end
  if found == #logs and same and now - place <= tolerance and counterAt == now then
    for _, i in ipairs(logs) do
      retries[i] = 0
      for j = 1, costs[i] do
        local member = '@' .. id .. '#' .. j
        redis.call('ZREM', KEYS[i], member)
        redis.call('ZADD', KEYS[i], place, num(place) .. '-c' .. id .. '#' .. j)
      end
    end
    for _, i in ipairs(counters) do
      counts[i], resets[i] = counter_record(algs[i], KEYS[i], limits[i], windows[i], costs[i], now, states[i], id)
    end
    settle()
    return finish(1, 0, 0, 0, place)
  end
  if found > 0 then
    -- Late, or its places do not agree: placed again as a new caller.
    for _, i in ipairs(logs) do
      local members = {}
      for j = 1, costs[i] do
        members[j] = '@' .. id .. '#' .. j
      end
      local gone = redis.call('ZREM', KEYS[i], unpack(members))
      counts[i] = counts[i] - gone
      newest[i] = nil
      if gone > 0 then
        forget(i) -- a window holds one member fewer
      end
    end
  end
end

local at, by = fit()
if at == now then
  if not look then
    record()
  end
  settle()
  return finish(1, 0, 0, 0, look and 0 or now)
end

-- A full cap takes no place: no time is known at which a slot frees (a
-- release may come at any time), and a place would hold the logs' slots.
for _, i in ipairs(counters) do
  if algs[i] == 'concurrency' and retries[i] > 0 then
    settle()
    return finish(0, retries[i], i, 0, 0)
  end
end

local far, wait, farBy = beyondLease(at)
if far then
  settle()
  return finish(0, wait, farBy, 0, 0)
end

if mode == '2' and #logs > 0 then
  for _, i in ipairs(logs) do
    local args = {}
    for j = 1, costs[i] do
      args[2 * j - 1] = at
      args[2 * j] = '@' .. id .. '#' .. j
    end
    -- A place of this caller left in a log whose first check lost it (a
    -- key reset, a shorter window) moves here: it no longer holds its
    -- old time, and the note may no longer hold.
    local added = redis.call('ZADD', KEYS[i], unpack(args))
    counts[i] = counts[i] + added
    if added < costs[i] then
      forget(i)
    end
    wrote(i, at)
  end
end
settle()
return finish(0, at - now, by, 0, 0)
