package layout

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// PresenceFor is how long a worker counts as running after it last said
// so (Present): a worker killed holds a change of layout back this long.
const PresenceFor = 30 * time.Second

// Present records that worker id runs under prefix, for PresenceFor from
// now. A worker says so before it reads the layout, and admin layout
// reads the workers after it marks a change, so that one of the two sees
// the other.
func Present(ctx context.Context, rdb redis.UniversalClient, prefix, id string) error {
	key := keyspace.WorkersKey(prefix)
	now, err := rdb.Time(ctx).Result()
	if err == nil {
		err = rdb.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(PresenceFor).UnixMilli()), Member: id}).Err()
	}
	if err == nil {
		err = rdb.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.UnixMilli(), 10)).Err()
	}
	if err != nil {
		return fmt.Errorf("record the worker in %s: %w", key, err)
	}
	return nil
}

// Absent removes worker id, which stops, from the workers under prefix.
func Absent(ctx context.Context, rdb redis.UniversalClient, prefix, id string) error {
	if err := rdb.ZRem(ctx, keyspace.WorkersKey(prefix), id).Err(); err != nil {
		return fmt.Errorf("remove the worker from %s: %w", keyspace.WorkersKey(prefix), err)
	}
	return nil
}

// Running returns the workers whose presence under prefix has not lapsed.
func Running(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]string, error) {
	key := keyspace.WorkersKey(prefix)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read the workers in %s: %w", key, err)
	}
	ids, err := rdb.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("read the workers in %s: %w", key, err)
	}
	return ids, nil
}
