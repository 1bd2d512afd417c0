package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/policies"
)

// runReset runs "admin reset" with args.
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin reset"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	wf := addWindowFlags(fs)
	rule := fs.String("rule", "", "reset only this rule's window (a rule of scope tenant); default every tenant rule")
	yes := fs.Bool("yes", false, "reset; without it the command only says what it would reset, and exits 2")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	p, code, ok := wf.load(name, stderr)
	if !ok {
		return code
	}
	reset, left, err := policies.ResetPlan(p, *wf.taskType, *rule, *wf.tenant)
	if err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	if len(reset) == 0 {
		report(stdout, "", nil, left)
		fmt.Fprintf(stdout, "nothing to reset: no rule of scope tenant selected for tenant %s\n", *wf.tenant)
		return 0
	}
	if !*yes {
		report(stdout, "would ", reset, left)
		return failf(stderr, 2, name, "nothing reset: give --yes to empty the %d window%s of tenant %s listed", len(reset), plural(len(reset)), *wf.tenant)
	}

	c, code, ok := wf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	reset, left, err = policies.ResetTenant(ctx, c.rdb, c.prefix, p, *wf.taskType, *rule, *wf.tenant)
	report(stdout, "", reset, left)
	if err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	return 0
}

// report prints one line for each window reset and each global window
// left as it is; verb is "" or "would ".
func report(w io.Writer, verb string, reset, left []policies.RuleWindow) {
	for _, r := range reset {
		fmt.Fprintf(w, "%sreset %s %s for tenant %s (key %s)\n", verb, r.TaskType, r.Rule, r.Tenant, r.Key)
	}
	for _, r := range left {
		fmt.Fprintf(w, "%snot reset %s %s: global, shared by every tenant\n", verb, r.TaskType, r.Rule)
	}
}

// plural returns "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
