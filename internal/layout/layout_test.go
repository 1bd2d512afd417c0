package layout_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"shards=1", "shards=3", "shards=64"} {
		l, err := layout.Parse(s)
		if err != nil || l.String() != s {
			t.Errorf("Parse(%q) = %v, %v; want it back", s, l, err)
		}
	}
	for _, s := range []string{"", "shards=0", "shards=-1", "shards=01", "shards=1.5", "shards= 1", "shard=1", "shards=257", "shards=99999999999999999999"} {
		if l, err := layout.Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, l)
		} else if !strings.Contains(err.Error(), "shards=<N>") {
			t.Errorf("Parse(%q): %v, want it to say what a layout is", s, err)
		}
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()
	all := []string{"email:send", "sms:send"}
	cases := []struct {
		served []string
		want   []string
	}{
		{all, []string{"email:send", "sms:send", layout.Legacy}},
		{[]string{"sms:send"}, []string{"sms:send"}},
		{[]string{"email:send"}, []string{"email:send"}},
	}
	for _, c := range cases {
		if got := layout.Default.Queues(c.served, all); !slices.Equal(got, c.want) {
			t.Errorf("Queues(%v) = %v, want %v", c.served, got, c.want)
		}
	}
	if got := layout.Old.Queues(all, all); !slices.Equal(got, []string{layout.Legacy}) {
		t.Errorf("Old.Queues = %v, want default alone", got)
	}
	if got := layout.Default.Queue("sms:send", "acme"); got != "sms:send" {
		t.Errorf("Queue(sms:send, acme) = %q, want the type's queue", got)
	}
}

// TestShardedQueues: on more than one shard a task's queue and group are
// its shard's name, a worker serves every shard of its types, and each
// type's groups are its queues.
func TestShardedQueues(t *testing.T) {
	t.Parallel()
	l := layout.Layout{Shards: 3}
	all := []string{"email:send", "sms:send"}
	sms := l.Groups("sms:send")
	if len(sms) != 3 {
		t.Fatalf("Groups(sms:send) = %v, want 3", sms)
	}
	for i, g := range sms {
		if g != layout.ShardName("sms:send", i, 3) {
			t.Errorf("Groups(sms:send)[%d] = %q, want ShardName's", i, g)
		}
	}
	for _, tenant := range []string{"acme", "globex", "initech", ""} {
		q, g := l.Queue("sms:send", tenant), l.Group("sms:send", tenant)
		if q != g || q != sms[l.Shard(tenant)] {
			t.Errorf("tenant %q: Queue %q, Group %q, want both %q", tenant, q, g, sms[l.Shard(tenant)])
		}
	}
	want := append(l.Groups("email:send"), append(sms, layout.Legacy)...)
	if got := l.Queues(all, all); !slices.Equal(got, want) {
		t.Errorf("Queues(both) = %v, want %v", got, want)
	}
	if got := l.Queues([]string{"sms:send"}, all); !slices.Equal(got, sms) {
		t.Errorf("Queues(sms) = %v, want %v", got, sms)
	}
	if got := layout.Default.Group("sms:send", "acme"); got != keyspace.DefaultGroup {
		t.Errorf("Default.Group = %q, want %q", got, keyspace.DefaultGroup)
	}
}

// TestEnsure writes the layout into a Redis that names none, keeps it, and
// refuses another, naming both, without changing what Redis holds.
func TestEnsure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	if _, ok, err := layout.Read(ctx, rdb, prefix); ok || err != nil {
		t.Fatalf("Read of a new prefix: ok %v, %v; want none", ok, err)
	}
	if err := layout.Check(ctx, rdb, prefix, layout.Default); err != nil {
		t.Fatalf("Check with no layout: %v", err)
	}
	if err := layout.Ensure(ctx, rdb, prefix, layout.Default); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if got, _ := rdb.Get(ctx, keyspace.LayoutKey(prefix)).Result(); got != "shards=1" {
		t.Fatalf("the marker holds %q, want shards=1", got)
	}
	if err := layout.Ensure(ctx, rdb, prefix, layout.Default); err != nil {
		t.Fatalf("Ensure again: %v", err)
	}
	err := layout.Ensure(ctx, rdb, prefix, layout.Layout{Shards: 3})
	if !errors.Is(err, layout.ErrOther) || !strings.Contains(err.Error(), "shards=1") || !strings.Contains(err.Error(), "shards=3") {
		t.Fatalf("Ensure(shards=3) over shards=1: %v; want ErrOther naming both", err)
	}
	if got, _ := rdb.Get(ctx, keyspace.LayoutKey(prefix)).Result(); got != "shards=1" {
		t.Fatalf("after a refused Ensure the marker holds %q, want shards=1", got)
	}
	rdb.Set(ctx, keyspace.LayoutKey(prefix), "shards=two", 0)
	if err := layout.Check(ctx, rdb, prefix, layout.Default); err == nil || !strings.Contains(err.Error(), `"shards=two"`) {
		t.Fatalf("Check of a damaged marker: %v; want it named", err)
	}
}

// TestChoose: a worker runs the layout Redis names, or the one it asks
// for, or the default of its Redis: one shard on one Redis, one per master
// on a cluster; it is refused another than Redis names.
func TestChoose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	choose := func(rdb redis.UniversalClient, asked int, want layout.Layout) {
		t.Helper()
		if got, err := layout.Choose(ctx, rdb, prefix, asked); err != nil || got != want {
			t.Errorf("Choose(asked %d) = %v, %v; want %v", asked, got, err, want)
		}
	}
	choose(rdb, 0, layout.Default)
	choose(rdb, 4, layout.Layout{Shards: 4})
	cluster := redistest.Cluster(t)
	choose(cluster, 0, layout.Layout{Shards: len(redistest.ClusterAddrs(t))})
	// An older deployment's limiter key under the prefix keeps one shard.
	older := redistest.Prefix(t)
	if err := cluster.Set(ctx, keyspace.LinesBase(older)+"rule/sms:send/provider", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := layout.Choose(ctx, cluster, older, 0); err != nil || got != layout.Default {
		t.Errorf("Choose on a cluster with an older deployment's keys = %v, %v; want %v", got, err, layout.Default)
	}
	// An asynq server running, and no marker: an older worker, idle.
	srv := asynq.NewServerFromRedisClient(cluster, asynq.Config{Queues: map[string]int{redistest.Prefix(t): 1}, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	testwait.Eventually(t, func() (bool, string) {
		got, err := layout.Choose(ctx, cluster, redistest.Prefix(t), 0)
		return err == nil && got == layout.Default, fmt.Sprintf("Choose with an asynq server running = %v, %v; want %v", got, err, layout.Default)
	})
	if err := layout.Ensure(ctx, rdb, prefix, layout.Layout{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	choose(rdb, 0, layout.Layout{Shards: 2})
	choose(rdb, 2, layout.Layout{Shards: 2})
	_, err := layout.Choose(ctx, rdb, prefix, 3)
	if !errors.Is(err, layout.ErrOther) || !strings.Contains(err.Error(), "shards=2") || !strings.Contains(err.Error(), "shards=3") {
		t.Errorf("Choose(3) against shards=2: %v, want ErrOther naming both", err)
	}
}
