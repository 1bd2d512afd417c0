package throttle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// TestKeyCheck: with keycheck.lua in front, a script's command on a key
// not in KEYS fails (through redis.call, and as an error reply through
// redis.pcall) and writes nothing, while one on a declared key runs; and
// decide.lua runs under it. The suites run every script that declares its
// keys under it when SLUICE_LUA_KEYCHECK=1 (make test does).
func TestKeyCheck(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		declared, other := rawKey(prefix, "declared"), rawKey(prefix, "other")
		set := redis.NewScript(lua.WithKeyCheck("return redis.call('SET', ARGV[1], 'x')"))
		if err := set.Run(ctx, rdb, []string{declared}, declared).Err(); err != nil {
			t.Fatalf("SET of a declared key: %v", err)
		}
		err := set.Run(ctx, rdb, []string{declared}, other).Err()
		if err == nil || !strings.Contains(err.Error(), "key check: SET "+other+" is not in KEYS") {
			t.Fatalf("SET of a key not in KEYS: %v, want it refused by the key check", err)
		}
		if n := rdb.Exists(ctx, other).Val(); n != 0 {
			t.Errorf("the refused SET wrote its key")
		}
		del := redis.NewScript(lua.WithKeyCheck("local r = redis.pcall('DEL', KEYS[1], ARGV[1]) return r['err'] or 'deleted'"))
		got, err := del.Run(ctx, rdb, []string{declared}, other).Text()
		if err != nil || !strings.Contains(got, "key check: DEL "+other) {
			t.Errorf("redis.pcall DEL of a declared and an undeclared key: %q, %v, want the key check's error", got, err)
		}
		decide := redis.NewScript(lua.WithKeyCheck(lua.DecideSource()))
		log := rawKey(prefix, "log")
		args := []any{"2", "c1", 0, 1, 10_000_000, 1, "sliding-log"}
		for i := range 2 { // admitted, then placed in line
			if err := decide.Run(ctx, rdb, throttle.WithFrontiers([]string{log}), args...).Err(); err != nil {
				t.Fatalf("decide.lua under the key check, call %d: %v", i, err)
			}
			args[1] = "c2"
		}
	})
}
