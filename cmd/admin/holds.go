package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/throttle"
)

// mostHolds is the most holds "admin holds" lists.
const mostHolds = 1000

// runHolds runs "admin holds" with args: the providers' holds in force.
func runHolds(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin holds"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	redisURL := fs.String("redis", "", redisconn.RedisURLHelp)
	prefix := fs.String("prefix", throttle.DefaultPrefix, "prefix of the limiter's Redis keys, as the workers' --prefix")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if strings.ContainsAny(*prefix, "{}") {
		return failf(stderr, 2, name, "--prefix %q: may not contain a brace", *prefix)
	}
	rdb, err := redisconn.Connect(ctx, *redisURL)
	if err != nil {
		return failf(stderr, cli.ExitStatus(err), name, "%v", err)
	}
	defer rdb.Close()
	holds, err := throttle.NewLimiter(rdb, throttle.WithPrefix(*prefix)).Holds(ctx, mostHolds)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	if len(holds) == 0 {
		fmt.Fprintln(stdout, "no provider holds")
		return 0
	}
	for _, h := range holds {
		// Quoted: a tenant comes from a task header, and may hold what a
		// terminal would obey.
		fmt.Fprintf(stdout, "%q held for %s more\n", h.Key, formatDuration(h.Left.Round(100_000_000)))
	}
	return 0
}

// runUnhold runs "admin unhold" with args: ends a provider's hold.
func runUnhold(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin unhold"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	redisURL := fs.String("redis", "", redisconn.RedisURLHelp)
	prefix := fs.String("prefix", throttle.DefaultPrefix, "prefix of the limiter's Redis keys, as the workers' --prefix")
	key := fs.String("key", "", "the hold to end, as admin holds lists it: provider/TYPE, or provider/TYPE/TENANT (required)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	switch {
	case !strings.HasPrefix(*key, "provider/"):
		return failf(stderr, 2, name, "--key %q: give a hold as admin holds lists it, provider/TYPE or provider/TYPE/TENANT", *key)
	case strings.ContainsAny(*prefix, "{}"):
		return failf(stderr, 2, name, "--prefix %q: may not contain a brace", *prefix)
	}
	rdb, err := redisconn.Connect(ctx, *redisURL)
	if err != nil {
		return failf(stderr, cli.ExitStatus(err), name, "%v", err)
	}
	defer rdb.Close()
	ended, err := throttle.NewLimiter(rdb, throttle.WithPrefix(*prefix)).Unhold(ctx, *key)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	if !ended {
		fmt.Fprintf(stdout, "no hold %q: nothing to end\n", *key)
		return 0
	}
	fmt.Fprintf(stdout, "ended the hold %q: the workers send again within 250 ms\n", *key)
	return 0
}
