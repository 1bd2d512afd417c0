--[[
restamp.lua: the admission of a task that the fair lines gave, moved to
now because its send leaves late, so that each sliding log counts the send
where the provider will (docs/FAIRNESS.md, "A late send is stamped again").

KEYS[i]        the sliding log of rule i, i = 1 .. n (all in one hash slot)
KEYS[n + i]    its lease (the log's key with 'e' after the hash tag), read
               when rule i is leased (docs/SCALING.md)
ARGV[1]        the task id
ARGV[2]        how far back from now its admission can lie, us
ARGV[4i - 1]   rule i's limit
ARGV[4i]       rule i's window, us, the margin included
ARGV[4i + 1]   rule i's cost: the task's members in log i
ARGV[4i + 2]   1 when rule i is leased: its limit is what its lease is
               worth (lease_worth.lua), else 0

The task's members are '<stamp>-c<id>#j', j = 1 .. cost, all at its
admission p. Each becomes '<now>-c<id>#j' at now, in every log or in none:
only when every log holds all of them and the move is allowed, as a late
claim's in arrive.lua (movable): p is less than a window ago, and the
members in (p, now + window), plus the cost, are within the limit. The key
then lives at least a window past now.

Reply: the time the members stand at, us: now, or their own time when it
is not before now; 0 when nothing moved: a log lacks a member, or a
window would go over.
]]

-- #include lease_worth.lua

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local id = ARGV[1]
local from = now - tonumber(ARGV[2])

-- The names of log i's members that are the task's latest admission, and
-- its time; nil unless all cost of them are there. An earlier admission
-- of the same task (a run before a retry) stays where it is.
local function mine(i, cost)
  local ms = redis.call('ZRANGE', KEYS[i], from, '+inf', 'BYSCORE', 'WITHSCORES')
  local names, p = {}, nil
  for x = 1, #ms, 2 do
    local who, j = string.match(ms[x], '^[%d%.]+%-c(.*)#(%d+)$')
    local at = tonumber(ms[x + 1])
    if who == id and tonumber(j) <= cost and (not p or at >= p) then
      if p and at > p then
        names = {}
      end
      names[#names + 1], p = ms[x], at
    end
  end
  if #names == cost then
    return names, p
  end
end

local n = (#ARGV - 2) / 4
local moves, at = {}, now
for i = 1, n do
  local limit, window, cost = tonumber(ARGV[4 * i - 1]), tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1])
  if ARGV[4 * i + 2] == '1' then
    limit = leaseWorth(KEYS[n + i], limit)
  end
  local names, p = mine(i, cost)
  if not names then
    return 0
  end
  if p < now then
    if now >= p + window or
      redis.call('ZCOUNT', KEYS[i], '(' .. string.format('%d', p), '(' .. string.format('%d', now + window)) + cost > limit then
      return 0
    end
    moves[#moves + 1] = {i = i, names = names, window = window}
  else
    at = math.max(at, p)
  end
end

local stamp = string.format('%d', now)
for _, m in ipairs(moves) do
  local k, args = KEYS[m.i], {}
  for _, name in ipairs(m.names) do
    args[#args + 1], args[#args + 2] = now, stamp .. string.match(name, '^[%d%.]+(%-c.*)$')
  end
  -- Added before the old go: a log emptied would lose its TTL.
  redis.call('ZADD', k, unpack(args))
  redis.call('ZREM', k, unpack(m.names))
  redis.call('PEXPIRE', k, math.floor(m.window / 1000) + 1, 'GT')
end
return at
