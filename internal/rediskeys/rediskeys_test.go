package rediskeys_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/rediskeys"
	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestScan writes keys that hash to many slots, so that on a cluster they
// are on every master, with keys that the pattern must not match, and
// checks that Scan finds exactly the matching ones.
func TestScan(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"server", func(t *testing.T) redis.UniversalClient { return redistest.Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.Cluster(t) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := tc.rdb(t)
			prefix := redistest.Prefix(t)
			var want []string
			for i := range 100 {
				// prefix+"x" does not match prefix+"k*"; other+... neither.
				for _, k := range []string{prefix + "k" + strconv.Itoa(i), prefix + "x" + strconv.Itoa(i), "other-" + prefix + "k" + strconv.Itoa(i)} {
					if err := rdb.Set(ctx, k, 1, 0).Err(); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { rdb.Del(context.Background(), k) })
				}
				want = append(want, prefix+"k"+strconv.Itoa(i))
			}
			if cc, ok := rdb.(*redis.ClusterClient); ok {
				var masters atomic.Int32 // ForEachMaster's calls overlap
				_ = cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error {
					masters.Add(1)
					return nil
				})
				if masters := masters.Load(); masters < 2 {
					t.Fatalf("the test cluster has %d masters; want several, so that a scan of one would miss keys", masters)
				}
			}
			got, err := rediskeys.Scan(ctx, rdb, prefix+"k*")
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			slices.Sort(got)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Scan %sk* (-want +got):\n%s", prefix, diff)
			}
		})
	}
}

func TestScanError(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if keys, err := rediskeys.Scan(ctx, rdb, "*"); err == nil || keys != nil {
		t.Errorf("Scan with a cancelled context = %v, %v; want nil and an error", keys, err)
	}
}
