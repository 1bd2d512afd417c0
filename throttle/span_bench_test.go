package throttle_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// spanLine is the test of decide.lua's search that counts the span of the
// windows holding a time before it walks.
const spanLine = "elseif from == start and redis.call('ZCOUNT', KEYS[i], excl(from - window), excl(from + window)) + cost <= limit then"

// BenchmarkLineSpan reports Redis's own time per denial (INFO commandstats)
// in the first come, first served line (AllowInLine, `worker --fairness
// off`) with 1,000 to 1,500 places ahead, as the report's line section
// sets it up (a tenant's own rule of 20 a minute, a shared one of 100 a
// minute, 50 tenants), with decide.lua as it is and with its span count
// turned off, so that a tenant's rule with room now is walked
// (docs/LIMITER.md, "Places in line, and the frontier"), on a Redis of
// its own. The two take turns, 50 denials at a time, and the ratio is of
// the same run (ns/op counts the two together):
//
//	go test -run '^$' -bench LineSpan -count 3 ./throttle
func BenchmarkLineSpan(b *testing.B) {
	rdb := redistest.OwnClient(b, 0)
	prefix := redistest.Prefix(b)
	ctx := context.Background()
	src := lua.DecideSource()
	if strings.Count(src, spanLine) != 1 {
		b.Fatalf("decide.lua has not one line %q: its span cannot be turned off", spanLine)
	}
	const (
		waiting = 1_000
		perLine = 500 // denials measured on one line
		tenants = 50
		minute  = 60_000_000
	)
	scripts := []*redis.Script{redis.NewScript(src), redis.NewScript(strings.Replace(src, spanLine, "elseif false then", 1))}
	var calls, usec [2]int64
	for done, block := 0, 0; done < b.N; block++ {
		// Each block on two lines of their own, one for each script,
		// filled with waiting places first; the two then take turns, 50
		// denials at a time, and each line stays 1,000 to 1,500 deep.
		b.StopTimer()
		lines := [2]string{}
		call := func(v int, id string, i int) bool {
			tenant := lines[v] + "{s}:tenant:t" + strconv.Itoa(i%tenants)
			reply, err := throttle.ScriptReply(scripts[v].Run(ctx, rdb, throttle.WithFrontiers([]string{tenant, lines[v] + "{s}:provider"}),
				"2", id, 0, 20, minute, 1, "sliding-log", 100, minute, 1, "sliding-log"), minute, minute)
			if err != nil {
				b.Fatal(err)
			}
			return reply[0] == 1
		}
		for v := range lines {
			lines[v] = fmt.Sprintf("%s%d:%d:%d:", prefix, b.N, block, v)
			for i, placed := 0, 0; placed < waiting; i++ {
				if !call(v, "fill-"+strconv.Itoa(i), i) {
					placed++
				}
			}
		}
		for i := 0; i < perLine && done < b.N; i += 50 {
			for v := range lines {
				calls0, usec0 := commandStat(b, rdb, "evalsha")
				b.StartTimer()
				for j := i; j < i+50; j++ {
					if call(v, "deny-"+strconv.Itoa(j), j) {
						b.Fatalf("denial %d admitted", j)
					}
				}
				b.StopTimer()
				calls1, usec1 := commandStat(b, rdb, "evalsha")
				calls[v], usec[v] = calls[v]+calls1-calls0, usec[v]+usec1-usec0
				done += 50
			}
		}
		for _, line := range lines {
			for _, k := range redistest.Keys(b, rdb, line) {
				rdb.Del(ctx, k)
			}
		}
	}
	if calls[0] > 0 && calls[1] > 0 {
		span, walk := float64(usec[0])/float64(calls[0]), float64(usec[1])/float64(calls[1])
		b.ReportMetric(span, "span-redis-µs/call")
		b.ReportMetric(walk, "walk-redis-µs/call")
		b.ReportMetric(span/walk, "span/walk")
	}
}
