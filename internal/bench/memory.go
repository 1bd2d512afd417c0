package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
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
}

// runMemory fills, for each number of units, one Sluice key and one
// redis_rate key with that many allowed calls, one unit a call as traffic
// would, under a limit of that many an hour, and measures both.
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
		mr.Rows = append(mr.Rows, row)
		r.logf("memory %6d units: sluice %9d B (%.1f B/unit, %s), redis_rate %d B",
			units, row.SluiceBytes, row.SluiceBytesPerUnit, row.SluiceEncoding, row.RedisRateBytes)
		if err := r.rdb.Unlink(ctx, skey, gkey).Err(); err != nil {
			return err
		}
	}
	res.Memory = mr
	return nil
}
