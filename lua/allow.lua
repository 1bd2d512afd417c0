--[[
allow.lua: one decision of the sliding-window log over one or more keys, all
or nothing.

Each key is a sorted set with one member per admitted unit of cost, scored by
its admission time in microseconds of the Redis clock (TIME). A member is in
the window while score > now - window. Denied requests write nothing but the
pruning of entries that have left the window (and, in line mode, the place in
line).

In line mode each check also has a line: a sorted set of the callers that were
denied and will come back, one member per caller id, scored by the time it was
told to come back. A denied caller takes the next place in the line of the
check that binds (the latest return time), so a backlog comes back one freed
slot at a time instead of all at the first. A caller back before its place
keeps it; one denied after its place came is placed again behind only those
ahead of it; an admitted one leaves every line. Places older than the grace are dropped as abandoned.

KEYS[i]      sorted set (window) of check i, i = 1 .. n
KEYS[n+i]    line of check i (line mode only)
             all keys in one hash slot
ARGV[1]      "0": record nothing, only look (Peek)
             "1": record the admission when every check allows (Allow)
             "2": as "1", and a denied caller takes a place in line
ARGV[2]      caller id (line mode), else ""
ARGV[3]      grace of places in line, in microseconds (line mode), else 0
ARGV[3i+1]   limit of check i: most units admitted in any window
ARGV[3i+2]   window of check i, in microseconds
ARGV[3i+3]   cost of check i, in units, 1 <= cost <= limit
             n = (#ARGV - 3) / 3

Reply: an array of 3 + 4n integers
  [1]        1 when every check allows (and unless ARGV[1] = "0" all were
             recorded), else 0
  [4i-2]     1 when check i alone would allow, else 0
  [4i-1]     units of check i in its window after this decision
  [4i]       retry-after of check i in microseconds: 0 when it allows; else
             the time until its entry at index count - limit + cost - 1
             (0-based, oldest first) leaves the window
  [4i+1]     reset-after of check i in microseconds: time until its window
             is empty
  [4n+2]     line mode, denied: microseconds until the caller's place in
             line, when it should come back; else 0
  [4n+3]     line mode, denied: the check whose line it joined (1-based);
             else 0
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
local mode = ARGV[1]
local record = mode ~= '0'

local n = (#ARGV - 3) / 3
local reply = {1}
local limits, windows, costs, counts = {}, {}, {}, {}

for i = 1, n do
  local key = KEYS[i]
  local limit = tonumber(ARGV[3 * i + 1])
  local window = tonumber(ARGV[3 * i + 2])
  local cost = tonumber(ARGV[3 * i + 3])
  limits[i], windows[i], costs[i] = limit, window, cost

  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  counts[i] = count
  local allowed, retry = 1, 0
  if count + cost > limit then
    allowed = 0
    reply[1] = 0
    -- The request fits once all but limit - cost of the current entries
    -- have left: the one at this index is the last that must go.
    local idx = count - limit + cost - 1
    local e = redis.call('ZRANGE', key, idx, idx, 'WITHSCORES')
    retry = tonumber(e[2]) + window - now
  end
  reply[4 * i - 2] = allowed
  reply[4 * i - 1] = count
  reply[4 * i] = retry
  reply[4 * i + 1] = 0
end

for i = 1, n do
  local key = KEYS[i]
  local window = windows[i]
  local newest
  if record and reply[1] == 1 then
    -- Members must be unique even when many units land in one microsecond.
    -- They are named after the stamp and the count in the window before
    -- this call, which only grows within one microsecond for one window.
    -- A key called with two windows in one microsecond can repeat a name:
    -- ZADD NX refuses it, and the refused units are named after the number
    -- of members at this score instead (which only grows within the
    -- microsecond), marked 'z' so the two kinds never meet.
    local cost = costs[i]
    local done, refused = 0, 0
    while done < cost do
      local args = {'NX'}
      local batch = math.min(cost - done, 500)
      for j = 1, batch do
        args[2 * j] = now
        args[2 * j + 1] = stamp .. '-' .. (counts[i] + done + j - 1)
      end
      refused = refused + batch - redis.call('ZADD', key, unpack(args))
      done = done + batch
    end
    if refused > 0 then
      local seq = redis.call('ZCOUNT', key, now, now)
      done = 0
      while done < refused do
        local args = {}
        local batch = math.min(refused - done, 500)
        for j = 1, batch do
          args[2 * j - 1] = now
          args[2 * j] = stamp .. '-z' .. (seq + done + j - 1)
        end
        redis.call('ZADD', key, unpack(args))
        done = done + batch
      end
    end
    reply[4 * i - 1] = reply[4 * i - 1] + cost
    newest = now
  else
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if last[2] then
      newest = tonumber(last[2])
    end
  end
  if newest then
    local reset = newest + window - now
    reply[4 * i + 1] = reset
    -- The TTL is a safety net: the key goes shortly after its newest entry
    -- leaves the window. Set on every call so a changed window applies.
    redis.call('PEXPIRE', key, math.floor(reset / 1000) + 1)
  end
end

reply[4 * n + 2] = 0
reply[4 * n + 3] = 0
if mode ~= '2' then
  return reply
end

local id = ARGV[2]
if reply[1] == 1 then
  for i = 1, n do
    redis.call('ZREM', KEYS[n + i], id)
  end
  return reply
end

-- Denied: find when each denying check would have room for this caller
-- behind the k callers already in its line. The windows' future exits are
-- E[j] = score[j] + window for j < count, and for j >= count the exit of the
-- unit admitted at E[j - limit], one window later. The caller needs exit
-- j = count - limit + k + cost - 1.
local grace = tonumber(ARGV[3])
local best, bestAt = 0, 0
for i = 1, n do
  if reply[4 * i - 2] == 0 then
    local line = KEYS[n + i]
    redis.call('ZREMRANGEBYSCORE', line, '-inf', now - grace)
    local at = tonumber(redis.call('ZSCORE', line, id))
    if not at or at <= now then
      -- A new caller goes behind everyone in line; one whose place came
      -- without a slot for it (another took it, or the slot's holder was
      -- admitted late) keeps its rank: behind only those ahead of it.
      local k
      if at then
        k = redis.call('ZCOUNT', line, '-inf', at) - 1
      else
        k = redis.call('ZCARD', line)
      end
      local count, limit = counts[i], limits[i]
      local j = count - limit + k + costs[i] - 1
      local gen = 0
      if j >= count then
        gen = math.ceil((j - count + 1) / limit)
      end
      local idx = math.max(j - gen * limit, 0)
      local e = redis.call('ZRANGE', KEYS[i], idx, idx, 'WITHSCORES')
      at = tonumber(e[2]) + (gen + 1) * windows[i]
    end
    -- else a caller back before its place keeps it.
    if at > bestAt then
      best, bestAt = i, at
    end
  end
end
for i = 1, n do
  local line = KEYS[n + i]
  if i == best then
    redis.call('ZADD', line, bestAt, id)
    redis.call('PEXPIRE', line, math.floor((bestAt - now + grace) / 1000) + 1)
  else
    redis.call('ZREM', line, id)
  end
end
reply[4 * n + 2] = bestAt - now
reply[4 * n + 3] = best
return reply
