package bench

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// argumentScripts each run 10 ZCOUNTs of one key between two times in
// microseconds of today's clock (16 digits), given to redis.call as Lua
// numbers, which Redis formats with %.17g; as strings made with
// string.format('%d'); and as strings made before the loop, which cost
// nothing a call: what the scripts' numbers cost as arguments.
var argumentScripts = map[string]string{
	"numbers":   "local t = 1795765673427398 for i = 1, 10 do redis.call('ZCOUNT', KEYS[1], t - i, t + i) end return 1",
	"formatted": "local t = 1795765673427398 for i = 1, 10 do redis.call('ZCOUNT', KEYS[1], string.format('%d', t - i), string.format('%d', t + i)) end return 1",
	"strings":   "local a, z = '1795765673427397', '1795765673427399' for i = 1, 10 do redis.call('ZCOUNT', KEYS[1], a, z) end return 1",
}

// BenchmarkScriptArguments reports Redis's own time per call (INFO
// commandstats) of argumentScripts, on a Redis of its own, the key holding
// 100 members: over the strings', what 20 numbers cost as arguments, made
// by Redis or by the script (docs/LIMITER.md, "Where the time went"). Run
// it with -count to see the three take turns:
//
//	go test -run '^$' -bench ScriptArguments -count 3 ./internal/bench
func BenchmarkScriptArguments(b *testing.B) {
	rdb := redistest.OwnClient(b, 0)
	ctx := context.Background()
	const key = "arguments"
	for i := range 100 {
		if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(1795765673427398 - 50 + i), Member: i}).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"numbers", "formatted", "strings"} {
		script := redis.NewScript(argumentScripts[name])
		if err := script.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			runRedisTime(ctx, b, rdb, "evalsha", func() error { return script.EvalSha(ctx, rdb, []string{key}).Err() })
		})
	}
}
