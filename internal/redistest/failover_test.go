package redistest

import (
	"context"
	"testing"
	"time"
)

// TestSentinelGroupFailover kills the master of a SentinelGroup and checks
// that the sentinels promote its replica within seconds, with what the
// master had written, and that the group's client follows.
func TestSentinelGroupFailover(t *testing.T) {
	t.Parallel()
	g := StartSentinelGroup(t, 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := g.Client(t)
	key := "test-" + random()
	if err := rdb.Set(ctx, key, "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := g.MasterAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if old != g.Master {
		t.Errorf("the sentinels name master %s, want %s, the one the group started with", old, g.Master)
	}
	g.Kill(t, old)
	killed := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	now, err := g.WaitPromoted(pctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s promoted %v after the master was killed", now, time.Since(killed).Round(time.Millisecond))
	if now != g.Replicas[0] {
		t.Errorf("promoted %s, want the replica %s", now, g.Replicas[0])
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "kept" {
		t.Errorf("the new master holds %q (%v), want what the old one had", got, err)
	}
}

// TestReplicatedClusterFailover kills the master of a key's slot in a
// ReplicatedCluster and checks that its replica takes over within
// seconds, with what the master had written, and that the cluster's
// client follows.
func TestReplicatedClusterFailover(t *testing.T) {
	t.Parallel()
	c := StartReplicatedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := c.Client(t)
	key := "test-" + random()
	if err := rdb.Set(ctx, key, "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := c.MasterOf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(t, old)
	killed := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	now, err := c.WaitPromoted(pctx, key, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s promoted %v after the master was killed", now, time.Since(killed).Round(time.Millisecond))
	for i, m := range c.Masters {
		if m == old && now != c.Replicas[i] {
			t.Errorf("promoted %s, want %s, the replica of %s", now, c.Replicas[i], old)
		}
	}
	err = waitFor(ctx, func() bool {
		got, err := rdb.Get(ctx, key).Result()
		return err == nil && got == "kept"
	})
	if err != nil {
		t.Errorf("the client never read the key from the new master: %v", err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Errorf("after the failover: %v", err)
	}
}
