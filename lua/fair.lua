--[[
fair.lua: fair lines of waiting tasks, and the grants of slots to them
(docs/FAIRNESS.md).

A flow is the waiting tasks of one class (a task type), one priority level
(1, most urgent, to 5) and one tenant, first in first out. Flows compete for
the shared rules of their class by start-time fair queueing: the ready flow
with the smallest start tag S whose head task fits every rule is given the
next slot; its finish tag becomes S + 1/weight, the start of its next task.
A slot is given as a grant: a place at time p in every sliding log of the
task's rules, p at most `lead` after now. Places keep allow.lua's invariant
(no span of one window holds more than the limit): a member is added only
when the members scored after p - window, places included, leave room.

Every key is <base>q...: <base> is the limiter's prefix and hash tag
("sluice:{limits}"), so this script shares a slot with the windows it
writes, and 'q' after the tag is a kind of key no window uses.
  <base>q:<c>          hash   per level l: v<l> virtual time, r<l> credit
  <base>qr:<c>:<l>     zset   ready flows (tenant) by start tag
  <base>qb:<c>         zset   blocked flows ("<l>:<tenant>") by end of block
  <base>ql:<c>:<l>:<t> list   the flow's waiting tasks: "<#queue>:<queue><id>"
  <base>qf:<c>:<l>:<t> hash   f: finish tag, w: weight, r: rules (JSON)
  <base>qt             hash   task id -> JSON {s = 'W' waiting | 'G' granted,
                              c, l, t, q, p (place), S (start tag), r (SHA-1
                              of the rules the grant was given under)}
  <base>qg             zset   granted task ids by place
  <base>qw             zset   classes with waiting flows, by when to look
  <base>qn:<c>:<b>     hash   grants per tenant in share span b (now / span),
                              for the status page; lives three spans
  <base>qe             list   the entrance: tasks parked at enqueue, JSON
                              {c, l, t, q, id, at}, until a dispatch step
                              puts them in their lines
  <base>qd             string the entrance's heartbeat: a loop takes it in

A rule is {k = Redis key, l = limit, w = window us, c = cost, a = algorithm,
s = shared (1) or the tenant's own (0)}. Counter rules (not 'sliding-log')
reserve nothing: they are checked now and recorded when the grant is given.

KEYS[1]   any key of the hash tag, for routing: <base>qw
ARGV[1]   'arrive', 'dispatch', 'drop', 'granted', 'refresh', 'wake' or
          'waiting'
ARGV[2]   base
ARGV[3]   lead, us: how far ahead a parked task is given a place, at
          first (a class then learns its lead from the deliveries)
ARGV[4]   tolerance, us: how late after its place a granted task may come
ARGV[5]   most grants per class in one call
ARGV[6]   reserve: the share of grants, in percent, owed to each waiting
          level less urgent than the one served
ARGV[7]   late, us: how late after its place a granted task may still
          claim it (its place then moves to the time it comes, when every
          log allows that); an unclaimed grant is taken back after it
arrive only: a task at a worker
ARGV[8]   class      ARGV[9]  level      ARGV[10]  tenant
ARGV[11]  weight     ARGV[12] queue      ARGV[13] task id
ARGV[14]  rules, JSON array of rules as above
ARGV[15+5i] .. ARGV[19+5i]  (i = 0, 1, ...)
          the same rules flat (key, limit, window us, cost, shared 1 or
          0), given only when every rule is a sliding log: the common
          cases read them without decoding the JSON
dispatch only: tasks parked at enqueue, read from the entrance, that
          this step puts in their lines first (docs/FAIRNESS.md, "Parked at
          enqueue")
ARGV[8]   JSON array of {c = class, l = level, t = tenant, q = queue,
          id = task id, w = weight, r = rules (JSON as in ARGV[14])};
          without r, the task is not limited by the rules in force and is
          released (replied as a grant, to be moved to the front of its
          queue), as is one whose flow's keys fail; without c, its entry
          is not a task and only goes; with s (stale: its task comes back
          by itself), it only goes
ARGV[9+i] the entry of the i-th (from 0) as read, removed from the
          entrance by value: a step that finds it gone (another took it)
          skips it
drop only: a task that no longer exists
ARGV[8]   task id
granted only: whether a task holds a grant not yet claimed (outcome 1)
ARGV[8]   task id
waiting only: the waiting flows, with their lines and recent grants
ARGV[8]   at most this many; the reply's qi, idi are then sextuples (class,
          level, tenant, tasks in line, weight, grants to the tenant in the
          class over the last one to two share spans), and the 4th value
          of the reply is the share span, us
refresh only: new rules for waiting flows (a policies reload); their
          classes are looked at by the next call (they may have room)
ARGV[8]   JSON array of {c = class, l = level, t = tenant, w = weight,
          r = the rules, JSON as in ARGV[14]}
wake only: a class whose rules may have room the lines did not make (a
          window reset by hand), looked at by the next call
ARGV[8]   class

Reply: the bare integer 1 for the most common call, an arrival admitted at
once by the first case below (as {1, 0, -1, 0}); otherwise
       {outcome, wait, wake, by, q1, id1, q2, id2, ...}
  outcome  arrive: 1 admitted now; 2 given a place `wait` us from now (the
           worker waits, then sends: the place is recorded); 3 parked
           (wait 0). dispatch and drop: 0
  wake     dispatch: us from now until the next call may give a grant;
           -1: nothing waits. Other modes: -1
  by       parked: the rule (1-based, in ARGV[14]) it waits for: the one
           that frees last, or the first shared one; else 0
  qi, idi  tasks given a grant that wait parked in asynq: the caller moves
           each to the front of its queue; a pair whose qi is "" says, in
           idi, what Redis refused in a flow or class this call skipped
           (a damaged key: see `damaged` below)
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode, base = ARGV[1], ARGV[2]
local kwake, ktasks, kgrants = base .. 'qw', base .. 'qt', base .. 'qg'
local tolerance = tonumber(ARGV[4])
local late = math.max(tolerance, tonumber(ARGV[7]))

-- The most common call first, before anything else is set up: the arrival
-- of a task new to the lines (no entry) whose rules are all sliding logs
-- (given flat, ARGV[15..]), in a class where nothing waits, while no grant
-- has lapsed (the rest of the script takes lapsed grants back before it
-- decides, and their tasks, back at the head of their flows, go first).
-- It is admitted now if every log has room now, places counted: pruned, a
-- log's ZCARD counts exactly the members after now - window, as ZCOUNT
-- would. A log that held members has a TTL (every writer sets one), so
-- PEXPIRE GT keeps one that a place ahead needs, and a fresh key gets its
-- own: the key goes once this admission has left the window, or later.
-- Its members are named '<seconds>.<microseconds>-c<id>#j' (nothing looks
-- an admission up by name). The reply is a bare 1. The task's entry and
-- its class's wake time, read here, serve the rest of the script.
local arrival, wake
if mode == 'arrive' then
  local c, id = ARGV[8], ARGV[13]
  arrival = redis.call('HGET', ktasks, id)
  if not arrival and ARGV[15] then
    wake = redis.call('ZSCORE', kwake, c)
  end
  if not arrival and ARGV[15] and not wake and
    redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
    local fits, counts = true, {}
    for i = 15, #ARGV, 5 do
      local k = ARGV[i]
      redis.call('ZREMRANGEBYSCORE', k, '-inf', now - ARGV[i + 2])
      counts[i] = redis.call('ZCARD', k)
      if counts[i] + ARGV[i + 3] > tonumber(ARGV[i + 1]) then
        fits = false
        break
      end
    end
    if fits then
      local member = t[1] .. '.' .. t[2] .. '-c' .. id .. '#'
      for i = 15, #ARGV, 5 do
        local k, cost = ARGV[i], tonumber(ARGV[i + 3])
        if cost == 1 then
          redis.call('ZADD', k, now, member .. 1)
        else
          local args = {}
          for j = 1, cost do
            args[2 * j - 1], args[2 * j] = now, member .. j
          end
          redis.call('ZADD', k, unpack(args))
        end
        local ttl = math.floor(ARGV[i + 2] / 1000) + 1
        if counts[i] == 0 then
          redis.call('PEXPIRE', k, ttl)
        else
          redis.call('PEXPIRE', k, ttl, 'GT')
        end
      end
      return 1
    end
  end
end

-- nextWake returns the microseconds from now until some class or grant
-- needs a call (0: one does now), or -1 when nothing waits.
local function nextWake()
  local w = redis.call('ZRANGE', kwake, 0, 0, 'WITHSCORES')
  local g = redis.call('ZRANGE', kgrants, 0, 0, 'WITHSCORES')
  local at = nil
  if w[2] then
    at = tonumber(w[2])
  end
  if g[2] then
    at = math.min(at or math.huge, tonumber(g[2]) + late + 1)
  end
  if not at then
    return -1
  end
  return math.max(0, at - now)
end

-- The most common dispatch next, before the rest is set up: nothing
-- entering, no class due and no grant lapsed (the other loops' calls
-- between two slots). It only says when to call again.
if mode == 'dispatch' and not ARGV[8] then
  local wake = nextWake()
  if wake ~= 0 then
    return {0, 0, wake, 0}
  end
end

local startLead = tonumber(ARGV[3])
local most, reserve = tonumber(ARGV[5]), tonumber(ARGV[6])
local levels = 5
-- A flow's hash (its finish tag, weight and rules) goes a day after it was
-- last written, by an arrival, a grant or a take-back: a tenant that stops
-- waiting leaves nothing behind, and one that comes back starts afresh.
local flowTTL = 86400000
local scan = 16 -- flows of a level looked at in one pick
-- A step gives a shared rule's places up to `batch` beyond the lead, so
-- that a fast rule's slots are given a few at a call, not one a call
-- (at most 50 calls a second that give grants, whatever the rate).
local batch = 20000

-- The few helpers the other common case below shares with the rest:
-- every other function is defined after them, so that it does not pay
-- for them.
local function num(x) return string.format('%d', x) end
local function kready(c, l) return base .. 'qr:' .. c .. ':' .. l end
local function kline(c, l, tn) return base .. 'ql:' .. c .. ':' .. l .. ':' .. tn end
local function kflow(c, l, tn) return base .. 'qf:' .. c .. ':' .. l .. ':' .. tn end
-- A line holds entries "<length of the queue>:<queue><task id>".
local function entry(q, id) return #q .. ':' .. q .. id end

-- logFree returns the earliest time at or after `at` at which sliding log
-- k (limit, window w) has room for cost, counting every member (places
-- too); k is pruned up to now - w.
local function logFree(k, limit, w, cost, at)
  local over = redis.call('ZCOUNT', k, '(' .. num(at - w), '+inf') + cost - limit
  if over <= 0 then
    return at
  end
  local m = redis.call('ZRANGE', k, '(' .. num(at - w), '+inf', 'BYSCORE', 'LIMIT', over - 1, 1, 'WITHSCORES')
  local p = tonumber(m[2])
  if not (p < 2 ^ 53) then
    -- +inf (or past the year 2255) is no time: damage, not a wait forever.
    error({err = 'ERR damaged log ' .. k .. ': a member scored ' .. m[2] .. ', not a time in microseconds'})
  end
  return math.max(at, p + w)
end

-- The other common arrival comes next, before the rest of the script is
-- set up: a task new to the lines, its rules all sliding logs, whose class
-- waits, while no grant has lapsed (as above). Otherwise the rest of the
-- script decides, with the task's entry read above.
if wake and tonumber(wake) > now and redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
  local c, id = ARGV[8], ARGV[13]
  -- Its class waits and is not due before `wake` (the last step found
  -- no slot to give before then, and anything that frees one sooner
  -- makes it due now). If its tenant's flow is ready but not first of
  -- its level, and the flow's weight and rules are
  -- the ones the task brings, the rest of the script would only append
  -- it to the flow and park it: the step gives no slot, take-over needs
  -- the flow's head, and the flow's tags do not change. So that is done
  -- here, the flow's life renewed, and the reply names the rule it waits
  -- for as the rest would (the one that frees last, or the first shared
  -- one).
  local l, tn = tonumber(ARGV[9]), ARGV[10]
  local kr, kf = kready(c, l), kflow(c, l, tn)
  if redis.call('ZSCORE', kr, tn) and redis.call('ZRANGE', kr, 0, 0)[1] ~= tn then
    local h = redis.call('HMGET', kf, 'w', 'r')
    if h[2] == ARGV[14] and tonumber(h[1]) == tonumber(ARGV[11]) then
      local queue = ARGV[12]
      redis.call('RPUSH', kline(c, l, tn), entry(queue, id))
      redis.call('HSET', ktasks, id, cjson.encode({s = 'W', c = c, l = l, t = tn, q = queue}))
      redis.call('PEXPIRE', kf, flowTTL)
      local by, latest, j = 0, now, 0
      for i = 15, #ARGV, 5 do
        j = j + 1
        local k, w = ARGV[i], tonumber(ARGV[i + 2])
        redis.call('ZREMRANGEBYSCORE', k, '-inf', now - w)
        local x = logFree(k, tonumber(ARGV[i + 1]), w, tonumber(ARGV[i + 3]), now)
        if x > latest or (by == 0 and ARGV[i + 4] == '1') then
          by, latest = j, math.max(latest, x)
        end
      end
      return {3, 0, -1, by}
    end
  end
end

local function tag(x) return string.format('%.17g', x) end

-- expire makes log key k live until its member at p has left the window.
local function expire(k, w, p)
  local need = math.floor((p + w - now) / 1000) + 1
  if redis.call('PTTL', k) < need then
    redis.call('PEXPIRE', k, need)
  end
end

local function kclass(c) return base .. 'q:' .. c end
local function kblocked(c) return base .. 'qb:' .. c end
-- Grants are counted per tenant and class in spans of shareSpan, so that
-- the status page can show each waiting tenant's share of the last ones.
local shareSpan = 5000000
local function kshares(c, b) return base .. 'qn:' .. c .. ':' .. b end

local function unentry(e)
  local n, rest = string.match(e, '^(%d+):(.*)$')
  n = tonumber(n)
  return {q = string.sub(rest, 1, n), id = string.sub(rest, n + 1)}
end

local countersReady = false
local function counters()
  if not countersReady then
    define_counters()
    countersReady = true
  end
end

local leadOf -- defined below, with the lead's learning

local pruned = {}
-- free returns the earliest time at or after `at` at which rule r has room
-- for its cost, counting every member (places included). A counter rule is
-- asked now: room now counts as room at `at`.
local function free(r, at, c)
  if r.a == 'sliding-log' then
    if not pruned[r.k] then
      redis.call('ZREMRANGEBYSCORE', r.k, '-inf', now - r.w)
      pruned[r.k] = true
    end
    return logFree(r.k, r.l, r.w, r.c, at)
  end
  -- A counter reserves nothing and is recorded now (record): it counts as
  -- room only when it allows now. Denied, it has room `retry` from now;
  -- the time is put a lead later, so that the flow (or, for a shared
  -- rule, the class) waits until then to be looked at again.
  counters()
  local allowed, _, retry = counter_check(r.a, r.k, r.l, r.w, r.c, now)
  if allowed == 1 then
    return at
  end
  return math.max(at, now + retry + leadOf(c))
end


-- record writes task id's units into every rule at p: as a place ('@id#j',
-- which a worker of the previous release also reads as its place) or, when
-- `taken`, as an admission of that task ('<p>-c<id>#j').
local function record(rules, id, p, taken)
  for _, r in ipairs(rules) do
    if r.a == 'sliding-log' then
      local args = {}
      for j = 1, r.c do
        args[2 * j - 1] = p
        if taken then
          args[2 * j] = num(p) .. '-c' .. id .. '#' .. j
        else
          args[2 * j] = '@' .. id .. '#' .. j
        end
      end
      redis.call('ZADD', r.k, unpack(args))
      expire(r.k, r.w, p)
    else
      counters()
      local _, _, _, _, state = counter_check(r.a, r.k, r.l, r.w, r.c, now)
      counter_record(r.a, r.k, r.l, r.w, r.c, now, state)
    end
  end
end

-- forgetFrontier deletes the frontier note that allow.lua keeps beside
-- log k (the log's key with 'p' after its hash tag): a member that windows
-- ending from now on counted has left, and the note may no longer hold.
local function forgetFrontier(k)
  local e = string.find(k, '}[^}]*$')
  if e then
    redis.call('DEL', string.sub(k, 1, e) .. 'p' .. string.sub(k, e + 1))
  end
end

-- unplace removes task id's places from the log rules, or, given `claim`
-- (its place, or now, later), turns them into its admission at that time.
-- It reports whether some log rule had lost them. A place moved later
-- stays in every window ending from now on that held it; one removed
-- leaves them.
local function unplace(rules, id, claim)
  local lost = false
  for _, r in ipairs(rules) do
    if r.a == 'sliding-log' then
      local removed = false
      for j = 1, r.c do
        if redis.call('ZREM', r.k, '@' .. id .. '#' .. j) == 0 then
          lost = true
        elseif claim then
          redis.call('ZADD', r.k, claim, num(claim) .. '-c' .. id .. '#' .. j)
        else
          removed = true
        end
      end
      if removed then
        forgetFrontier(r.k)
      end
      if claim == now then
        expire(r.k, r.w, now) -- moved later than the place it lived for
      end
    end
  end
  return lost
end

-- movable reports whether the places at p of a task that comes after p may
-- move to now in every log rule: its member is then in the windows ending in
-- [p + window, now + window) that it was not in before, and those hold no
-- members but the ones scored in (p, now + window). A counter rule was
-- recorded when the grant was given, and stays.
local function movable(rules, p)
  for _, r in ipairs(rules) do
    if r.a == 'sliding-log' then
      if now >= p + r.w or redis.call('ZCOUNT', r.k, '(' .. num(p), '(' .. num(now + r.w)) + r.c > r.l then
        return false
      end
    end
  end
  return true
end

-- Flows, read once a call.
local flows = {}
local function flow(c, l, tn)
  local k = kflow(c, l, tn)
  local f = flows[k]
  if not f then
    local h = redis.call('HMGET', k, 'f', 'w', 'r')
    f = {c = c, l = l, tn = tn, key = k, f = tonumber(h[1]) or 0, w = tonumber(h[2]) or 1,
      rules = h[3] and cjson.decode(h[3]) or {}, raw = h[3] or '', known = h[3] ~= nil}
    flows[k] = f
  end
  return f
end

local function vtime(c, l)
  return tonumber(redis.call('HGET', kclass(c), 'v' .. l)) or 0
end

-- The lead of a class: how far ahead of now a parked task of it is given
-- its place. It starts at ARGV[3] and learns from the deliveries (a granted
-- task's time from its grant to its worker, timed when it comes; a grant
-- taken back for a task that never comes teaches nothing): a delivery
-- slower than the lead raises it by an eighth of the gap, a faster one
-- lowers it by an eighth, so that it follows the median delivery. Early,
-- a task holds a worker until its place; late, it is sent at once and its
-- place moves to then when the windows allow it (movable): its slot is
-- spent a little late, not lost. It stays within minLeadFloor and 2 s.
local maxLead, minLeadFloor = 2000000, 1000
local leads = {}
leadOf = function(c)
  if not leads[c] then
    leads[c] = tonumber(redis.call('HGET', kclass(c), 'lead')) or startLead
  end
  return leads[c]
end

local function learn(c, delivery)
  if delivery > 2 * maxLead then
    return -- a stale sample (its task came back from a long park): not a delivery
  end
  local lead = leadOf(c)
  if delivery > lead then
    lead = lead + math.ceil((delivery - lead) / 8)
  else
    lead = lead - math.floor((lead - delivery) / 8)
  end
  lead = math.min(maxLead, math.max(minLeadFloor, lead))
  leads[c] = lead
  redis.call('HSET', kclass(c), 'lead', num(lead))
end

-- ready puts flow f among the ready ones of its level with start tag s.
local function ready(f, s)
  redis.call('ZADD', kready(f.c, f.l), tag(s), f.tn)
end

-- waiting makes flow f, which has a task in line, ready if it is neither
-- ready nor blocked: a flow that starts waiting again starts at
-- max(F, V), so time spent idle earns no credit.
local function waiting(f)
  if redis.call('ZSCORE', kready(f.c, f.l), f.tn) or redis.call('ZSCORE', kblocked(f.c), f.l .. ':' .. f.tn) then
    return
  end
  ready(f, math.max(f.f, vtime(f.c, f.l)))
  redis.call('ZADD', kwake, now, f.c)
end

-- takeBack undoes task id's grant g, which its task never claimed: its
-- places go, it returns to the head of its flow, and the flow's finish tag
-- goes back by the one grant.
local function takeBack(id, g)
  local f = flow(g.c, g.l, g.t)
  unplace(f.rules, id)
  redis.call('ZREM', kgrants, id)
  -- It keeps the time of the grant: should the task come after all, its
  -- delivery is timed from it.
  redis.call('HSET', ktasks, id, cjson.encode({s = 'W', c = g.c, l = g.l, t = g.t, q = g.q, g = g.g}))
  redis.call('LPUSH', kline(g.c, g.l, g.t), entry(g.q, id))
  f.f = math.max(0, f.f - 1 / f.w)
  redis.call('HSET', f.key, 'f', tag(f.f))
  redis.call('PEXPIRE', f.key, flowTTL)
  redis.call('ZREM', kready(f.c, f.l), f.tn)
  redis.call('ZREM', kblocked(f.c), f.l .. ':' .. f.tn)
  ready(f, math.max(tonumber(g.S), f.f))
  redis.call('ZADD', kwake, now, f.c)
end

-- reap takes back the grants whose place passed more than `late` ago.
local function reap()
  local lapsed = redis.call('ZRANGE', kgrants, '-inf', num(now - late - 1), 'BYSCORE', 'LIMIT', 0, most)
  for _, id in ipairs(lapsed) do
    local raw = redis.call('HGET', ktasks, id)
    if raw then
      -- A grant whose keys fail is left until they are repaired (its
      -- task, should it come, is refused by them itself).
      pcall(function() takeBack(id, cjson.decode(raw)) end)
    else
      redis.call('ZREM', kgrants, id)
    end
  end
end

-- unblock returns class c's flows whose block has ended to the ready ones.
local function unblock(c)
  local due = redis.call('ZRANGE', kblocked(c), '-inf', num(now), 'BYSCORE')
  for _, m in ipairs(due) do
    redis.call('ZREM', kblocked(c), m)
    local l, tn = string.match(m, '^(%d):(.*)$')
    local f = flow(c, tonumber(l), tn)
    ready(f, math.max(f.f, vtime(c, f.l)))
  end
end

-- The pace of a shared log: the place its lines gave last, kept in the
-- class's hash (field 'p' and the log's key). While the log is paced, its
-- next place is at least a slot interval (window / limit) after it, so no
-- two places given are closer than that, and no slot left unused is given
-- later in a burst (docs/FAIRNESS.md, "Pacing").
local paces = {}
local function pace(c, k)
  if paces[k] == nil then
    paces[k] = tonumber(redis.call('HGET', kclass(c), 'p' .. k)) or false
  end
  return paces[k]
end

local function advance(c, rules, p)
  for _, r in ipairs(rules) do
    if r.s == 1 and r.a == 'sliding-log' then
      local last = math.max(pace(c, r.k) or p, p)
      paces[r.k] = last
      redis.call('HSET', kclass(c), 'p' .. r.k, num(last))
    end
  end
end

-- earliest returns the earliest time at or after `at` at which every rule
-- of f fits: of its own rules, and of its shared ones. With `paced`, a
-- shared log that held a backlog back within its last two windows (full,
-- or by its pace: the time is kept in the class's hash, field 'f' and its
-- key) also waits for its pace (above). A log keeps the shape of a burst
-- (ten admissions at one instant leave it together a window later); paced,
-- its slots are given spread at the rule's rate, and the next one is never
-- more than a slot interval past the places given for a flow that starts
-- waiting. A rule with room to spare, such as a large daily quota, is not
-- paced.
local function earliest(f, at, paced)
  local own, shared = at, at
  for _, r in ipairs(f.rules) do
    local x = free(r, at, f.c)
    if r.s == 1 then
      if paced and r.a == 'sliding-log' then
        local field = 'f' .. r.k
        local full = tonumber(redis.call('HGET', kclass(f.c), field))
        local last = pace(f.c, r.k)
        if full and now - full <= 2 * r.w and last then
          x = math.max(x, last + math.floor(r.w / r.l))
        end
        if x > at then
          -- Full, or held back by its pace: a backlog still waits for it.
          redis.call('HSET', kclass(f.c), field, num(now))
        end
      end
      shared = math.max(shared, x)
    else
      own = math.max(own, x)
    end
  end
  return own, shared
end

-- shareOf is the reserve each less urgent level earns while n levels have
-- ready flows: the configured one, cut so that the levels below the most
-- urgent can never be owed every grant (at most 100 / n each).
local function shareOf(n)
  return math.min(reserve, math.floor(100 / n))
end

-- order returns the levels of class c with ready flows in the order they
-- are served (a level owed a grant by its reserve first, then the most
-- urgent), the ready levels, and the credits.
local function order(c)
  local owed, rest, credit = {}, {}, {}
  local h = redis.call('HGETALL', kclass(c))
  for i = 1, #h, 2 do
    credit[h[i]] = tonumber(h[i + 1])
  end
  for l = 1, levels do
    if redis.call('EXISTS', kready(c, l)) == 1 then
      rest[#rest + 1] = l
    end
  end
  local share = shareOf(#rest)
  for _, l in ipairs(rest) do
    if share > 0 and (credit['r' .. l] or 0) >= 100 - share then
      owed[#owed + 1] = l
    end
  end
  local all = {}
  for _, l in ipairs(owed) do
    all[#all + 1] = l
  end
  for _, l in ipairs(rest) do
    all[#all + 1] = l
  end
  return all, rest, credit
end

-- served updates the credits of class c after a grant to level l, in
-- hundredths of a grant: each ready level but the most urgent earns its
-- share (shareOf) for every grant to another level, and a level that has
-- 100 - share is served first, and spends it. So each gets exactly one
-- grant in 100 / share of all grants while it waits, however many levels
-- wait, and the most urgent level keeps at least as many.
local function served(c, l, readyLevels, credit)
  local share = shareOf(#readyLevels)
  for _, m in ipairs(readyLevels) do
    local k = 'r' .. m
    if m ~= l and m > readyLevels[1] then
      credit[k] = math.min(100, (credit[k] or 0) + share)
      redis.call('HSET', kclass(c), k, credit[k])
    elseif m == l and (credit[k] or 0) >= 100 - share then
      credit[k] = credit[k] - (100 - share)
      redis.call('HSET', kclass(c), k, credit[k])
    end
  end
end

-- grant gives the head task of flow f (start tag s) a place at p and moves
-- f's tags. It returns the task's queue and id, and whether it is `here`,
-- the task at the calling worker: its units are then recorded as admitted.
-- It advances the pace of f's shared logs, unless the slot is `swapped`
-- (taken over from another grant, on the pace already).
local function grant(f, s, p, here, swapped)
  local e = unentry(redis.call('LPOP', kline(f.c, f.l, f.tn)))
  local taken = e.id == here
  record(f.rules, e.id, p, taken)
  if not swapped then
    advance(f.c, f.rules, p) -- a slot taken over was on the pace already
  end
  if taken then
    redis.call('HDEL', ktasks, e.id)
  else
    -- Times go as text: cjson keeps 14 digits of a number. g is the time
    -- of the grant, from which its delivery is timed.
    -- r: the stored rules it was given under, which its claim checks
    -- against the rules in force.
    redis.call('HSET', ktasks, e.id, cjson.encode({s = 'G', c = f.c, l = f.l, t = f.tn, q = e.q, p = num(p), S = tag(s), g = num(now),
      r = redis.sha1hex(f.raw)}))
    redis.call('ZADD', kgrants, p, e.id)
  end
  redis.call('HSET', kclass(f.c), 'v' .. f.l, tag(s))
  -- HGET and HSET, not HINCRBY: the ACL of a Sluice user (docs/WORKERS.md)
  -- has no HINCRBY, and a worker of this release must run under it.
  local kn = kshares(f.c, math.floor(now / shareSpan))
  local n = (tonumber(redis.call('HGET', kn, f.tn)) or 0) + 1
  redis.call('HSET', kn, f.tn, n)
  if n == 1 then
    redis.call('PEXPIRE', kn, math.floor(3 * shareSpan / 1000))
  end
  f.f = s + 1 / f.w
  redis.call('HSET', f.key, 'f', tag(f.f))
  redis.call('PEXPIRE', f.key, flowTTL)
  if redis.call('LLEN', kline(f.c, f.l, f.tn)) > 0 then
    ready(f, f.f)
  else
    redis.call('ZREM', kready(f.c, f.l), f.tn)
  end
  return e.q, e.id, taken
end

-- pick returns the flow of class c to serve next, its start tag and the
-- place it would get; or nil and whether the shared rules are full (and
-- until when), and whether flows were blocked or dropped on the way.
-- Damage. A key that Redis refuses (of the wrong type) or that holds what
-- the script cannot read stops only what uses it: a flow whose keys fail
-- is set aside (blocked) for asideFor, a class whose keys fail waits as
-- long, and the reply says what was refused, so that the worker can say
-- it. `refusals` holds those messages.
local asideFor = 30000000
local refusals = {}

-- errText is the text of an error raised by a Redis command or by Lua.
local function errText(e)
  if type(e) == 'table' then
    return tostring(e.err)
  end
  return tostring(e)
end

-- culprit names the first key of flow (c, l, tn) of the wrong type, if any.
local function culprit(c, l, tn)
  local want = {[kline(c, l, tn)] = 'list', [kflow(c, l, tn)] = 'hash'}
  local ok, h = pcall(redis.call, 'HGET', kflow(c, l, tn), 'r')
  local ok2, rules = pcall(cjson.decode, ok and h or '[]')
  for _, r in ipairs(ok2 and type(rules) == 'table' and rules or {}) do
    if type(r) == 'table' and type(r.k) == 'string' then
      want[r.k] = r.a == 'sliding-log' and 'zset' or 'hash'
    end
  end
  for k, kind in pairs(want) do
    local got = redis.call('TYPE', k).ok
    if got ~= 'none' and got ~= kind then
      return 'key ' .. k .. ' is a ' .. got .. ', not a ' .. kind
    end
  end
end

-- damaged sets flow (c, l, tn) aside for asideFor, with what was refused.
local function damaged(c, l, tn, err)
  refusals[#refusals + 1] = culprit(c, l, tn) or
    ('the line of ' .. c .. ', level ' .. l .. ', tenant ' .. tn .. ': ' .. errText(err))
  redis.call('ZREM', kready(c, l), tn)
  redis.call('ZADD', kblocked(c), num(now + asideFor), l .. ':' .. tn)
end

local function pick(c, levelsInOrder, here)
  local lead = leadOf(c)
  local horizon = now + lead
  local changed = false
  for _, l in ipairs(levelsInOrder) do
    local rf = redis.call('ZRANGE', kready(c, l), 0, scan - 1, 'WITHSCORES')
    for i = 1, #rf, 2 do
      -- Every key a grant of the flow writes is read here first, guarded:
      -- one that Redis refuses (a damaged key) sets the flow aside, before
      -- anything of it is written, and the others are served.
      local ok, f = pcall(flow, c, l, rf[i])
      local err, head, own, shared = f, nil, nil, nil
      if ok then
        ok, head = pcall(redis.call, 'LINDEX', kline(c, l, f.tn), 0)
        err = head
      end
      if ok and head then
        local at = math.max(now, horizon - tolerance)
        if unentry(head).id == here then
          at = now
        end
        ok, own, shared = pcall(earliest, f, at, true)
        err = own
      end
      if not ok then
        damaged(c, l, rf[i], err)
        changed = true
      elseif not head then
        redis.call('ZREM', kready(c, l), f.tn)
        changed = true
      else
        -- (earliest above: a parked task needs a lead to reach a worker;
        -- the tolerance it may come late by is taken off, so that a step
        -- that runs a little after a slot came within the lead still gives
        -- that slot, not a later one; a task at a worker needs no time.)
        if not f.known then
          -- Its rules are gone (its hash expired): not given a slot blind;
          -- its next task to come brings them.
          own = now + lead + 60000000
        end
        if shared > horizon + batch and f.known then
          -- The class's shared rules are full until then, for every flow.
          return nil, shared, changed
        elseif own > horizon then
          redis.call('ZREM', kready(c, l), f.tn)
          redis.call('ZADD', kblocked(c), num(own - lead), l .. ':' .. f.tn)
          changed = true
        else
          return {f = f, s = tonumber(rf[i + 1]), p = math.max(own, shared)}
        end
      end
    end
  end
  return nil, nil, changed
end

-- step gives class c's slots up to now + lead to its ready flows, fairly,
-- at most `most` of them, and appends the grants of parked tasks to out.
-- `here` is the id of a task at the calling worker, which may be given a
-- place from now on. It returns the place of `here` (false when it got
-- none).
local function step(c, out, here)
  unblock(c)
  local lead = leadOf(c)
  local given, mine, wake, passes = 0, false, nil, 0
  while given < most and passes < 8 do
    local all, rest, credit = order(c)
    local chosen, full, changed = pick(c, all, here)
    if chosen then
      local q, id, taken = grant(chosen.f, chosen.s, chosen.p, here)
      served(c, chosen.f.l, rest, credit)
      given = given + 1
      if taken then
        mine = chosen.p
      else
        out[#out + 1] = q
        out[#out + 1] = id
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
  local b = redis.call('ZRANGE', kblocked(c), 0, 0, 'WITHSCORES')
  local any = b[2] ~= nil
  if any then
    wake = math.min(wake or math.huge, tonumber(b[2]))
  end
  for l = 1, levels do
    if any then
      break
    end
    any = redis.call('EXISTS', kready(c, l)) == 1
  end
  if not any then
    redis.call('ZREM', kwake, c)
  else
    redis.call('ZADD', kwake, num(math.max(now, wake or (now + lead))), c)
  end
  return mine
end

-- takeOver gives `here`, the task at the calling worker, the place of the
-- earliest grant not yet claimed that it is owed, when here's flow is the
-- first of its level, no more urgent level waits and here's flow holds no
-- grant ahead: a grant of a less urgent level of its class, or one of a
-- flow of its level that holds two or more of the grants ahead (the
-- places given within the lead, which a newcomer would otherwise wait
-- for). The bumped task returns to the head of its flow (takeBack) and is
-- given a place again when it comes; here is granted that place only if
-- each of its rules allows it there. With `unlessNear`, it first declines
-- when here's own next slot is within the tolerance (the step will give
-- it), once the cheap checks above have passed. It returns here's place,
-- or false, and whether it declined for a near slot.
local function takeOver(c, f, here, unlessNear)
  local head = redis.call('LINDEX', kline(c, f.l, f.tn), 0)
  local s = tonumber(redis.call('ZSCORE', kready(c, f.l), f.tn))
  if not head or unentry(head).id ~= here or not s then
    return false, false
  end
  -- First of its level: no ready flow has a smaller start tag (a flow
  -- that starts waiting starts at V, level with the flow served last).
  local first = redis.call('ZRANGE', kready(c, f.l), 0, 0, 'WITHSCORES')
  if tonumber(first[2]) < s then
    return false, false
  end
  for l = 1, f.l - 1 do
    if redis.call('EXISTS', kready(c, l)) == 1 then
      return false, false
    end
  end
  if unlessNear and math.max(earliest(f, now, true)) <= now + tolerance then
    return false, true
  end
  local ahead, held = {}, {}
  -- Grants whose place has passed count too: their tasks are late (up to
  -- `late`, after which reap took them back), and a slot taken over from
  -- one is here's at once.
  for _, gid in ipairs(redis.call('ZRANGE', kgrants, '-inf', num(now + leadOf(c)), 'BYSCORE', 'LIMIT', 0, 4 * scan)) do
    local raw = redis.call('HGET', ktasks, gid)
    local g = raw and cjson.decode(raw)
    if g and g.s == 'G' and g.c == c then
      local who = g.l .. ':' .. g.t
      held[who] = (held[who] or 0) + 1
      ahead[#ahead + 1] = {id = gid, g = g, who = who}
    end
  end
  if held[f.l .. ':' .. f.tn] then
    return false
  end
  for _, a in ipairs(ahead) do
    local g = a.g
    if g.l > f.l or (g.l == f.l and (held[a.who] >= 2 or redis.call('LLEN', kline(c, g.l, g.t)) > 0)) then
      -- here takes the slot at p, or now if p has passed. In a log where
      -- the bumped task held as many members at p, it takes them over one
      -- for one, which changes no count, and when p has passed moves them
      -- to now as a late claim would (movable); any other rule of here's
      -- must have room then. The members are looked up in the log itself,
      -- not in the bumped flow's rules, which a reload or a later arrival
      -- may have rewritten since its places were written.
      local p, swap = tonumber(g.p), {}
      local at = math.max(p, now)
      for _, r in ipairs(f.rules) do
        local owns = r.a == 'sliding-log'
        for j = 1, (owns and r.c or 0) do
          owns = owns and tonumber(redis.call('ZSCORE', r.k, '@' .. a.id .. '#' .. j)) == p
        end
        if owns then
          if at > p and not movable({r}, p) then
            return false
          end
          swap[#swap + 1] = r
        elseif free(r, at, c) > at then
          return false
        end
      end
      takeBack(a.id, g)
      for _, r in ipairs(swap) do
        for j = 1, r.c do
          redis.call('ZREM', r.k, '@' .. a.id .. '#' .. j) -- gone already, unless its flow's rules changed
        end
      end
      grant(f, s, at, here, true)
      return at
    end
  end
  return false
end


local out = {}
local function reply(outcome, wait, by)
  local wake = -1 -- only Dispatch says when to call again
  if mode == 'dispatch' then
    wake = nextWake()
  end
  local r = {outcome, wait, wake, by or 0}
  for _, v in ipairs(out) do
    r[#r + 1] = v
  end
  for _, m in ipairs(refusals) do
    r[#r + 1], r[#r + 2] = '', m
  end
  return r
end

if mode == 'waiting' then
  -- Read only (no reap): the waiting flows, ready or blocked, each with
  -- its tasks in line, its weight and its tenant's grants in the class
  -- over the current and the previous share span.
  local n, r = tonumber(ARGV[8]), {0, 0, -1, shareSpan}
  local b = math.floor(now / shareSpan)
  for _, c in ipairs(redis.call('ZRANGE', kwake, 0, -1)) do
    local recent = {}
    for _, k in ipairs({kshares(c, b - 1), kshares(c, b)}) do
      local h = redis.call('HGETALL', k)
      for i = 1, #h, 2 do
        recent[h[i]] = (recent[h[i]] or 0) + tonumber(h[i + 1])
      end
    end
    local listed = {}
    for l = 1, levels do
      for _, tn in ipairs(redis.call('ZRANGE', kready(c, l), 0, n - 1)) do
        listed[#listed + 1] = {l, tn}
      end
    end
    for _, m in ipairs(redis.call('ZRANGE', kblocked(c), 0, n - 1)) do
      local l, tn = string.match(m, '^(%d):(.*)$')
      listed[#listed + 1] = {tonumber(l), tn}
    end
    for _, x in ipairs(listed) do
      if #r >= 4 + 6 * n then
        return r
      end
      local k, w = #r, redis.call('HGET', kflow(c, x[1], x[2]), 'w') or '1'
      r[k + 1], r[k + 2], r[k + 3] = c, tostring(x[1]), x[2]
      r[k + 4], r[k + 5], r[k + 6] = redis.call('LLEN', kline(c, x[1], x[2])), w, recent[x[2]] or 0
    end
  end
  return r
end

-- enter puts task x, parked at enqueue, in its line as a parked arrival
-- once its entry e leaves the entrance: a step that read the same entry
-- finds it gone, and a task in the lines already (its park ended and it
-- arrived) is not put there twice.
local function enter(x, e)
  -- Looked for near the head, where every loop reads: an entry another
  -- loop took is not searched for down a long entrance.
  local ok, at = pcall(redis.call, 'LPOS', base .. 'qe', e, 'MAXLEN', 2 * #ARGV)
  if ok and at then
    ok, at = pcall(redis.call, 'LREM', base .. 'qe', 1, e)
  end
  if not ok then
    refusals[#refusals + 1] = 'the entrance ' .. base .. 'qe: ' .. errText(at)
    return
  end
  if not at or at == 0 or x.s then
    return
  end
  if not x.c then
    refusals[#refusals + 1] = 'the entrance held an entry that is not a task: ' .. string.sub(e, 1, 80)
    return
  end
  if not x.r then
    out[#out + 1], out[#out + 2] = x.q, x.id
    return
  end
  if redis.call('HEXISTS', ktasks, x.id) == 1 then
    return
  end
  local err
  ok, err = pcall(function()
    local f = flow(x.c, x.l, x.t)
    f.w, f.rules, f.raw, f.known = x.w, cjson.decode(x.r), x.r, true
    redis.call('HSET', f.key, 'w', tag(x.w), 'r', x.r, 'f', tag(f.f))
    redis.call('PEXPIRE', f.key, flowTTL)
    redis.call('RPUSH', kline(x.c, x.l, x.t), entry(x.q, x.id))
    redis.call('HSET', ktasks, x.id, cjson.encode({s = 'W', c = x.c, l = x.l, t = x.t, q = x.q}))
    waiting(f)
  end)
  if not ok then
    -- Released: its arrival meets the damage the usual way.
    damaged(x.c, x.l, x.t, err)
    out[#out + 1], out[#out + 2] = x.q, x.id
  end
end

reap()

if mode == 'dispatch' then
  if ARGV[8] then
    for i, x in ipairs(cjson.decode(ARGV[8])) do
      enter(x, ARGV[8 + i])
    end
  end
  local due = redis.call('ZRANGE', kwake, '-inf', num(now), 'BYSCORE', 'LIMIT', 0, 8)
  for _, c in ipairs(due) do
    -- A class whose own keys fail waits asideFor; the others go on. What
    -- step wrote before it failed stands: its reads come before its
    -- writes, so that is a blocked flow at most, or a grant not replied.
    local ok, err = pcall(step, c, out)
    if not ok then
      refusals[#refusals + 1] = 'the lines of ' .. c .. ': ' .. errText(err)
      redis.call('ZADD', kwake, num(now + asideFor), c)
    end
  end
  return reply(0, 0)
end

if mode == 'granted' then
  -- Whether task ARGV[8] holds a grant not yet claimed: outcome 1, else 0.
  local raw = redis.call('HGET', ktasks, ARGV[8])
  if raw and cjson.decode(raw).s == 'G' then
    return reply(1, 0)
  end
  return reply(0, 0)
end

-- wakeClass makes class c due now, and its blocked flows with it (their
-- own rules may have room the lines did not make): the next step looks.
local function wakeClass(c)
  for _, m in ipairs(redis.call('ZRANGE', kblocked(c), 0, -1)) do
    redis.call('ZADD', kblocked(c), now, m)
  end
  redis.call('ZADD', kwake, 'XX', now, c)
end

if mode == 'refresh' then
  -- New rules and weights for waiting flows (a policies reload): ARGV[8]
  -- is a JSON array of {c, l, t, w, r}, r the rules as JSON. Their
  -- classes are woken, each once, as the new rules may have room.
  local classes = {}
  for _, x in ipairs(cjson.decode(ARGV[8])) do
    local k = kflow(x.c, x.l, x.t)
    if redis.call('EXISTS', k) == 1 then
      redis.call('HSET', k, 'w', tag(x.w), 'r', x.r)
      classes[x.c] = true
    end
  end
  for c in pairs(classes) do
    wakeClass(c)
  end
  return reply(0, 0)
end

if mode == 'wake' then
  -- A waiting class is due now, whatever its last step found: an arrival
  -- of a waiting flow parks at once only while its class is not due.
  wakeClass(ARGV[8])
  return reply(0, 0)
end

if mode == 'drop' then
  -- A task that no longer exists (deleted from its queue) leaves its line;
  -- an unclaimed grant's places go with it.
  local id = ARGV[8]
  local raw = redis.call('HGET', ktasks, id)
  if raw then
    local task = cjson.decode(raw)
    if task.s == 'G' then
      unplace(flow(task.c, task.l, task.t).rules, id)
      redis.call('ZREM', kgrants, id)
      redis.call('ZADD', kwake, 'XX', now, task.c) -- its slot is free again
    else
      redis.call('LREM', kline(task.c, task.l, task.t), 1, entry(task.q, id))
    end
    redis.call('HDEL', ktasks, id)
  end
  return reply(0, 0)
end

-- arrive
local c, l, tn = ARGV[8], tonumber(ARGV[9]), ARGV[10]
local weight, queue, id = tonumber(ARGV[11]), ARGV[12], ARGV[13]
local rules = cjson.decode(ARGV[14])
-- ownFlow returns the arriving task's flow, its hash written with the
-- rules and weight this task brings: read and written only when the task
-- waits, not when it is admitted at once.
local f
local function ownFlow()
  if not f then
    f = flow(c, l, tn)
    f.w, f.rules, f.raw, f.known = weight, rules, ARGV[14], true
    redis.call('HSET', f.key, 'w', tag(weight), 'r', ARGV[14], 'f', tag(f.f))
    redis.call('PEXPIRE', f.key, flowTTL)
  end
  return f
end

-- Read again: reap() above may have taken this task's lapsed grant back.
if arrival then
  arrival = redis.call('HGET', ktasks, id)
end
local task = arrival and cjson.decode(arrival)
if task and task.s == 'G' and task.r ~= redis.sha1hex(ARGV[14]) then
  -- A grant given under other rules than the task brings, those of the
  -- policies in force (a reload, or a stored copy damaged or forged), is
  -- taken back: the task is placed again under its own.
  takeBack(id, task)
elseif task and task.s == 'G' then
  -- A granted task claims its grant. Before its place, its places become
  -- its admission there, and it waits for it. After it, up to `late`,
  -- they become its admission now, when every log allows that (movable),
  -- so that the windows hold the time it is sent; else, within the
  -- tolerance, its admission at its place (the margin covers the
  -- tolerance); later than that it is placed again from the head of its
  -- flow.
  local g = flow(task.c, task.l, task.t)
  task.p = tonumber(task.p)
  learn(task.c, now - (tonumber(task.g) or now))
  local at = nil
  if now <= task.p then
    at = task.p
  elseif now <= task.p + late and movable(g.rules, task.p) then
    at = now
  elseif now <= task.p + tolerance then
    at = task.p
  end
  if at and not unplace(g.rules, id, at) then
    redis.call('HDEL', ktasks, id)
    redis.call('ZREM', kgrants, id)
    if at == now then
      return reply(1, 0)
    end
    return reply(2, math.max(0, at - now))
  end
  if at then
    -- A window had lost a place (a reset): the places left became an
    -- admission, which stands, and the task is placed again.
    redis.call('ZREM', kgrants, id)
    redis.call('LPUSH', kline(task.c, task.l, task.t), entry(task.q, id))
    redis.call('HSET', ktasks, id, cjson.encode({s = 'W', c = task.c, l = task.l, t = task.t, q = task.q}))
    waiting(g)
  else
    takeBack(id, task)
  end
elseif not task then
  -- A new arrival. Nothing waits in its class and it fits now: admitted.
  if not redis.call('ZSCORE', kwake, c) then
    local own, shared = earliest({c = c, rules = rules}, now)
    if own == now and shared == now then
      record(rules, id, now, true)
      return reply(1, 0)
    end
  end
  redis.call('RPUSH', kline(c, l, tn), entry(queue, id))
  redis.call('HSET', ktasks, id, cjson.encode({s = 'W', c = c, l = l, t = tn, q = queue}))
  waiting(ownFlow())
else
  -- Back while it waits: its grant was taken back before it came (it is
  -- timed from that grant, once), or its park ended. It keeps its turn.
  if task.g then
    learn(task.c, now - tonumber(task.g))
    task.g = nil
    redis.call('HSET', ktasks, id, cjson.encode(task))
  end
  waiting(flow(task.c, task.l, task.t))
end

ownFlow()
-- A task whose next slot of its own is not at once first tries to take
-- over an earlier one that it is owed (takeOver); then the step gives the
-- slots due, to it if it is still in line, and if it was not, and its slot
-- had seemed near, it tries to take one over after all.
local mine, near = takeOver(c, f, id, true)
mine = step(c, out, id) or mine
if not mine and near then
  mine = takeOver(c, f, id)
end
if mine then
  if mine == now then
    return reply(1, 0)
  end
  return reply(2, mine - now)
end
-- Parked: say which of its rules frees last, the one it waits for (the
-- first shared rule when its wait is its turn, not a full window).
local by, latest = 0, now
for i, r in ipairs(f.rules) do
  local x = free(r, now, c)
  if x > latest or (by == 0 and r.s == 1) then
    by, latest = i, math.max(latest, x)
  end
end
return reply(3, 0, by)
