--[[
counters.lua: the algorithms of a policy that keep a few numbers per key
whatever its limit, beside the exact sliding-window log of decide.lua:

  'sliding-window'  the sliding-window counter: the units of the current
                    fixed window plus those of the previous one weighted by
                    how much of it the sliding window still covers
  'gcra'            the generic cell rate algorithm: one theoretical arrival
                    time; emission interval window / limit, burst limit
  'fixed-window'    one count per window; windows are aligned to multiples of
                    the window since the epoch of the Redis clock
  'concurrency'     an in-flight cap, not a rate: the slots held, one
                    member per holder, scored by when its lease lapses;
                    `window` is the lease (docs/INFLIGHT.md)

This chunk defines two local functions and no global; decide.lua, peek.lua
and the lines' scripts include it, after lease_worth.lua (a cap under a
lease worth no slot answers its leaseRetry), and their checks call them. They are set by a call of
define_counters(), which decide.lua makes only when a check needs them: a
call of the script creates the closures of the functions it defines, and
the sliding log alone should not pay for them:

  counter_check(alg, key, limit, window, cost, now, holder)
      -> allowed, count, retry, reset, state
  counter_record(alg, key, limit, window, cost, now, state, holder)
      -> count, reset

  alg     'sliding-window', 'gcra' or 'fixed-window'
  key     the Redis key of the check, a hash of its own per algorithm
  limit   most units admitted in a window, 1 to 10,000,000 (the products
          below stay under 2^53, so the doubles of Redis Lua hold them
          exactly)
  window  microseconds, an integer
  cost    units, 1 <= cost <= limit
  now     microseconds of the Redis clock, an integer (now + 2 * window
          stays below 2^53 until the year 2235)
  holder  'concurrency' only: the caller's id, which names its slot; a
          caller that holds one already fits, and keeps it

counter_check reads the key and writes nothing. It returns
  allowed  1 when a request of this cost fits now, else 0
  count    units counted against the limit now, before this request; the
           request fits exactly when count + cost <= limit
  retry    0 when allowed; else microseconds until a request of this cost
           fits if nothing else is admitted meanwhile (the first whole
           microsecond at which it does)
  reset    microseconds until the key holds nothing that limits; 0 when it
           holds nothing
  state    what counter_record needs, to pass back as it is
counter_record is called only when every check of the call allowed, with the
arguments and the state of counter_check in the same script call. It writes
the admission, sets the key to expire just after reset (floor(reset / 1000)
+ 1 milliseconds, as decide.lua does), and returns count and reset after the
admission: count is always the count of counter_check plus cost.

Every figure returned is an integer. The keys:

  sliding-window  hash {s, c, p, w}: c units admitted in the window that
                  starts at s, p in the one before it, w the window they were
                  counted with. With S the start of the current window (a
                  multiple of window) and d = S + window - now, the
                  microseconds left in it:
                    count = cur + ceil(prev * d / window)
                  where cur and prev are the units of the windows starting
                  at S and S - window. A stored count belongs to the window
                  its own window started in, so after a change of window the
                  counts of a window that started before S - window are
                  forgotten. The TTL runs to the end of the window after the
                  current one, when cur stops counting.
  gcra            hash {t, f, l}: the theoretical arrival time, TAT =
                  t + f / l microseconds (f < l, l the limit it was written
                  with: the emission interval window / limit is rarely a
                  whole microsecond, and TAT is kept exactly). A request fits
                  when max(TAT, now) + cost * window / limit <= now + window,
                  and its admission moves TAT there. count is the units'
                  worth of TAT still ahead of now,
                    count = ceil((TAT - now) * limit / window)
                  (0 when TAT <= now): limit - count more units fit now.
                  Beyond twice the limit (after a lowered limit or a
                  shorter window) count is an estimate, within one: the
                  request is denied whatever it is. reset = ceil(TAT - now).
  fixed-window    hash {s, c}: c units admitted in the window that starts
                  at s. They count while s >= S, the current window's start;
                  retry and reset are the time to the next window.
  concurrency     sorted set, member the holder, score when its lease
                  lapses (us). count is the members not lapsed (score >
                  now), the holder's own left out; cost is 1. retry is the
                  time until the first of them lapses: a release may come
                  sooner. Recording drops the lapsed members and writes the
                  holder's lapse at now + window.
]]

local counter_check, counter_record
local function define_counters()
  local floor, ceil, fmod = math.floor, math.ceil, math.fmod

  -- divmod returns floor(a / b) and the remainder, exactly for integers
  -- 0 <= a < 2^53 and b >= 1: a quotient that is not a whole number is at
  -- least 1 / b from one, more than the rounding of the division.
  local function divmod(a, b)
    local q = floor(a / b)
    return q, a - q * b
  end

  -- start returns the start of the window of now: a multiple of window.
  local function start(now, window)
    return now - fmod(now, window)
  end

  -- expire sets key to expire just after reset microseconds.
  local function expire(key, reset)
    redis.call('PEXPIRE', key, floor(reset / 1000) + 1)
  end

  -- Sliding-window counter.

  -- weighted returns ceil(n * d / window), n units of the previous window
  -- when d microseconds of the current one are left, 1 <= d <= window. With
  -- v(m) = floor(m * window / n), m >= n * d / window exactly when
  -- v(m) >= d (d is whole), and v is exact where n * d may not be.
  local function weighted(n, d, window)
    if n == 0 then
      return 0
    end
    local q, r = divmod(window, n)
    local function v(m)
      return m * q + floor(m * r / n)
    end
    local m = ceil(n * d / window) -- the double is within one of it
    while m > 0 and v(m - 1) >= d do
      m = m - 1
    end
    while v(m) < d do
      m = m + 1
    end
    return m
  end

  -- room returns floor(k * window / n), n > 0: the most microseconds left
  -- in the window at which n weighted units leave room for k. Exact when
  -- below window; when it is not, it is still above window.
  local function room(k, n, window)
    local q, r = divmod(window, n)
    return k * q + floor(k * r / n)
  end

  local function sliding_check(key, limit, window, cost, now)
    local h = redis.call('HMGET', key, 's', 'c', 'p', 'w')
    local S = start(now, window)
    local cur, prev = 0, 0
    local s = tonumber(h[1])
    if s then
      -- Each count belongs to the window its own window started in.
      local c, p, w = tonumber(h[2]), tonumber(h[3]), tonumber(h[4])
      if s >= S then
        cur = cur + c
      elseif s >= S - window then
        prev = prev + c
      end
      if s - w >= S then
        cur = cur + p
      elseif s - w >= S - window then
        prev = prev + p
      end
    end
    local d = S + window - now
    local count = cur + weighted(prev, d, window)
    local reset = 0
    if cur > 0 then
      reset = d + window
    elseif prev > 0 then
      reset = d
    end
    local state = {S, cur, prev, count}
    if count + cost <= limit then
      return 1, count, 0, reset, state
    end
    -- Later in this window the weighted units leave room for k = limit -
    -- cur - cost once at most room(k, prev) microseconds are left (prev > 0
    -- here: a denial with k >= 0 has weighted units).
    local k = limit - cur - cost
    if k >= 0 then
      local left = room(k, prev, window)
      if left >= 1 then
        return 0, count, d - left, reset, state
      end
    end
    -- Else in the next window, where cur is the previous window's units and
    -- nothing is current: at its start, or once cur's weight fits, or (when
    -- cost is the limit) at the start of the window after.
    local wait = 0
    if cur > 0 then
      wait = math.max(0, window - room(limit - cost, cur, window))
    end
    return 0, count, d + wait, reset, state
  end

  local function sliding_record(key, limit, window, cost, now, state)
    local S, cur, prev, count = state[1], state[2] + cost, state[3], state[4]
    redis.call('HSET', key, 's', S, 'c', cur, 'p', prev, 'w', window)
    local reset = S + 2 * window - now
    expire(key, reset)
    return count + cost, reset
  end

  -- GCRA. Durations are kept as a whole part in microseconds and a
  -- fraction in units of 1 / limit microsecond; the emission interval is
  -- T = window / limit = tq + tr / limit.

  -- times returns n * T as its whole part and fraction, n <= 2 * limit + 1.
  local function times(n, tq, tr, limit)
    local q, r = divmod(n * tr, limit)
    return n * tq + q, r
  end

  -- used returns ceil(D / T) for D = di + fn / limit: the least n with
  -- n * T >= D.
  local function used(di, fn, limit, tq, tr)
    if di == 0 and fn == 0 then
      return 0
    end
    local n = ceil((di + fn / limit) / (tq + tr / limit)) -- within one of it
    if n > 2 * limit then
      -- Only after a lowered limit or a shorter window; the request is
      -- denied whatever it is, and the estimate says by how much.
      return n
    end
    local function covers(m)
      local a, b = times(m, tq, tr, limit)
      return a > di or (a == di and b >= fn)
    end
    while n > 0 and covers(n - 1) do
      n = n - 1
    end
    while not covers(n) do
      n = n + 1
    end
    return n
  end

  local function gcra_check(key, limit, window, cost, now)
    local h = redis.call('HMGET', key, 't', 'f', 'l')
    local tq, tr = divmod(window, limit)
    -- D = max(TAT - now, 0) = di + fn / limit.
    local di, fn = 0, 0
    local t = tonumber(h[1])
    if t then
      local f, l = tonumber(h[2]), tonumber(h[3])
      if l ~= limit then
        -- Written with another limit: round the fraction up to this one's
        -- units (f * limit < l * limit < 2^53).
        f = ceil(f * limit / l)
        if f >= limit then
          t, f = t + 1, f - limit
        end
      end
      if t > now or (t == now and f > 0) then
        di, fn = t - now, f
      end
    end
    local count = used(di, fn, limit, tq, tr)
    local reset = di
    if fn > 0 then
      reset = reset + 1
    end
    local state = {di, fn, count}
    -- Fits when D + cost * T <= window = limit * T, that is when
    -- D <= (limit - cost) * T.
    local aq, ar = times(limit - cost, tq, tr, limit)
    if di < aq or (di == aq and fn <= ar) then
      return 1, count, 0, reset, state
    end
    local retry = di - aq
    if fn > ar then
      retry = retry + 1
    end
    return 0, count, retry, reset, state
  end

  local function gcra_record(key, limit, window, cost, now, state)
    local di, fn, count = state[1], state[2], state[3]
    local tq, tr = divmod(window, limit)
    local iq, ir = times(cost, tq, tr, limit)
    local t, f = now + di + iq, fn + ir
    if f >= limit then
      t, f = t + 1, f - limit
    end
    redis.call('HSET', key, 't', t, 'f', f, 'l', limit)
    local reset = t - now
    if f > 0 then
      reset = reset + 1
    end
    expire(key, reset)
    return count + cost, reset
  end

  -- Fixed window.

  local function fixed_check(key, limit, window, cost, now)
    local h = redis.call('HMGET', key, 's', 'c')
    local S = start(now, window)
    local count = 0
    local s = tonumber(h[1])
    if s and s >= S then
      count = tonumber(h[2])
    end
    local reset = 0
    if count > 0 then
      reset = S + window - now
    end
    local state = {S, count}
    if count + cost <= limit then
      return 1, count, 0, reset, state
    end
    return 0, count, S + window - now, reset, state
  end

  local function fixed_record(key, limit, window, cost, now, state)
    local S, count = state[1], state[2] + cost
    redis.call('HSET', key, 's', S, 'c', count)
    local reset = S + window - now
    expire(key, reset)
    return count, reset
  end

  -- Concurrency: the slots held.

  local function slots_check(key, limit, window, cost, now, holder)
    local count = redis.call('ZCOUNT', key, string.format('(%d', now), '+inf')
    local held = holder and tonumber(redis.call('ZSCORE', key, holder))
    if held and held > now then
      count = count - 1
    else
      held = nil
    end
    local last = redis.call('ZRANGE', key, 0, 0, 'REV', 'WITHSCORES')
    local reset = 0
    if last[2] and tonumber(last[2]) > now then
      reset = tonumber(last[2]) - now
    end
    if held or count + cost <= limit then
      return 1, count, 0, reset, {count, reset}
    end
    local first = redis.call('ZRANGE', key, string.format('(%d', now), '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if not first[2] then
      -- No slot held, and a lease worth less than one (a global cap over
      -- shards, docs/INFLIGHT.md): asked again when the balancer may have
      -- moved one here.
      return 0, count, leaseRetry, reset, {count, reset}
    end
    return 0, count, math.max(1, tonumber(first[2]) - now), reset, {count, reset}
  end

  local function slots_record(key, limit, window, cost, now, state, holder)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    redis.call('ZADD', key, now + window, holder)
    local reset = math.max(window, state[2])
    if redis.call('PTTL', key) < floor(reset / 1000) + 1 then
      expire(key, reset)
    end
    return state[1] + cost, reset
  end

  local checks = {['sliding-window'] = sliding_check, gcra = gcra_check, ['fixed-window'] = fixed_check,
    concurrency = slots_check}
  local records = {['sliding-window'] = sliding_record, gcra = gcra_record, ['fixed-window'] = fixed_record,
    concurrency = slots_record}

  counter_check = function(alg, key, limit, window, cost, now, holder)
    local f = checks[alg]
    if not f then
      error('counters: unknown algorithm ' .. tostring(alg))
    end
    return f(key, limit, window, cost, now, holder)
  end

  counter_record = function(alg, key, limit, window, cost, now, state, holder)
    local f = records[alg]
    if not f then
      error('counters: unknown algorithm ' .. tostring(alg))
    end
    return f(key, limit, window, cost, now, state, holder)
  end
end
