package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaseAckWait is the longest a lease move waits for a replica to
// acknowledge its give or its take before leaving the move to Recover.
const leaseAckWait = 500 * time.Millisecond

// ErrNotReplicated is wrapped by a lease move whose write no replica of
// its master acknowledged within leaseAckWait: the move waits for Recover.
var ErrNotReplicated = errors.New("no replica acknowledged the write")

// acknowledged runs write on one connection to the master that serves key
// and, when that master has replicas, waits on the same connection (WAIT
// 1) until one has every write made there, for up to leaseAckWait
// (docs/SCALING.md, "Acknowledged by a replica"). It returns write's reply.
func (l *Limiter) acknowledged(ctx context.Context, key string, write func(redis.Scripter) (int64, error)) (int64, error) {
	var node *redis.Client
	cluster := false
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return 0, err
		}
		node, cluster = n, true
	case *redis.Client:
		node = c
	default:
		return write(l.rdb)
	}
	conn := node.Conn()
	defer func() { _ = conn.Close() }()
	replicas, err := replicasOf(ctx, conn, cluster)
	if err != nil {
		return 0, err
	}
	n, err := write(conn)
	if err != nil || replicas == 0 {
		return n, err
	}
	acked, err := conn.Wait(ctx, 1, leaseAckWait).Result()
	if err != nil {
		return n, fmt.Errorf("wait for a replica of %s: %w", node.Options().Addr, err)
	}
	if acked < 1 {
		return n, fmt.Errorf("%w: %d replicas of %s, none within %v", ErrNotReplicated, replicas, node.Options().Addr, leaseAckWait)
	}
	return n, nil
}

// replicasOf returns how many replicas the master of conn has: in a
// cluster, every replica its nodes know of, failing or cut off included
// (CLUSTER REPLICAS), so that a master cut off from its replica, the one
// that may be replaced, still waits for it; otherwise those connected
// (ROLE).
func replicasOf(ctx context.Context, conn *redis.Conn, cluster bool) (int, error) {
	if cluster {
		id, err := conn.ClusterMyID(ctx).Result()
		if err != nil {
			return 0, fmt.Errorf("cluster myid: %w", err)
		}
		replicas, err := conn.Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
		if err != nil {
			return 0, fmt.Errorf("cluster replicas: %w", err)
		}
		return len(replicas), nil
	}
	role, err := conn.Do(ctx, "ROLE").Slice()
	if err != nil {
		return 0, fmt.Errorf("role: %w", err)
	}
	if len(role) < 3 || role[0] != "master" {
		return 0, fmt.Errorf("role: %v, not a master's", role)
	}
	replicas, ok := role[2].([]any)
	if !ok {
		return 0, fmt.Errorf("role: replicas %v", role[2])
	}
	return len(replicas), nil
}
