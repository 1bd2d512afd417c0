package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// MemoryResult is the memory section: what one limited key costs in Redis.
type MemoryResult struct {
	Rows []MemoryRow `json:"rows"`
}

// MemoryRow is one key of each limiter after Units allowed calls within one
// window. Sizes are Redis MEMORY USAGE with SAMPLES 0 (every member
// counted), in bytes, key name included.
type MemoryRow struct {
	Units              int     `json:"units"`
	SluiceBytes        int64   `json:"sluice_bytes"`
	SluiceBytesPerUnit float64 `json:"sluice_bytes_per_unit"`
	SluiceEncoding     string  `json:"sluice_encoding"` // OBJECT ENCODING: listpack while small, then skiplist
	RedisRateBytes     int64   `json:"redis_rate_bytes"`

	// SluiceOverRedisRate is SluiceBytes over RedisRateBytes.
	SluiceOverRedisRate float64 `json:"sluice_over_redis_rate"`

	// The same for a Sluice key under each algorithm that keeps a few
	// numbers per key (throttle.SlidingWindow, GCRA, FixedWindow), its
	// window full: a hash whose size does not depend on Units.
	SlidingWindowBytes int64 `json:"sliding_window_bytes"`
	GCRABytes          int64 `json:"gcra_bytes"`
	FixedWindowBytes   int64 `json:"fixed_window_bytes"`
}

// counterScript runs the functions of lua/counters.lua, the algorithms
// that keep a few numbers per key, on the key KEYS[1]: counter_check, then
// counter_record when it allows and ARGV[6] is "1". ARGV[1] to ARGV[5] are
// the algorithm, the limit, the window in µs, the cost and the time in µs
// ("" for the Redis clock). When ARGV[7] is "persist" it then drops the
// key's TTL, for a caller whose clock is not Redis's. It replies {allowed,
// count, retry, reset}. The memory section fills counter keys through it,
// and a test runs it against the accuracy section's models; the Limiter
// runs the same functions inside its decision script.
var counterScript = redis.NewScript(lua.CountersSource() + `
define_counters()
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local alg, key = ARGV[1], KEYS[1]
local limit, window, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local allowed, count, retry, reset, state = counter_check(alg, key, limit, window, cost, now)
if allowed == 1 and ARGV[6] == '1' then
  count, reset = counter_record(alg, key, limit, window, cost, now, state)
end
if ARGV[7] == 'persist' then
  redis.call('PERSIST', key)
end
return {allowed, count, retry, reset}
`)

// counterAlgorithms are the algorithms of the memory section's counter
// columns, in their order.
var counterAlgorithms = []throttle.Algorithm{throttle.SlidingWindow, throttle.GCRA, throttle.FixedWindow}

// runMemory fills, for each number of units, one Sluice key and one
// redis_rate key with that many allowed calls, one unit a call as traffic
// would, under a limit of that many an hour, and measures both; then a key
// under each counter algorithm, filled to the same limit.
func runMemory(ctx context.Context, r *runner, res *Results) error {
	prefix := r.prefix + "memory:"
	sluice := throttle.NewLimiter(r.rdb, throttle.WithPrefix(prefix))
	gcra := redis_rate.NewLimiter(r.rdb)
	mr := &MemoryResult{}
	for _, units := range r.cfg.MemoryUnits {
		key := "tenant-" + strconv.Itoa(units)
		p := throttle.Policy{Limit: units, Window: time.Hour}
		limit := redis_rate.PerHour(units)
		for i := range units {
			d, err := sluice.Allow(ctx, key, p)
			if err != nil {
				return err
			}
			if !d.Allowed {
				return fmt.Errorf("sluice denied unit %d of %d", i+1, units)
			}
			g, err := gcra.Allow(ctx, prefix+key, limit)
			if err != nil {
				return fmt.Errorf("redis_rate: %w", err)
			}
			if g.Allowed == 0 {
				return fmt.Errorf("redis_rate denied unit %d of %d", i+1, units)
			}
		}
		skey, err := sluice.RedisKey(key)
		if err != nil {
			return err
		}
		row := MemoryRow{Units: units}
		if row.SluiceBytes, err = r.rdb.MemoryUsage(ctx, skey, 0).Result(); err != nil {
			return fmt.Errorf("MEMORY USAGE %s: %w", skey, err)
		}
		if row.SluiceEncoding, err = r.rdb.ObjectEncoding(ctx, skey).Result(); err != nil {
			return fmt.Errorf("OBJECT ENCODING %s: %w", skey, err)
		}
		gkey := redisRatePrefix + prefix + key
		if row.RedisRateBytes, err = r.rdb.MemoryUsage(ctx, gkey, 0).Result(); err != nil {
			return fmt.Errorf("MEMORY USAGE %s: %w", gkey, err)
		}
		row.SluiceBytesPerUnit = float64(row.SluiceBytes) / float64(units)
		if row.RedisRateBytes > 0 {
			row.SluiceOverRedisRate = float64(row.SluiceBytes) / float64(row.RedisRateBytes)
		}
		if err := r.rdb.Unlink(ctx, skey, gkey).Err(); err != nil {
			return err
		}
		for _, alg := range counterAlgorithms {
			n, err := counterBytes(ctx, r, sluice, key, alg, p)
			if err != nil {
				return err
			}
			switch alg {
			case throttle.SlidingWindow:
				row.SlidingWindowBytes = n
			case throttle.GCRA:
				row.GCRABytes = n
			case throttle.FixedWindow:
				row.FixedWindowBytes = n
			}
		}
		mr.Rows = append(mr.Rows, row)
		r.logf("memory %6d units: sluice %9d B (%.1f B/unit, %s), redis_rate %d B; sliding-window %d B, gcra %d B, fixed-window %d B",
			units, row.SluiceBytes, row.SluiceBytesPerUnit, row.SluiceEncoding, row.RedisRateBytes,
			row.SlidingWindowBytes, row.GCRABytes, row.FixedWindowBytes)
	}
	res.Memory = mr
	return nil
}

// counterBytes fills key's key under algorithm alg with p.Limit units, its
// window full, and returns its MEMORY USAGE. One call of cost p.Limit
// leaves the state that p.Limit calls of cost 1 would: a count, or an
// arrival time p.Limit emission intervals ahead. Until the Limiter takes
// Policy.Algorithm the fill runs counterScript, which calls the same Lua
// functions; the key is the Limiter's (RedisKeyFor), so its name is the
// size it will be.
func counterBytes(ctx context.Context, r *runner, l *throttle.Limiter, key string, alg throttle.Algorithm, p throttle.Policy) (int64, error) {
	rkey, err := l.RedisKeyFor(key, alg)
	if err != nil {
		return 0, err
	}
	reply, err := counterScript.Run(ctx, r.rdb, []string{rkey}, string(alg), p.Limit, p.Window.Microseconds(), p.Limit, "", "1").Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", alg, err)
	}
	if reply[0] != 1 || reply[1] != int64(p.Limit) {
		return 0, fmt.Errorf("%s: filling %d units: allowed %d, count %d", alg, p.Limit, reply[0], reply[1])
	}
	n, err := r.rdb.MemoryUsage(ctx, rkey, 0).Result()
	if err != nil {
		return 0, fmt.Errorf("MEMORY USAGE %s: %w", rkey, err)
	}
	return n, r.rdb.Unlink(ctx, rkey).Err()
}
