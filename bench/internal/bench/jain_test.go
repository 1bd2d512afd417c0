package bench

import (
	"math"
	"testing"
	"time"
)

// TestJainOf: made-up deliveries of three tenants over 10 windows.
func TestJainOf(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	every := func(from, step time.Duration, n int) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = start.Add(from + time.Duration(i)*step)
		}
		return out
	}
	cases := []struct {
		name       string
		deliveries [][]time.Time
		wantMin    float64
		stretches  int
	}{
		// Two tenants at the same pace for 10 s: every stretch of 5 s
		// (starting at 0 to 5 s, while both still have a send after it)
		// is even.
		{"even", [][]time.Time{every(0, 100*time.Millisecond, 100), every(50*time.Millisecond, 100*time.Millisecond, 100)}, 1, 5},
		// One sends three times as often: (1+3)²/(2·(1+9)) = 0.8.
		{"three to one", [][]time.Time{every(0, 300*time.Millisecond, 40), every(0, 100*time.Millisecond, 120)}, 0.8, 7},
		// The second tenant's last send is at 2 s: no stretch has two
		// backlogged tenants.
		{"one backlogged", [][]time.Time{every(0, 100*time.Millisecond, 100), every(0, time.Second, 3)}, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := jainOf(tc.deliveries, nil, start, time.Second)
			if math.Abs(got.Min-tc.wantMin) > 0.01 || got.Stretches != tc.stretches {
				t.Errorf("jainOf = %+v, want min %v over %d stretches", got, tc.wantMin, tc.stretches)
			}
		})
	}
}
