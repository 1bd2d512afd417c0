package sink

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// t0 is the time the tests' arrivals count from.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// at returns the times t0 plus each of ms, in milliseconds.
func at(ms ...int) []time.Time {
	ts := make([]time.Time, len(ms))
	for i, m := range ms {
		ts[i] = t0.Add(time.Duration(m) * time.Millisecond)
	}
	return ts
}

func TestInLastWindow(t *testing.T) {
	t.Parallel()
	times := at(0, 100, 999, 1000, 1500)
	cases := []struct {
		name string
		at   time.Time
		want int
	}{
		{"at the first", t0, 1},
		{"at 999 ms", t0.Add(999 * time.Millisecond), 3},
		{"at 1 s the first has left", t0.Add(time.Second), 3},
		{"at the last", t0.Add(1500 * time.Millisecond), 3},
		{"at 2 s", t0.Add(2 * time.Second), 1},
		{"long after", t0.Add(time.Hour), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// inLastWindow counts the times up to at: those after it have
			// not arrived yet.
			var upTo []time.Time
			for _, ts := range times {
				if !ts.After(tc.at) {
					upTo = append(upTo, ts)
				}
			}
			if got, want := inLastWindow(upTo, tc.at, time.Second), tc.want; got != want {
				t.Errorf("inLastWindow(%v) = %d, want %d", tc.at.Sub(t0), got, want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	ms := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Millisecond) }
	receipts := []Receipt{
		{"a1", "acme", ms(0)},
		{"b1", "big", ms(0)},
		{"a2", "acme", ms(100)},
		{"b2", "big", ms(200)},
		{"a1", "acme", ms(300)}, // duplicate
		{"a3", "acme", ms(400)},
		{"a4", "acme", ms(500)}, // acme's 5th in a second: above a limit of 4
		{"g1", "globex", ms(1200)},
		{"b2", "big", ms(1300)}, // duplicate
		{"b2", "big", ms(1400)}, // and again
	}
	cases := []struct {
		name   string
		window time.Duration
		want   Report
	}{
		{"1s", time.Second, Report{
			Window: "1s",
			Counts: Counts{Received: 10, Unique: 7, Duplicates: 3, DuplicateIDs: []string{"a1", "b2"}, MaxInWindow: 7, First: ms(0), Last: ms(1400)},
			Tenants: map[string]Counts{
				"acme":   {Received: 5, Unique: 4, Duplicates: 1, DuplicateIDs: []string{"a1"}, MaxInWindow: 5, First: ms(0), Last: ms(500)},
				"big":    {Received: 4, Unique: 2, Duplicates: 2, DuplicateIDs: []string{"b2"}, MaxInWindow: 2, First: ms(0), Last: ms(1400)},
				"globex": {Received: 1, Unique: 1, MaxInWindow: 1, First: ms(1200), Last: ms(1200)},
			},
		}},
		{"250ms", 250 * time.Millisecond, Report{
			Window: "250ms",
			Counts: Counts{Received: 10, Unique: 7, Duplicates: 3, DuplicateIDs: []string{"a1", "b2"}, MaxInWindow: 4, First: ms(0), Last: ms(1400)},
			Tenants: map[string]Counts{
				"acme":   {Received: 5, Unique: 4, Duplicates: 1, DuplicateIDs: []string{"a1"}, MaxInWindow: 3, First: ms(0), Last: ms(500)},
				"big":    {Received: 4, Unique: 2, Duplicates: 2, DuplicateIDs: []string{"b2"}, MaxInWindow: 2, First: ms(0), Last: ms(1400)},
				"globex": {Received: 1, Unique: 1, MaxInWindow: 1, First: ms(1200), Last: ms(1200)},
			},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, summarize(receipts, tc.window)); diff != "" {
				t.Errorf("summarize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeNothing(t *testing.T) {
	t.Parallel()
	want := Report{Window: "1s", Tenants: map[string]Counts{}}
	if diff := cmp.Diff(want, summarize(nil, time.Second)); diff != "" {
		t.Errorf("summarize(nil) (-want +got):\n%s", diff)
	}
}
