-- lines_base.lua: the fair lines' constants, key names, line entries and
-- flow records. Included after lines_room.lua.

local startLead = tonumber(ARGV[2])
local most, reserve = tonumber(ARGV[4]), tonumber(ARGV[5])
local levels = 5
local scan = 16 -- flows of a level looked at in one pick
-- A step gives a shared rule's places up to `batch` beyond the lead: a fast
-- rule's slots go a few a call, at most 50 calls a second.
local batch = 20000
-- Under a lease worth part of its rule, a step's batch grows by the rule's
-- limit over the lease's pace, up to this many times: a shard's steps give
-- as many slots at once as one Redis's would, not a third as many.
local leaseBatch = 4
-- Grants are counted per tenant and class in share spans, for the status page.
local shareSpan = 5000000
-- A flow or class whose keys Redis refuses is set aside this long.
local asideFor = 30000000

local function tag(x) return string.format('%.17g', x) end

local function kclass(class) return base .. 'q:' .. class end
local function kready(class, level) return base .. 'qr:' .. class .. ':' .. level end
local function kblocked(class) return base .. 'qb:' .. class end
local function kflows(class) return base .. 'qF:' .. class end
local function kline(class, level) return base .. 'qL:' .. class .. ':' .. level end
local function kidle(class, level) return base .. 'qi:' .. class .. ':' .. level end
local function kshares(class, span) return base .. 'qn:' .. class .. ':' .. span % 2 end

-- A flow's record is fields of its class's qF: f<level>:<tenant> its
-- finish tag, w... its weight, r... its rules.
local function field(kind, level, tenant) return kind .. level .. ':' .. tenant end

-- A line holds entries "<length of the queue>:<queue><task id>".
local function entry(queue, id) return #queue .. ':' .. queue .. id end
local function unentry(text)
  local n, rest = string.match(text, '^(%d+):(.*)$')
  n = tonumber(n)
  return {queue = string.sub(rest, 1, n), id = string.sub(rest, n + 1)}
end

-- A flow's line is the members of its class and level's qL that start
-- with "<length of the tenant>:<tenant>", then a sequence number (16 hex
-- digits, from 2^52 up at the tail and down at the head), then the entry.
local function lineOf(tenant) return #tenant .. ':' .. tenant end
local function member(tenant, seq, queue, id)
  return lineOf(tenant) .. string.format('%016x', seq) .. entry(queue, id)
end

-- lineSeq returns the member at the head of the line that starts with
-- `from` (at its tail, `last`) and its sequence number, or nil.
local function lineSeq(class, level, from, last)
  local r
  if last then
    r = redis.call('ZRANGE', kline(class, level), '(' .. from .. '\255', '[' .. from, 'BYLEX', 'REV', 'LIMIT', 0, 1)
  else
    r = redis.call('ZRANGE', kline(class, level), '[' .. from, '(' .. from .. '\255', 'BYLEX', 'LIMIT', 0, 1)
  end
  return r[1], r[1] and tonumber(string.sub(r[1], #from + 1, #from + 16), 16)
end

-- lineEnd returns the head of a flow's line (or its tail, `last`) as
-- {queue, id, seq, member}, or nil when the line is empty.
local function lineEnd(class, level, tenant, last)
  local from = lineOf(tenant)
  local m, seq = lineSeq(class, level, from, last)
  if not m then
    return nil
  end
  local x = unentry(string.sub(m, #from + 17))
  x.seq, x.member = seq, m
  return x
end

-- lineAdd puts task id at the tail of its flow's line (at the head with
-- `first`) and returns its sequence number. The flow is no longer idle.
local function lineAdd(class, level, tenant, queue, id, first)
  local from = lineOf(tenant)
  local _, seq = lineSeq(class, level, from, not first)
  if not seq then
    seq = seqStart
  elseif first then
    seq = seq - 1
  else
    seq = seq + 1
  end
  redis.call('ZREM', kidle(class, level), tenant) -- first: a damaged qi fails before the line is written
  redis.call('ZADD', kline(class, level), 0, from .. string.format('%016x', seq) .. entry(queue, id))
  return seq
end

-- waitingRecord is a waiting task's entry in <base>qt; n is its sequence
-- number in its line.
local function waitingRecord(class, level, tenant, queue, seq, granted)
  return cjson.encode({s = 'W', c = class, l = level, t = tenant, q = queue, n = num(seq), g = granted})
end



-- declared reports whether key is one of the call's KEYS.
local declaredSet
local function declared(key)
  if not declaredSet then
    declaredSet = {}
    for _, k in ipairs(KEYS) do
      declaredSet[k] = true
    end
  end
  return declaredSet[key] == true
end

-- leaseRead holds the terms of each lease and limit read by this call:
-- every flow's rules name the same leases, read once.
local leaseRead = {}

-- rulesFrom reads flat, the rules as values six by six from index first,
-- into tables: {key, limit, window, cost, algorithm, shared}. A leased
-- rule (shared 2: a global rule split over shards, docs/SCALING.md) is
-- shared, and its limit is what its lease is worth here when the call
-- declared the lease; else it keeps the rule's, and `unleased` says the
-- flow may not be served.
local function rulesFrom(flat, first)
  local rules = {}
  for i = first or 1, #flat, 6 do
    local rule = {key = flat[i], limit = tonumber(flat[i + 1]), window = tonumber(flat[i + 2]),
      cost = tonumber(flat[i + 3]), algorithm = flat[i + 4], shared = tonumber(flat[i + 5])}
    if rule.shared == 2 then
      rule.shared, rule.lease = 1, leaseOf(rule.key)
      if declared(rule.lease) then
        local whole, read = rule.limit, rule.lease .. '\0' .. flat[i + 1]
        if not leaseRead[read] then
          leaseRead[read] = {leaseTerms(rule.lease, whole)}
        end
        rule.limit, rule.pace = leaseRead[read][1], leaseRead[read][2]
        if rule.algorithm == 'sliding-log' then -- a cap has no pace
          rule.batch = batch * math.min(leaseBatch, whole / math.max(rule.pace, 1))
        end
      else
        rule.unleased = true
      end
    end
    rules[#rules + 1] = rule
  end
  return rules
end
