--[[
resetlines.lua: empties the fair lines of one class (a task type),
whatever its keys hold, so that a damaged key of them can be repaired
(docs/ADMIN.md, "reset-lines"). The caller finds the keys (Lines.ResetLines);
this script checks that no flow joined meanwhile, and deletes them all at
once. Commands on keys shared with other classes run under pcall: a refusal
is replied, and the rest goes on.

KEYS[1]        the wake set:  <base>qw
KEYS[2]        the tasks:     <base>qt
KEYS[3]        the grants:    <base>qg
KEYS[4]        the entrance:  <base>qe
KEYS[5 .. 9]   the ready flows of levels 1 to 5: <base>qr:<c>:<l>
KEYS[10]       the blocked flows: <base>qb:<c>
KEYS[11 .. 10+n]   the class's other keys, deleted whatever their type:
               its hash, its lines (qL), its flows' records (qF), its idle
               flows (qi), its share counts, and 0.1.0's lines and hashes
               of its flows (ql, qf)
KEYS[11+n+2i], KEYS[12+n+2i]  (i = 0, 1, ...)
               a rule log that holds places of the class's grants, and its
               frontier note (decide.lua), which a removed place may falsify
ARGV[1]        the class, key-encoded
ARGV[2]        n
ARGV[3]        JSON object: the flows found, "<level>:<tenant>" -> true
ARGV[4]        JSON array: the class's task ids in <base>qt
ARGV[5]        JSON array: the class's entries at the entrance, as read
ARGV[6]        JSON array, one per log: the places ('@<id>#<j>') to remove

Reply: {0} when a flow of the class not in ARGV[3] is ready or blocked
(it joined since the keys were found: find them again); otherwise
{1, keys deleted, tasks forgotten, grants removed, entries removed,
places removed, refusal, ...}, a refusal being the text of an error.
]]

local class, n = ARGV[1], tonumber(ARGV[2])
local known = cjson.decode(ARGV[3])
local refused = {}

-- try runs a command, and notes Redis's refusal instead of failing.
local function try(...)
  local ok, res = pcall(redis.call, ...)
  if ok then
    return res
  end
  refused[#refused + 1] = tostring(type(res) == 'table' and res.err or res)
  return nil
end

-- A flow that joined since the caller looked would be left with its line.
for l = 1, 5 do
  local ok, members = pcall(redis.call, 'ZRANGE', KEYS[4 + l], 0, -1)
  for _, tn in ipairs(ok and members or {}) do
    if not known[l .. ':' .. tn] then
      return {0}
    end
  end
end
local ok, blocked = pcall(redis.call, 'ZRANGE', KEYS[10], 0, -1)
for _, m in ipairs(ok and blocked or {}) do
  if not known[m] then
    return {0}
  end
end

-- The tasks to forget: those the caller found, and those in the lines
-- deleted here (a task may have joined a known flow meanwhile).
local ids = {}
for _, id in ipairs(cjson.decode(ARGV[4])) do
  ids[id] = true
end
-- idOf reads the task id of an entry "<length of queue>:<queue><id>".
local function idOf(e)
  local len, rest = string.match(e, '^(%d+):(.*)$')
  return len and string.sub(rest, tonumber(len) + 1)
end
for i = 11, 10 + n do
  -- 0.1.0's lines are lists of entries; the lines now, sorted sets of
  -- "<length of tenant>:<tenant><seq, 16 hex digits><entry>".
  local ok, line = pcall(redis.call, 'LRANGE', KEYS[i], 0, -1)
  for _, e in ipairs(ok and line or {}) do
    ids[idOf(e) or ''] = true
  end
  if string.find(KEYS[i], '}qL:', 1, true) then
    ok, line = pcall(redis.call, 'ZRANGE', KEYS[i], 0, -1)
    for _, m in ipairs(ok and line or {}) do
      local len, rest = string.match(m, '^(%d+):(.*)$')
      if len then
        ids[idOf(string.sub(rest, tonumber(len) + 17)) or ''] = true
      end
    end
  end
end
ids[''] = nil

local deleted = 0
for i = 5, 10 + n do
  deleted = deleted + redis.call('DEL', KEYS[i])
end

local forgotten, grants = 0, 0
for id in pairs(ids) do
  forgotten = forgotten + (try('HDEL', KEYS[2], id) or 0)
  grants = grants + (try('ZREM', KEYS[3], id) or 0)
end
try('ZREM', KEYS[1], class)

local entries = 0
for _, e in ipairs(cjson.decode(ARGV[5])) do
  entries = entries + (try('LREM', KEYS[4], 1, e) or 0)
end

-- A removed place leaves the windows that counted it, so the log's
-- frontier note may no longer hold. ZREM by a thousand: unpack's limit.
local places = 0
for i, members in ipairs(cjson.decode(ARGV[6])) do
  local k = KEYS[9 + n + 2 * i]
  local removed = 0
  for from = 1, #members, 1000 do
    removed = removed + (try('ZREM', k, unpack(members, from, math.min(from + 999, #members))) or 0)
  end
  if removed > 0 then
    redis.call('DEL', KEYS[10 + n + 2 * i])
  end
  places = places + removed
end

local out = {1, deleted, forgotten, grants, entries, places}
for _, r in ipairs(refused) do
  out[#out + 1] = r
end
return out
