package arrivals

import (
	"testing"
	"time"
)

func TestMaxInWindow(t *testing.T) {
	t.Parallel()
	at := func(ms ...int) []time.Time {
		base := time.Unix(1_700_000_000, 0)
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = base.Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	cases := []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"none", nil, time.Second, 0},
		{"one", at(5), time.Second, 1},
		{"exactly a window apart are in different windows", at(0, 1000, 2000), time.Second, 1},
		{"just under a window apart share one", at(0, 999), time.Second, 2},
		{"a burst at the boundary", at(0, 1, 2, 1000, 1001, 1002, 1999), time.Second, 4},
		{"unsorted", at(1500, 0, 900, 100), time.Second, 3},
		{"same instant", at(7, 7, 7), time.Millisecond, 3},
		{"the limit at every step, never above", at(0, 0, 0, 0, 1000, 1000, 1000, 1000, 2000), time.Second, 4},
		{"the densest span is in the middle", at(0, 900, 1500, 1600, 1700, 1800, 2600, 3000), time.Second, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orig := append([]time.Time(nil), tc.times...)
			if got := MaxInWindow(tc.times, tc.w); got != tc.want {
				t.Errorf("MaxInWindow = %d, want %d", got, tc.want)
			}
			for i := range orig {
				if !orig[i].Equal(tc.times[i]) {
					t.Fatalf("MaxInWindow reordered its input")
				}
			}
		})
	}
}
