package bench

import (
	"slices"
	"testing"
)

func TestCommandCosts(t *testing.T) {
	t.Parallel()
	info := "# Commandstats\r\ncmdstat_evalsha:calls=300,usec=6000,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zadd:calls=100,usec=300,usec_per_call=3.00\r\ncmdstat_info:calls=9,usec=90,usec_per_call=10.00\r\n" +
		"cmdstat_get:calls=5,usec=5,usec_per_call=1.00\r\n"
	before := parseAllCommandStats(info)
	if got, want := before["evalsha"], (commandStats{calls: 300, usec: 6000}); got != want {
		t.Errorf("evalsha %+v, want %+v", got, want)
	}
	after := map[string]commandStats{
		"evalsha": {calls: 500, usec: 10000}, "zadd": {calls: 300, usec: 900}, "info": {calls: 20, usec: 200},
		"get": {calls: 5, usec: 5}, "pexpire": {calls: 100, usec: 100},
	}
	// INFO is the measurement's own, GET did not run between the reads;
	// PEXPIRE is new since the first.
	got := commandCosts(before, after, 100)
	want := []CommandCost{{"evalsha", 2, 40}, {"zadd", 2, 6}, {"pexpire", 1, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("commandCosts = %+v, want %+v", got, want)
	}
	// A command missing from a round counts zero there.
	med := medianCosts([][]CommandCost{want, {{"evalsha", 4, 60}}, {{"evalsha", 3, 50}, {"zadd", 1, 2}}})
	if w := []CommandCost{{"evalsha", 3, 50}, {"zadd", 1, 2}, {"pexpire", 0, 0}}; !slices.Equal(med, w) {
		t.Errorf("medianCosts = %+v, want %+v", med, w)
	}
}
