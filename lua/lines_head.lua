--[[
lines_head.lua: the start of every script of the fair lines
(docs/FAIRNESS.md): the clock, the settings and the fixed keys.

Every key of the lines is <base>q...: <base> is the limiter's prefix and
hash tag ("sluice:{limits}"), shared with the windows the lines serve.
  <base>q:<class>        hash  per level: v<level> virtual time, r<level>
                               credit; lead, e (in use); p<log>, f<log> a
                               log's pace
  <base>qr:<class>:<lvl> zset  ready flows (tenant) by start tag
  <base>qb:<class>       zset  blocked flows ("<level>:<tenant>") by end
  <base>qF:<class>       hash  the flows' records: f<lvl>:<tenant> finish
                               tag, w<lvl>:<tenant> weight, r... rules
  <base>qL:<class>:<lvl> zset  the lines, by member "<#tenant>:<tenant>
                               <seq, 16 hex><#queue>:<queue><id>"
  <base>qi:<class>:<lvl> zset  idle flows (tenant), by when they emptied
  <base>qn:<class>:<0|1> hash  grants per tenant in a share span (field ''
                               names the span), by the span's parity
  <base>qt               hash  task id -> {s 'W' waiting | 'G' granted, c
                               class, l level, t tenant, q queue, n seq in
                               line, p place, S start tag, g time of
                               grant, r SHA-1 of rules}
  <base>qg               zset  granted task ids by place
  <base>qw               zset  classes with waiting flows, by when to look
  <base>qe               list  the entrance: tasks parked at enqueue

A rule comes as six values: key, limit, window (us), cost, algorithm,
shared (2: of the class and leased, docs/SCALING.md; 1: of the class; 0:
the tenant's own). A flow stores its rules as
the JSON array of those values as strings (cjson.encode of them, so that
every script writes the same text), and a grant the SHA-1 of that text.

KEYS[1]  <base>qw    KEYS[2]  <base>qt    KEYS[3]  <base>qg
         the operation's own keys follow, from KEYS[4]; a script builds
         key names, but touches only those in KEYS (lua/keycheck.lua)
ARGV[1]  base
ARGV[2]  lead, us: how far ahead a parked task is first given a place
ARGV[3]  tolerance, us: how late after its place a granted task may come
ARGV[4]  most grants per class in one call
ARGV[5]  reserve: percent of grants owed to each less urgent waiting level
ARGV[6]  late, us: how late after its place a grant may still be claimed
The operation's own arguments follow from ARGV[7].
]]

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local base = ARGV[1]
local kwake, ktasks, kgrants = KEYS[1], KEYS[2], KEYS[3]
local tolerance = tonumber(ARGV[3])
local late = math.max(tolerance, tonumber(ARGV[6]))

-- wakeClass makes class due now, and its blocked flows (blocked, the key
-- <base>qb:<class>) with it: their own rules may have room the lines did
-- not make.
local function wakeClass(class, blocked)
  for _, member in ipairs(redis.call('ZRANGE', blocked, 0, -1)) do
    redis.call('ZADD', blocked, now, member)
  end
  redis.call('ZADD', kwake, 'XX', now, class)
end
