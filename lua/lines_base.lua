-- lines_base.lua: the fair lines' constants, key names, line entries and
-- the room of a sliding log. Included after lines_head.lua.

local startLead = tonumber(ARGV[2])
local most, reserve = tonumber(ARGV[4]), tonumber(ARGV[5])
local levels = 5
-- A flow's hash goes a day after it was last written: a tenant that stops
-- waiting leaves nothing behind.
local flowTTL = 86400000
local scan = 16 -- flows of a level looked at in one pick
-- A step gives a shared rule's places up to `batch` beyond the lead: a fast
-- rule's slots go a few a call, at most 50 calls a second.
local batch = 20000
-- Grants are counted per tenant and class in share spans, for the status page.
local shareSpan = 5000000
-- A flow or class whose keys Redis refuses is set aside this long.
local asideFor = 30000000

local function num(x) return string.format('%d', x) end
local function tag(x) return string.format('%.17g', x) end

local function kclass(class) return base .. 'q:' .. class end
local function kready(class, level) return base .. 'qr:' .. class .. ':' .. level end
local function kblocked(class) return base .. 'qb:' .. class end
local function kline(class, level, tenant) return base .. 'ql:' .. class .. ':' .. level .. ':' .. tenant end
local function kflow(class, level, tenant) return base .. 'qf:' .. class .. ':' .. level .. ':' .. tenant end
local function kshares(class, span) return base .. 'qn:' .. class .. ':' .. span end

-- A line holds entries "<length of the queue>:<queue><task id>".
local function entry(queue, id) return #queue .. ':' .. queue .. id end
local function unentry(text)
  local n, rest = string.match(text, '^(%d+):(.*)$')
  n = tonumber(n)
  return {queue = string.sub(rest, 1, n), id = string.sub(rest, n + 1)}
end

-- rulesFrom reads flat, the rules as values six by six from index first,
-- into tables: {key, limit, window, cost, algorithm, shared}.
local function rulesFrom(flat, first)
  local rules = {}
  for i = first or 1, #flat, 6 do
    rules[#rules + 1] = {key = flat[i], limit = tonumber(flat[i + 1]), window = tonumber(flat[i + 2]),
      cost = tonumber(flat[i + 3]), algorithm = flat[i + 4], shared = tonumber(flat[i + 5])}
  end
  return rules
end

-- logFree is the earliest time at or after `at` at which sliding log key
-- (limit, window) has room for cost, counting every member, places too.
local function logFree(key, limit, window, cost, at)
  local over = redis.call('ZCOUNT', key, '(' .. num(at - window), '+inf') + cost - limit
  if over <= 0 then
    return at
  end
  local member = redis.call('ZRANGE', key, '(' .. num(at - window), '+inf', 'BYSCORE', 'LIMIT', over - 1, 1, 'WITHSCORES')
  local score = tonumber(member[2])
  if not (score < 2 ^ 53) then
    -- +inf (or past the year 2255) is damage, not a wait forever.
    error({err = 'ERR damaged log ' .. key .. ': a member scored ' .. member[2] .. ', not a time in microseconds'})
  end
  return math.max(at, score + window)
end
