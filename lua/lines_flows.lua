-- lines_flows.lua: flows, their tags and their grants taken back, damage
-- set aside, and the reply. Included after lines_logs.lua.

-- A flow whose line empties is idle. Its record stays idleFor (and
-- `late`) after: a tenant back soon starts at its finish tag, and its
-- grants, which live at most a lead, a batch and `late`, are taken back
-- under its rules. Then sweep removes it, a few a grant.
local idleFor = 60000000
local function idle(class, level, tenant)
  redis.call('ZADD', kidle(class, level), now, tenant)
  redis.call('PEXPIRE', kidle(class, level), flowTTL)
end

local function sweep(class, level)
  local before = num(now - idleFor - late)
  for _, tenant in ipairs(redis.call('ZRANGE', kidle(class, level), '-inf', before, 'BYSCORE', 'LIMIT', 0, 4)) do
    redis.call('HDEL', kflows(class), field('f', level, tenant), field('w', level, tenant), field('r', level, tenant))
    redis.call('ZREM', kidle(class, level), tenant)
  end
end

-- Flows, read once a call: finish tag, weight and rules (and `raw`, their
-- stored text).
local flows = {}
local function flowOf(class, level, tenant)
  local name = level .. ':' .. tenant
  local flow = flows[class .. '\0' .. name]
  if not flow then
    local h = redis.call('HMGET', kflows(class), 'f' .. name, 'w' .. name, 'r' .. name)
    flow = {class = class, level = level, tenant = tenant, finish = tonumber(h[1]) or 0,
      weight = tonumber(h[2]) or 1, rules = h[3] and rulesFrom(cjson.decode(h[3])) or {}, raw = h[3] or '',
      known = h[3] ~= nil}
    flows[class .. '\0' .. name] = flow
  end
  return flow
end

-- save writes flow's finish tag (and, with `all`, its weight and rules).
local function save(flow, all)
  local name = flow.level .. ':' .. flow.tenant
  if all then
    redis.call('HSET', kflows(flow.class), 'f' .. name, tag(flow.finish), 'w' .. name, tag(flow.weight),
      'r' .. name, flow.raw)
  else
    redis.call('HSET', kflows(flow.class), 'f' .. name, tag(flow.finish))
  end
  redis.call('PEXPIRE', kflows(flow.class), flowTTL)
end

local function vtime(class, level)
  return tonumber(redis.call('HGET', kclass(class), 'v' .. level)) or 0
end

-- ready puts flow among the ready ones of its level with start tag.
local function ready(flow, start)
  redis.call('ZADD', kready(flow.class, flow.level), tag(start), flow.tenant)
end

-- waiting makes flow, which has a task in line, ready unless it is ready or
-- blocked already: it starts at max(F, V), so idle time earns no credit.
local function waiting(flow)
  if redis.call('ZSCORE', kready(flow.class, flow.level), flow.tenant) or
    redis.call('ZSCORE', kblocked(flow.class), flow.level .. ':' .. flow.tenant) then
    return
  end
  ready(flow, math.max(flow.finish, vtime(flow.class, flow.level)))
  redis.call('ZADD', kwake, now, flow.class)
end

-- takeBack undoes task id's grant, which its task never claimed: its places
-- go (those in the logs `only` names, when given), it returns to the head
-- of its flow, whose finish tag goes back by one.
local function takeBack(id, task, only)
  local flow = flowOf(task.c, task.l, task.t)
  unplace(flow.rules, id, nil, only)
  redis.call('ZREM', kgrants, id)
  -- It keeps the time of the grant (g): should it come, its delivery is timed.
  local seq = lineAdd(task.c, task.l, task.t, task.q, id, true)
  redis.call('HSET', ktasks, id, waitingRecord(task.c, task.l, task.t, task.q, seq, task.g))
  flow.finish = math.max(0, flow.finish - 1 / flow.weight)
  save(flow)
  redis.call('ZREM', kready(flow.class, flow.level), flow.tenant)
  redis.call('ZREM', kblocked(flow.class), flow.level .. ':' .. flow.tenant)
  ready(flow, math.max(tonumber(task.S), flow.finish))
  redis.call('ZADD', kwake, now, flow.class)
end

-- unblock returns class's flows whose block has ended to the ready ones.
local function unblock(class)
  local due = redis.call('ZRANGE', kblocked(class), '-inf', num(now), 'BYSCORE')
  for _, member in ipairs(due) do
    redis.call('ZREM', kblocked(class), member)
    local level, tenant = string.match(member, '^(%d):(.*)$')
    local flow = flowOf(class, tonumber(level), tenant)
    ready(flow, math.max(flow.finish, vtime(class, flow.level)))
  end
end

-- Damage: a key Redis refuses, or that holds what the script cannot read,
-- stops only what uses it, and the reply says what was refused.
local refusals = {}

local function errText(e)
  if type(e) == 'table' then
    return tostring(e.err)
  end
  return tostring(e)
end

-- culprit names the first key of a flow of the wrong type, if any.
local function culprit(class, level, tenant)
  local want = {[kline(class, level)] = 'zset', [kflows(class)] = 'hash'}
  local ok, raw = pcall(redis.call, 'HGET', kflows(class), field('r', level, tenant))
  local decoded, flat = pcall(cjson.decode, ok and raw or '[]')
  flat = decoded and type(flat) == 'table' and flat or {}
  for i = 1, #flat, 6 do
    if type(flat[i]) == 'string' then
      want[flat[i]] = (flat[i + 4] == 'sliding-log' or flat[i + 4] == 'concurrency') and 'zset' or 'hash'
    end
  end
  for key, kind in pairs(want) do
    local got = declared(key) and redis.call('TYPE', key).ok or 'none'
    if got ~= 'none' and got ~= kind then
      return 'key ' .. key .. ' is a ' .. got .. ', not a ' .. kind
    end
  end
end

-- damaged sets a flow aside for asideFor, with what was refused.
local function damaged(class, level, tenant, err)
  refusals[#refusals + 1] = culprit(class, level, tenant) or
    ('the line of ' .. class .. ', level ' .. level .. ', tenant ' .. tenant .. ': ' .. errText(err))
  redis.call('ZREM', kready(class, level), tenant)
  redis.call('ZADD', kblocked(class), num(now + asideFor), level .. ':' .. tenant)
end

-- out holds the grants of parked tasks, queue then id, for the reply.
local out = {}

-- reply is {outcome, wait, wake, by, queue1, id1, ...}, then a pair
-- ('', what was refused) per refusal.
local function reply(outcome, wait, by, wake)
  local r = {outcome, wait, wake or -1, by or 0}
  for _, v in ipairs(out) do
    r[#r + 1] = v
  end
  for _, m in ipairs(refusals) do
    r[#r + 1], r[#r + 2] = '', m
  end
  return r
end
