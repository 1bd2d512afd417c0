--[[
allow.lua: one decision of the sliding-window log over one or more keys, all
or nothing.

Each key is a sorted set with one member per admitted unit of cost, scored by
its admission time in microseconds of the Redis clock (TIME). A member is in
the window while score > now - window. Denied requests write nothing but the
pruning of entries that have left the window.

KEYS[i]      sorted set of check i, i = 1 .. #KEYS; all in one hash slot
ARGV[1]      "1": record the admission when every check allows (Allow)
             "0": record nothing, only look (Peek)
ARGV[3i-1]   limit of check i: most units admitted in any window
ARGV[3i]     window of check i, in microseconds
ARGV[3i+1]   cost of check i, in units, 1 <= cost <= limit

Reply: an array of 1 + 4 * #KEYS integers
  [1]        1 when every check allows (and with ARGV[1] = "1" all were
             recorded), else 0
  [4i-2]     1 when check i alone would allow, else 0
  [4i-1]     units of check i in its window after this decision
  [4i]       retry-after of check i in microseconds: 0 when it allows; else
             the time until its entry at index count - limit + cost - 1
             (0-based, oldest first) leaves the window
  [4i+1]     reset-after of check i in microseconds: time until its window
             is empty
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
local record = ARGV[1] == '1'

local n = #KEYS
local reply = {1}
local windows, costs = {}, {}

for i = 1, n do
  local key = KEYS[i]
  local limit = tonumber(ARGV[3 * i - 1])
  local window = tonumber(ARGV[3 * i])
  local cost = tonumber(ARGV[3 * i + 1])
  windows[i], costs[i] = window, cost

  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
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
    -- Members must be unique even when many units land in one microsecond:
    -- name them after the stamp and the number already at this score.
    local seq = redis.call('ZCOUNT', key, now, now)
    local cost = costs[i]
    local done = 0
    while done < cost do
      local args = {}
      local batch = math.min(cost - done, 500)
      for j = 1, batch do
        args[2 * j - 1] = now
        args[2 * j] = stamp .. '-' .. (seq + done + j - 1)
      end
      redis.call('ZADD', key, unpack(args))
      done = done + batch
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

return reply
