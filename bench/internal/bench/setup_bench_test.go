package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
)

// setUpScripts are scripts that only set up what a script's slow path sets
// up before its first command: nothing, 30 tables, and 15 functions that
// each capture 8 of 30 locals (allow.lua's slow path makes 14 functions
// capturing 68 locals in all, the lines' arrive.lua's full path 40 capturing 165).
func setUpScripts() map[string]string {
	var locals, closures strings.Builder
	for i := range 30 {
		fmt.Fprintf(&locals, "local v%d = {}\n", i)
	}
	for j := range 15 {
		var vs []string
		for _, d := range []int{0, 3, 7, 11, 13, 17, 19, 23} {
			vs = append(vs, fmt.Sprintf("v%d", (j+d)%30))
		}
		fmt.Fprintf(&closures, "local function f%d() return %s end\n", j, strings.Join(vs, ", "))
	}
	return map[string]string{
		"nothing":  "return 1",
		"tables":   locals.String() + "return 1",
		"closures": locals.String() + closures.String() + "return 1",
	}
}

// BenchmarkScriptSetUp reports Redis's own time per call (INFO
// commandstats) of scripts that only set up tables and functions, on a
// Redis of its own: what a Lua script pays per call before its first
// command, since every call runs the script from its top (docs/LIMITER.md,
// "The hot path"). Run it with -count to see the three take turns:
//
//	go test -run '^$' -bench ScriptSetUp -count 3 ./internal/bench
func BenchmarkScriptSetUp(b *testing.B) {
	rdb := redistest.OwnClient(b, 0)
	ctx := context.Background()
	scripts := setUpScripts()
	for _, name := range []string{"nothing", "tables", "closures"} {
		script := redis.NewScript(scripts[name])
		if err := script.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			runRedisTime(ctx, b, rdb, "evalsha", func() error { return script.EvalSha(ctx, rdb, nil).Err() })
		})
	}
}
