package integration_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// admissions reads a sliding log every 100 ms while a drain runs and
// keeps each task's admission time, from the members the limiter wrote
// ('<µs>-c<id>#1', or '<s>.<µs>-c<id>#1' when admitted at once): what the
// margin must absorb is the time from there to the provider.
type admissions struct {
	mu   sync.Mutex
	at   map[string]time.Time // task id -> admission
	stop func()
}

// recordAdmissions starts reading the log of rule key (as the policies
// name it, "rule/<type>/<rule>") under prefix: in the default group, or
// in each of groups (the shards of a global rule).
func recordAdmissions(t *testing.T, rdb redis.UniversalClient, prefix, key string, groups ...string) *admissions {
	t.Helper()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	var redisKeys []string
	for _, g := range groups {
		k, err := l.InGroup(g).RedisKey(key)
		if err != nil {
			t.Fatal(err)
		}
		redisKeys = append(redisKeys, k)
	}
	if len(groups) == 0 {
		k, err := l.RedisKey(key)
		if err != nil {
			t.Fatal(err)
		}
		redisKeys = append(redisKeys, k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a := &admissions{at: map[string]time.Time{}}
	a.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, redisKey := range redisKeys {
				members, err := rdb.ZRange(ctx, redisKey, 0, -1).Result()
				if err == nil {
					a.mu.Lock()
					for _, m := range members {
						if id, at, ok := admission(m); ok {
							a.at[id] = at
						}
					}
					a.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(a.stop)
	return a
}

// admission reads a log member written at an admission.
func admission(m string) (string, time.Time, bool) {
	i := strings.Index(m, "-c")
	j := strings.LastIndex(m, "#")
	if i <= 0 || j < i {
		return "", time.Time{}, false // a place, not yet an admission
	}
	var us int64
	if s, frac, ok := strings.Cut(m[:i], "."); ok {
		sec, err1 := strconv.ParseInt(s, 10, 64)
		micro, err2 := strconv.ParseInt(frac, 10, 64)
		if err1 != nil || err2 != nil {
			return "", time.Time{}, false
		}
		us = sec*1e6 + micro
	} else {
		v, err := strconv.ParseInt(m[:i], 10, 64)
		if err != nil {
			return "", time.Time{}, false
		}
		us = v
	}
	return m[i+2 : j], time.UnixMicro(us), true
}

// delays returns, sorted, each receipt's time from its task's admission
// to its arrival at the provider; the tasks for which it was longer than
// margin; every admission read; and how many receipts had no admission
// read.
func (a *admissions) delays(rs []receipt, margin time.Duration) ([]time.Duration, map[string]bool, []time.Time, int) {
	a.stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	late := map[string]bool{}
	missing := 0
	for _, r := range rs {
		at, ok := a.at[r.ID]
		if !ok {
			missing++
			continue
		}
		d := r.At.Sub(at)
		out = append(out, d)
		if d > margin {
			late[r.ID] = true
		}
	}
	slices.Sort(out)
	all := make([]time.Time, 0, len(a.at))
	for _, at := range a.at {
		all = append(all, at)
	}
	return out, late, all, missing
}

// quantile returns the q-quantile of sorted ds, nearest rank.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(math.Ceil(q*float64(len(ds))))-1)]
}
