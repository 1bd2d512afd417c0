package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/throttle"
)

// linesLost is what a reset of a task type's fair lines loses, as the
// command says it.
const linesLost = "lost: the tenants' order and start tags, the learned lead, the unclaimed grants (their slots given back), the status page's shares"

// runResetLines runs "admin reset-lines" with args.
func runResetLines(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin reset-lines"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rf := addRedisFlags(fs)
	taskType := fs.String("type", "", "task `type` whose fair lines to empty, such as sms:send (required)")
	yes := fs.Bool("yes", false, "reset; without it the command only says what it would reset, and exits 2")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *taskType == "" {
		return failf(stderr, 2, name, "give --type: the task type whose lines to empty")
	}
	c, code, ok := rf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	ls := c.limiter().Lines(throttle.LinesConfig{})
	if !*yes {
		cl, err := ls.ClassLines(ctx, *taskType)
		if err != nil {
			return failf(stderr, 1, name, "%v", err)
		}
		printClassLines(stdout, "would reset", cl)
		fmt.Fprintf(stdout, "would move the %d parked tasks to their queues' pending lists\n", len(cl.Parked()))
		return failf(stderr, 2, name, "nothing reset: give --yes to empty the lines listed")
	}
	cl, err := ls.ResetLines(ctx, *taskType)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	printClassLines(stdout, "reset", cl)
	fmt.Fprintln(stdout, linesLost)
	moved, left := runParked(c.inspector(), cl.Parked())
	fmt.Fprintf(stdout, "moved %d parked tasks to their queues' pending lists\n", moved)
	if len(left) > 0 {
		fmt.Fprintf(stdout, "%d tasks not moved (pending or running already, or gone): %s\n", len(left), strings.Join(left, "; "))
	}
	return 0
}

// printClassLines says what the lines of a task type hold, after verb.
func printClassLines(w io.Writer, verb string, c throttle.ClassLines) {
	fmt.Fprintf(w, "%s the fair lines of %q: %d keys, %d tasks waiting, %d granted not claimed (%d places in the windows), %d at the entrance\n",
		verb, c.Class, len(c.Keys), len(c.Waiting), len(c.Granted), c.Places, len(c.Entering))
	if c.Scanned {
		fmt.Fprintln(w, "a key that lists the flows is damaged: the flows' keys were found by SCAN")
	}
	for _, r := range c.Refused {
		fmt.Fprintf(w, "Redis refused: %q\n", r)
	}
}

// runParked moves tasks parked in asynq's retry or scheduled set to their
// queues' pending lists (asynq's RunTask), and returns how many moved and
// why each of the others did not.
func runParked(ins *asynq.Inspector, tasks []throttle.Grant) (moved int, left []string) {
	seen := map[throttle.Grant]bool{}
	for _, t := range tasks {
		if seen[t] {
			continue
		}
		seen[t] = true
		if err := ins.RunTask(t.Queue, t.ID); err != nil {
			left = append(left, fmt.Sprintf("%q in %q: %v", t.ID, t.Queue, err))
			continue
		}
		moved++
	}
	return moved, left
}
