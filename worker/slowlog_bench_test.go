package worker_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// slowlogEnv, set to 1, makes BenchmarkShardsDrain log every command the
// masters run during a drain (SLOWLOG, every duration), summed by script:
// where the Redis CPU of a layout goes. Logging every command slows the
// drain: its other figures are not comparable in such a run.
const slowlogEnv = "SLUICE_BENCH_SLOWLOG"

// slowlogStart makes each master log every command from now on.
func slowlogStart(b *testing.B, masters []*redis.Client) {
	b.Helper()
	if os.Getenv(slowlogEnv) != "1" {
		return
	}
	ctx := context.Background()
	for _, m := range masters {
		for _, err := range []error{m.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(),
			m.ConfigSet(ctx, "slowlog-max-len", "2000000").Err(), m.SlowLogReset(ctx).Err()} {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// slowlogReport logs, for each master, the calls and the summed duration
// of its twenty costliest scripts and commands since slowlogStart.
func slowlogReport(b *testing.B, masters []*redis.Client) {
	b.Helper()
	if os.Getenv(slowlogEnv) != "1" {
		return
	}
	names := map[string]string{
		lua.Lines.Arrive.Hash(): "arrive.lua", lua.Lines.Dispatch.Hash(): "dispatch.lua", lua.Lines.Drop.Hash(): "drop.lua",
		lua.Lines.Granted.Hash(): "granted.lua", lua.Lines.Refresh.Hash(): "refresh.lua", lua.Lines.Wake.Hash(): "wake.lua",
		lua.Lines.Waiting.Hash(): "waiting.lua", lua.Lines.Demand.Hash(): "demand.lua", lua.Decide.Hash(): "decide.lua", lua.Restamp.Hash(): "restamp.lua",
		lua.LeaseGive.Hash(): "lease_give.lua", lua.LeaseTake.Hash(): "lease_take.lua", lua.Claim.Hash(): "claim.lua",
	}
	for i, m := range masters {
		entries, err := m.SlowLogGet(context.Background(), -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		us, calls := map[string]int64{}, map[string]int{}
		for _, e := range entries {
			name := "?"
			if len(e.Args) > 0 {
				name = strings.ToLower(e.Args[0])
			}
			if name == "evalsha" && len(e.Args) > 1 {
				name = cmp.Or(names[e.Args[1]], "script "+e.Args[1][:8]+" (asynq's)")
			}
			us[name] += e.Duration.Microseconds()
			calls[name]++
		}
		top := slices.SortedFunc(maps.Keys(us), func(x, y string) int { return cmp.Compare(us[y], us[x]) })
		var lines []string
		for _, name := range top[:min(20, len(top))] {
			lines = append(lines, fmt.Sprintf("%s: %d calls, %d µs, %.1f µs a call", name, calls[name], us[name], float64(us[name])/float64(calls[name])))
		}
		b.Logf("master %d, %d commands (a script's commands are logged apart too):\n  %s", i+1, len(entries), strings.Join(lines, "\n  "))
	}
}
