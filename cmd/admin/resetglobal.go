package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/policies"
)

// runResetGlobal runs "admin reset-global" with args.
func runResetGlobal(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin reset-global"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rf := addRedisFlags(fs)
	policyFile := fs.String("policies", "", "the workers' policies `file` (YAML)")
	taskType := fs.String("type", "", "task `type` of the rule, such as sms:send (required)")
	rule := fs.String("rule", "", "the global rule whose window to empty (required)")
	yes := fs.Bool("yes", false, "reset; without it the command only says what it would reset, and exits 2")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	switch {
	case *taskType == "" || *rule == "":
		return failf(stderr, 2, name, "give --type and --rule: the global window to empty")
	case *policyFile == "":
		return failf(stderr, 2, name, "no policies: set --policies or SLUICE_POLICIES to the workers' file")
	}
	if code, ok := rf.checkPrefix(name, stderr); !ok {
		return code
	}
	p, err := policies.Load(*policyFile)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	w, err := policies.GlobalWindow(p, *taskType, *rule)
	if err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	if !*yes {
		fmt.Fprintf(stdout, "would reset %s %s, global: every tenant's sends in its window are forgotten (key %s)\n", w.TaskType, w.Rule, w.Key)
		return failf(stderr, 2, name, "nothing reset: give --yes to empty the window listed")
	}
	c, code, ok := rf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	if _, err := policies.ResetGlobal(ctx, c.rdb, c.prefix, p, *taskType, *rule); err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	fmt.Fprintf(stdout, "reset %s %s, global: every tenant's sends in its window are forgotten (key %s)\n", w.TaskType, w.Rule, w.Key)
	return 0
}
