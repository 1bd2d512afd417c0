package bench

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	// 1..1000 µs: the p-th percentile by nearest rank is p*10 µs.
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * time.Microsecond
	}
	us := time.Microsecond
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value, any p", []time.Duration{7 * us}, 99.9, 7 * us},
		{"p50 of 1..1000", thousand, 50, 500 * us},
		{"p90 of 1..1000", thousand, 90, 900 * us},
		{"p99 of 1..1000", thousand, 99, 990 * us},
		{"p99.9 of 1..1000", thousand, 99.9, 999 * us},
		{"p100 is the largest", thousand, 100, 1000 * us},
		{"tiny p is the smallest", thousand, 0.001, 1 * us},
		// Nearest rank never interpolates: the median of four is the second.
		{"p50 of four", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p99.9 of four is the largest", []time.Duration{1, 2, 3, 4}, 99.9, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(c.sorted, c.p); got != c.want {
				t.Errorf("percentile(%d values, %v) = %v, want %v", len(c.sorted), c.p, got, c.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{3}, 3},
		{"odd, unsorted", []float64{5, 1, 3}, 3},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"an outlier does not move it", []float64{10, 11, 1000, 12, 9}, 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(c.xs)
			if got := median(c.xs); got != c.want {
				t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
			}
			if !slices.Equal(in, c.xs) {
				t.Errorf("median changed its input: %v, was %v", c.xs, in)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	// 2,000 calls in 2 s, unsorted, 1,500 allowed: 1,000 a second.
	lat := make([]time.Duration, 2000)
	for i := range lat {
		lat[i] = time.Duration(2000-i) * time.Microsecond
	}
	got := summarize(lat, 1500, 2*time.Second)
	want := Round{Calls: 2000, PerSecond: 1000, AllowedShare: 0.75, P50: 1000, P90: 1800, P99: 1980, P999: 1998}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarize (-want +got):\n%s", diff)
	}
	if got := summarize(nil, 0, time.Second); got != (Round{}) {
		t.Errorf("summarize of no calls = %+v, want the zero Round", got)
	}
}

func TestMedianRound(t *testing.T) {
	t.Parallel()
	rounds := []Round{
		{Calls: 100, PerSecond: 50, AllowedShare: 1, P50: 10, P90: 20, P99: 90, P999: 100, RedisUsPerCall: 5},
		{Calls: 300, PerSecond: 150, AllowedShare: 1, P50: 30, P90: 40, P99: 50, P999: 500, RedisUsPerCall: 7},
		{Calls: 200, PerSecond: 100, AllowedShare: 0.5, P50: 20, P90: 60, P99: 70, P999: 300, RedisUsPerCall: 6},
	}
	// Field by field: the median p99 (70) is not from the median round by
	// throughput (the third).
	want := Round{Calls: 200, PerSecond: 100, AllowedShare: 1, P50: 20, P90: 40, P99: 70, P999: 300, RedisUsPerCall: 6}
	m := measurement(rounds)
	if diff := cmp.Diff(want, m.Median); diff != "" {
		t.Errorf("median (-want +got):\n%s", diff)
	}
	if len(m.Rounds) != 3 {
		t.Errorf("measurement kept %d rounds, want 3", len(m.Rounds))
	}
}

func TestThroughputRatio(t *testing.T) {
	t.Parallel()
	r := func(perSecond ...float64) []Round {
		out := make([]Round, len(perSecond))
		for i, x := range perSecond {
			out[i].PerSecond = x
		}
		return out
	}
	cases := []struct {
		name     string
		num, den []Round
		want     Ratio
	}{
		{"round by round", r(80, 90, 50), r(100, 100, 100), Ratio{Median: 0.8, Min: 0.5, Max: 0.9}},
		// The median of the rounds' ratios (0.9, 0.5, 1.0), not the ratio of
		// the medians (60/60): each ratio compares runs seconds apart.
		{"paired", r(45, 100, 60), r(50, 200, 60), Ratio{Median: 0.9, Min: 0.5, Max: 1}},
		{"a zero denominator is skipped", r(80, 90), r(0, 100), Ratio{Median: 0.9, Min: 0.9, Max: 0.9}},
		{"unequal lengths use the common rounds", r(80, 90, 70), r(100, 100), Ratio{Median: 0.85, Min: 0.8, Max: 0.9}},
		{"nothing to divide", nil, nil, Ratio{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := throughputRatio(c.num, c.den)
			if diff := cmp.Diff(c.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
				t.Errorf("throughputRatio (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCommandStats(t *testing.T) {
	t.Parallel()
	info := "# Commandstats\r\n" +
		"cmdstat_eval:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=100000,usec=1393911,usec_per_call=13.94,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=2,usec=40,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n"
	if got, want := parseCommandStats(info, "evalsha"), (commandStats{calls: 100000, usec: 1393911}); got != want {
		t.Errorf("evalsha = %+v, want %+v", got, want)
	}
	if got := parseCommandStats(info, "zadd"); got != (commandStats{}) {
		t.Errorf("a command that never ran = %+v, want zero", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero: every default", Config{}, false},
		{"some sections", Config{Sections: []string{"memory", "limiter", "memory"}}, false},
		{"unknown section", Config{Sections: []string{"limiter", "plots"}}, true},
		{"negative worker tasks", Config{WorkerTasks: -1}, true},
		{"negative worker concurrency", Config{WorkerConcurrency: -1}, true},
		{"no section", Config{Sections: []string{}}, true},
		{"negative duration", Config{Duration: -time.Second}, true},
		{"zero callers", Config{Callers: []int{1, 0}}, true},
		{"no callers", Config{Callers: []int{}}, true},
		{"units above MaxLimit", Config{MemoryUnits: []int{100_001}}, true},
		{"the slow drain", Config{DrainSlow: true}, false},
		{"two drain scenarios", Config{DrainShort: true, DrainSlow: true}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := c.cfg.Validate(); (err != nil) != c.wantErr {
				t.Errorf("Validate() = %v, want error: %v", err, c.wantErr)
			}
		})
	}
	cfg, err := withDefaults(Config{Sections: []string{"worker", "memory", "limiter", "memory"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Sections, []string{"limiter", "memory", "worker"}; !slices.Equal(got, want) {
		t.Errorf("sections = %v, want %v (in the order they run, once each)", got, want)
	}
	if cfg.Duration != DefaultDuration || cfg.Repeat != DefaultRepeat || cfg.Keys != DefaultKeys || !slices.Equal(cfg.Callers, DefaultCallers) ||
		cfg.WorkerTasks != DefaultWorkerTasks || cfg.WorkerConcurrency != DefaultWorkerConcurrency {
		t.Errorf("defaults not filled: %+v", cfg)
	}
}
