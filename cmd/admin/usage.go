package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// runUsage runs "admin usage" with args.
func runUsage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin usage"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	wf := addWindowFlags(fs)
	asJSON := fs.Bool("json", false, "print a JSON array, one object a window, durations in seconds")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	p, code, ok := wf.load(name, stderr)
	if !ok {
		return code
	}
	// What is asked for is checked before Redis is.
	if _, err := policies.Windows(p, *wf.taskType, "", *wf.tenant); err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	c, code, ok := wf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	usage, err := policies.Usage(ctx, c.rdb, c.prefix, p, *wf.taskType, *wf.tenant)
	if err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	if *asJSON {
		if usage == nil {
			usage = []policies.RuleUsage{}
		}
		return printJSON(stdout, stderr, name, usage)
	}
	if len(usage) == 0 {
		fmt.Fprintf(stdout, "%s has no rules: every task type runs unthrottled\n", p.Source())
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tRULE\tSCOPE\tTENANT\tUSED\tIN LINE\tLIMIT\tWINDOW\tNEXT FREE")
	for _, u := range usage {
		tenant, rule := u.Tenant, u.Rule
		if u.Scope == policies.ScopeGlobal {
			tenant = "(all)"
		}
		if u.Shadow {
			rule += " (shadow)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", u.TaskType, rule, u.Scope, tenant,
			u.Used, u.InLine, describeLimit(u), describeWindow(u.RuleWindow), nextFree(u.NextFree))
	}
	if err := tw.Flush(); err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	return 0
}

// describeLimit writes u's limit: "50", or for an adaptive rule its
// limit in force and ceiling, "45 of 200".
func describeLimit(u policies.RuleUsage) string {
	if u.InForce > 0 {
		return fmt.Sprintf("%d of %d", u.InForce, u.Limit)
	}
	return fmt.Sprint(u.Limit)
}

// describeWindow writes w's window as "1s +100ms", with its margin and,
// when it is not the sliding log, its algorithm: "24h +50ms gcra"; a
// concurrency rule's as "in flight, lease 2s".
func describeWindow(w policies.RuleWindow) string {
	if w.Algorithm == throttle.Concurrency {
		return "in flight, lease " + formatDuration(w.Window)
	}
	s := formatDuration(w.Window)
	if w.Margin > 0 {
		s += " +" + formatDuration(w.Margin)
	}
	if w.Algorithm != "" && w.Algorithm != throttle.SlidingLog {
		s += " " + string(w.Algorithm)
	}
	return s
}

// nextFree writes the time until a slot frees: "now", or "in 2.35s".
func nextFree(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	return "in " + formatDuration(d.Round(time.Millisecond))
}
