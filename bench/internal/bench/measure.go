package bench

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// decideFunc makes one decision on key and reports whether it allowed. An
// error means Redis failed, and stops the measurement.
type decideFunc func(ctx context.Context, key string) (bool, error)

// measure runs decide from callers goroutines at once, each calling it in a
// loop on a key picked at random from keys, for warmup and then d. The
// Round counts the calls started in d: their number over d, their latencies
// and their allowed share. Calls in flight when d ends finish before measure
// returns, so that the next measurement starts on an idle Redis.
func measure(ctx context.Context, callers int, keys []string, warmup, d time.Duration, decide decideFunc) (Round, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type tally struct {
		lat     []time.Duration
		allowed int64
		err     error
	}
	tallies := make([]tally, callers)
	start := time.Now().Add(warmup)
	end := start.Add(d)
	var wg sync.WaitGroup
	for i := range tallies {
		t := &tallies[i]
		wg.Go(func() {
			for {
				key := keys[rand.IntN(len(keys))]
				t0 := time.Now()
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				ok, err := decide(ctx, key)
				lat := time.Since(t0)
				if err != nil {
					if ctx.Err() == nil {
						t.err = err
					}
					cancel()
					return
				}
				if t0.Before(start) {
					continue
				}
				t.lat = append(t.lat, lat)
				if ok {
					t.allowed++
				}
			}
		})
	}
	wg.Wait()

	var n int
	for _, t := range tallies {
		if t.err != nil {
			return Round{}, t.err
		}
		n += len(t.lat)
	}
	if err := ctx.Err(); err != nil {
		return Round{}, err
	}
	lat := make([]time.Duration, 0, n)
	var allowed int64
	for _, t := range tallies {
		lat = append(lat, t.lat...)
		allowed += t.allowed
	}
	return summarize(lat, allowed, d), nil
}
