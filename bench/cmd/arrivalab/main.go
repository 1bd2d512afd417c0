// Command arrivalab measures the Redis time of the fair lines' most common
// call, an arrival admitted at once, for lua/arrive.lua against lua/fair.lua
// of REV (read from git history), taking turns in blocks of 1,000 calls, and
// prints the medians and the paired differences. Usage, on a Redis of your
// own on loopback (its keys "ab:{limits}..." are written and deleted):
//
//	go -C bench run ./cmd/arrivalab [-rev REV] [-pairs N] ADDR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

func main() {
	rev := flag.String("rev", "3240b42", "the commit whose lua/fair.lua is the other contender")
	pairs := flag.Int("pairs", 80, "pairs of 1,000-call blocks")
	flag.Parse()
	if flag.NArg() != 1 || *pairs < 1 {
		fmt.Fprintln(os.Stderr, "usage: arrivalab [-rev REV] [-pairs N] ADDR")
		os.Exit(2)
	}
	if err := run(context.Background(), flag.Arg(0), *rev, *pairs); err != nil {
		fmt.Fprintln(os.Stderr, "arrivalab:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, rev string, pairs int) error {
	oldSrc, err := exec.CommandContext(ctx, "git", "show", rev+":lua/fair.lua").Output()
	if err != nil {
		return fmt.Errorf("git show %s:lua/fair.lua: %w", rev, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = rdb.Close() }()
	old := redis.NewScript(lua.CountersSource() + "\n" + string(oldSrc))
	base := "ab:{limits}"
	tenant, provider := base+":tenant:acme", base+":provider"
	defer rdb.Del(ctx, tenant, provider, base+"qw", base+"qt", base+"qg")
	oldRules := fmt.Sprintf(`[{"k":%q,"l":100000000,"w":1000000,"c":1,"a":"sliding-log","s":0},`+
		`{"k":%q,"l":100000000,"w":1000000,"c":1,"a":"sliding-log","s":1}]`, tenant, provider)
	call := func(useOld bool, id string) error {
		if useOld {
			return old.Run(ctx, rdb, []string{base + "qw"}, "arrive", base, 150000, 50000, 32, 10, 500000, "sms", 3, "acme", "1", "q", id,
				oldRules, tenant, 100000000, 1000000, 1, 0, provider, 100000000, 1000000, 1, 1).Err()
		}
		return lua.Lines.Arrive.Run(ctx, rdb, []string{base + "qw", base + "qt", base + "qg"}, base, 150000, 50000, 32, 10, 500000,
			"sms", 3, "acme", "1", "q", id, tenant, 100000000, 1000000, 1, "sliding-log", 0, provider, 100000000, 1000000, 1, "sliding-log", 1).Err()
	}
	var olds, news, diffs []float64
	for b := range pairs {
		per := map[bool]float64{}
		for _, useOld := range []bool{b%2 == 0, b%2 == 1} {
			before, err := evalshaMicros(ctx, rdb)
			if err != nil {
				return err
			}
			for i := range 1000 {
				if err := call(useOld, fmt.Sprint("b", b, useOld, i)); err != nil {
					return err
				}
			}
			after, err := evalshaMicros(ctx, rdb)
			if err != nil {
				return err
			}
			per[useOld] = (after - before) / 1000
			rdb.Del(ctx, tenant, provider)
		}
		olds, news, diffs = append(olds, per[true]), append(news, per[false]), append(diffs, per[false]-per[true])
	}
	for _, s := range [][]float64{olds, news, diffs} {
		slices.Sort(s)
	}
	q := func(s []float64, p float64) float64 { return s[int(p*float64(len(s)-1))] }
	fmt.Printf("admission at once, Redis time per call, %d pairs of 1,000-call blocks taking turns:\n"+
		"  fair.lua of %s median %.2f us, arrive.lua %.2f us; arrive - fair per pair: p25 %.2f, median %.2f, p75 %.2f us\n",
		pairs, rev, q(olds, .5), q(news, .5), q(diffs, .25), q(diffs, .5), q(diffs, .75))
	return nil
}

// evalshaMicros reads the microseconds Redis has spent in EVALSHA.
func evalshaMicros(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if _, rest, ok := strings.Cut(line, "cmdstat_evalsha:"); ok {
			var us float64
			if _, err := fmt.Sscanf(strings.SplitN(rest, "usec=", 2)[1], "%f", &us); err == nil {
				return us, nil
			}
		}
	}
	return 0, fmt.Errorf("no EVALSHA in INFO commandstats")
}
