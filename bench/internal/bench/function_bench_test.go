package bench

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkFunctionVsScript runs one body, the textbook log
// (textbookSource), as a script (EVALSHA) and as a Redis 7 function
// (FCALL), on a Redis of its own, over 10,000 keys that never fill, and
// reports Redis's own time per call of each (INFO commandstats): what
// moving Sluice's scripts to functions would save (docs/LIMITER.md, "The
// hot path"). Run it with -count to see the two take turns:
//
//	go test -run '^$' -bench FunctionVsScript -count 3 ./internal/bench
func BenchmarkFunctionVsScript(b *testing.B) {
	rdb := redistest.OwnClient(b, 64)
	ctx := context.Background()
	library := "#!lua name=sluicebench\nredis.register_function('textbook', function(KEYS, ARGV)\n" +
		textbookSource + "\nend)\n"
	if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
		b.Fatal(err)
	}
	if err := textbookScript.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	contenders := []struct {
		name, command string
		call          func(key string, member string) error
	}{
		{"script", "evalsha", func(key, member string) error {
			return textbookScript.EvalSha(ctx, rdb, []string{key}, 1_000_000, 1_000_000, member).Err()
		}},
		{"function", "fcall", func(key, member string) error {
			return rdb.FCall(ctx, "textbook", []string{key}, 1_000_000, 1_000_000, member).Err()
		}},
	}
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) {
			runRedisTime(ctx, b, rdb, c.command, func() error {
				return c.call("k"+strconv.Itoa(rand.IntN(10_000)), strconv.FormatInt(seq.Add(1), 10))
			})
		})
	}
}
