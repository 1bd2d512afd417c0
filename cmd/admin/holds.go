package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// mostHolds is the most holds "admin holds" lists.
const mostHolds = 1000

// runHolds runs "admin holds" with args: the providers' holds in force.
func runHolds(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin holds"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rf := addRedisFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	c, code, ok := rf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	holds, err := c.limiter().Holds(ctx, mostHolds)
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
	rf := addRedisFlags(fs)
	key := fs.String("key", "", "the hold to end, as admin holds lists it: provider/TYPE, or provider/TYPE/TENANT (required)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !strings.HasPrefix(*key, "provider/") {
		return failf(stderr, 2, name, "--key %q: give a hold as admin holds lists it, provider/TYPE or provider/TYPE/TENANT", *key)
	}
	c, code, ok := rf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	ended, err := c.limiter().Unhold(ctx, *key)
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
