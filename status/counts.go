package status

import "time"

// counts counts events in one-second buckets, over as many seconds as it
// has buckets.
type counts []bucket

type bucket struct {
	sec int64 // the Unix second the bucket counts; a bucket of another second is stale
	n   int
}

func newCounts(span time.Duration) counts { return make(counts, int(span/time.Second)) }

func (c counts) add(now time.Time) {
	s := now.Unix()
	b := &c[int(s%int64(len(c)))]
	if b.sec != s {
		*b = bucket{sec: s}
	}
	b.n++
}

// sum returns the events of the last len(c) seconds, the current one
// included.
func (c counts) sum(now time.Time) int {
	s := now.Unix()
	n := 0
	for _, b := range c {
		if b.sec <= s && b.sec > s-int64(len(c)) {
			n += b.n
		}
	}
	return n
}
