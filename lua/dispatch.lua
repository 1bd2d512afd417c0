--[[
dispatch.lua: gives the slots due to parked tasks of every class, fairly,
after putting the tasks parked at enqueue in their lines
(docs/FAIRNESS.md, "Parked at enqueue"); says when to call again.

KEYS[1..3], ARGV[1..6]  the lines' (lines_head.lua)
KEYS[4..]  the entrance (<base>qe); the keys of each class it may serve
           (lua.LinesSettings.ClassKeys), and the logs, each followed by
           its frontier note, of the flows it may serve and of the lapsed
           grants it may take back. It serves and takes back only those:
           needing others, it replies "again" with what it needs
ARGV[7]    entering: a JSON array of {c class, l level, t tenant, q queue,
           id task id, w weight, r rules (their values as strings, six a
           rule: lines_head.lua)}, or absent. Without r the
           task is not limited by the rules in force and is released
           (replied as a grant); without c its entry only goes; with s
           (stale: its task comes back by itself) it only goes
ARGV[7+i]  the i-th (from 1) entry as read from the entrance, <base>qe,
           removed by value: a step that finds it gone skips it

Reply: {0, 0, wake, 0, queue1, id1, ...}: wake is the time in us until
the next call may give a grant (-1: nothing waits); queue, id as in
arrive.lua. Again: {4, 0, 0, 0, ...} with, besides the grants given, a
pair ("\0", "<class>") per class whose keys it needs and ("\0",
"<class>\0<log>") per log of the flows it may serve next.
]]
-- #include lines_head.lua

-- nextWake is the time in us until some class or grant needs a dispatch (0:
-- now), or -1 when nothing waits.
local function nextWake()
  local class = redis.call('ZRANGE', kwake, 0, 0, 'WITHSCORES')
  local grant = redis.call('ZRANGE', kgrants, 0, 0, 'WITHSCORES')
  local at = nil
  if class[2] then
    at = tonumber(class[2])
  end
  if grant[2] then
    at = math.min(at or math.huge, tonumber(grant[2]) + late + 1)
  end
  if not at then
    return -1
  end
  return math.max(0, at - now)
end

-- The most common call first: nothing entering, no class due and no grant
-- lapsed (the other loops' calls between two slots).
if not ARGV[7] then
  local wake = nextWake()
  if wake ~= 0 then
    return {0, 0, wake, 0}
  end
end

-- #include lines_room.lua
-- #include lines_base.lua
-- #include counters.lua
-- #include lines_logs.lua
-- #include lines_flows.lua
-- #include lines_grants.lua

-- enter puts task x, parked at enqueue, in its line once its entry leaves
-- the entrance: a step that read the same entry finds it gone, and a task
-- in the lines already (its park ended and it arrived) is not put twice.
local function enter(x, text)
  -- Looked for near the head, where every loop reads.
  local ok, at = pcall(redis.call, 'LPOS', base .. 'qe', text, 'MAXLEN', 2 * #ARGV)
  if ok and at then
    ok, at = pcall(redis.call, 'LREM', base .. 'qe', 1, text)
  end
  if not ok then
    refusals[#refusals + 1] = 'the entrance ' .. base .. 'qe: ' .. errText(at)
    return
  end
  if not at or at == 0 or x.s then
    return
  end
  if not x.c then
    refusals[#refusals + 1] = 'the entrance held an entry that is not a task: ' .. string.sub(text, 1, 80)
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
    local flow = flowOf(x.c, x.l, x.t)
    flow.weight, flow.rules, flow.raw, flow.known = x.w, rulesFrom(x.r), cjson.encode(x.r), true
    save(flow, true)
    local seq = lineAdd(x.c, x.l, x.t, x.q, x.id)
    redis.call('HSET', ktasks, x.id, waitingRecord(x.c, x.l, x.t, x.q, seq))
    waiting(flow)
  end)
  if not ok then
    damaged(x.c, x.l, x.t, err) -- released: its arrival meets the damage
    out[#out + 1], out[#out + 2] = x.q, x.id
  end
end

-- wanted holds "<class>" and "<class>\0<key>" for the reply's look.
local wanted, wantedSet = {}, {}
local function want(text)
  if not wantedSet[text] then
    wantedSet[text] = true
    wanted[#wanted + 1] = text
  end
end

-- covers reports whether the call may serve flow: its class's keys and its
-- rules' logs are declared. One it may not is wanted: the reply asks for
-- them, the look below.
local missed = false
local function covers(class, flow)
  local ok = declared(kclass(class))
  for _, rule in ipairs(flow.rules) do
    ok = ok and declared(rule.key) and not rule.unleased
  end
  missed = missed or not ok
  return ok
end

-- reap takes back the grants whose place passed more than `late` ago, when
-- the call covers their flow, and else wants its class's keys or its logs.
-- One whose keys fail is left until they are repaired.
local function reap()
  local lapsed = redis.call('ZRANGE', kgrants, '-inf', num(now - late - 1), 'BYSCORE', 'LIMIT', 0, most)
  for _, id in ipairs(lapsed) do
    local raw = redis.call('HGET', ktasks, id)
    if raw then
      pcall(function()
        local task = cjson.decode(raw)
        if not declared(kclass(task.c)) then
          missed = true
          want(task.c)
          return
        end
        local flow = flowOf(task.c, task.l, task.t)
        if covers(task.c, flow) then
          takeBack(id, task)
          return
        end
        for _, rule in ipairs(flow.rules) do
          want(task.c .. '\0' .. rule.key)
        end
      end)
    else
      redis.call('ZREM', kgrants, id)
    end
  end
end

-- lookAt wants the logs of the flows a step of class may serve: the first
-- `scan` of each level.
local function lookAt(class)
  for level = 1, levels do
    for _, tenant in ipairs(redis.call('ZRANGE', kready(class, level), 0, scan - 1)) do
      local ok, flow = pcall(flowOf, class, level, tenant)
      for _, rule in ipairs(ok and flow.rules or {}) do
        want(class .. '\0' .. rule.key)
      end
    end
  end
end

reap()
if ARGV[7] then
  for i, x in ipairs(cjson.decode(ARGV[7])) do
    enter(x, ARGV[7 + i])
  end
end
local due = redis.call('ZRANGE', kwake, '-inf', num(now), 'BYSCORE', 'LIMIT', 0, 8)
for _, class in ipairs(due) do
  -- A class whose keys fail waits asideFor; the others go on. Its step
  -- reads before it writes: a blocked flow at most stands.
  if not declared(kclass(class)) then
    missed = true
    want(class)
  else
    local before = missed
    missed = false
    local ok, err = pcall(step, class, nil, function(flow) return covers(class, flow) end)
    if ok and missed then
      redis.call('ZADD', kwake, now, class) -- the next call serves it on
    end
    missed = missed or before
    if not ok then
      refusals[#refusals + 1] = 'the lines of ' .. class .. ': ' .. errText(err)
      redis.call('ZADD', kwake, num(now + asideFor), class)
    end
  end
end
if not missed then
  return reply(0, 0, 0, nextWake())
end
-- Again: the keys of the flows this call may serve next (reap wanted the
-- lapsed grants' already).
for _, class in ipairs(due) do
  if declared(kclass(class)) then
    pcall(lookAt, class) -- a damaged class is set aside above
  end
end
for _, text in ipairs(wanted) do
  out[#out + 1], out[#out + 2] = '\0', text
end
return reply(4, 0, 0, 0)
