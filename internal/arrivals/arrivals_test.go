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

func TestOverLimit(t *testing.T) {
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
		limit int
		want  int
	}{
		{"none", nil, 1, 0},
		{"at the limit", at(0, 500, 999), 3, 0},
		{"one over", at(0, 500, 999), 2, 1},
		{"a window later the slot is free again", at(0, 500, 1000), 2, 0},
		{"every arrival of a burst past the limit", at(0, 0, 0, 0, 0), 2, 3},
		{"unsorted", at(999, 0, 500), 2, 1},
		{"two bursts a window apart", at(0, 0, 0, 1000, 1000, 1000), 2, 2},
		{"a burst straddling a boundary: only the last window holds 4", at(0, 1, 2, 1000, 1001, 1002, 1999), 3, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := OverLimit(tc.times, time.Second, tc.limit); got != tc.want {
				t.Errorf("OverLimit(limit %d) = %d, want %d", tc.limit, got, tc.want)
			}
			// Nothing is over a limit of MaxInWindow, and something is over
			// one less.
			if m := MaxInWindow(tc.times, time.Second); m > 0 {
				if got := OverLimit(tc.times, time.Second, m); got != 0 {
					t.Errorf("OverLimit(MaxInWindow %d) = %d, want 0", m, got)
				}
				if got := OverLimit(tc.times, time.Second, m-1); got == 0 {
					t.Errorf("OverLimit(MaxInWindow-1 %d) = 0, want more", m-1)
				}
			}
		})
	}
}
