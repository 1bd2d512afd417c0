package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/layout"
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
	shards, err := c.shardLines(ctx, *taskType)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	if !*yes {
		var parked int
		for _, sh := range shards {
			cl, err := sh.lines.ClassLines(ctx, *taskType)
			if err != nil {
				return failf(stderr, 1, name, "%v", sh.wrap(err))
			}
			printClassLines(stdout, "would reset", sh.group, cl)
			parked += len(cl.Parked())
		}
		fmt.Fprintf(stdout, "would move the %d parked tasks to their queues' pending lists\n", parked)
		return failf(stderr, 2, name, "nothing reset: give --yes to empty the lines listed")
	}
	// A shard that fails stops the reset; the tasks of the shards reset
	// before it are moved all the same: their lines no longer hold them.
	var parked []throttle.Grant
	done := 0
	for _, sh := range shards {
		var cl throttle.ClassLines
		if cl, err = sh.lines.ResetLines(ctx, *taskType); err != nil {
			err = sh.wrap(err)
			break
		}
		printClassLines(stdout, "reset", sh.group, cl)
		parked = append(parked, cl.Parked()...)
		done++
	}
	if done > 0 {
		fmt.Fprintln(stdout, linesLost)
		moved, left := runParked(c.inspector(), parked)
		fmt.Fprintf(stdout, "moved %d parked tasks to their queues' pending lists\n", moved)
		if len(left) > 0 {
			fmt.Fprintf(stdout, "%d tasks not moved (pending or running already, or gone): %s\n", len(left), strings.Join(left, "; "))
		}
	}
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	return 0
}

// shardLines are the fair lines of one shard; group is "" on one shard.
type shardLines struct {
	group string
	lines *throttle.Lines
}

// wrap names the shard in err, on more than one shard.
func (sh shardLines) wrap(err error) error {
	if sh.group == "" {
		return err
	}
	return fmt.Errorf("shard %q: %w", sh.group, err)
}

// shardLines returns the fair lines that hold taskType's tasks in the
// layout Redis names: the default group's on one shard, each shard's on
// more (docs/SCALING.md, "Shards and their names").
func (c *conn) shardLines(ctx context.Context, taskType string) ([]shardLines, error) {
	l, _, err := layout.Read(ctx, c.rdb, c.prefix)
	if err != nil {
		return nil, err
	}
	if l.Shards <= 1 {
		return []shardLines{{lines: c.limiter().Lines(throttle.LinesConfig{})}}, nil
	}
	var out []shardLines
	for _, g := range l.Groups(taskType) {
		out = append(out, shardLines{group: g, lines: c.limiter().InGroup(g).Lines(throttle.LinesConfig{})})
	}
	return out, nil
}

// printClassLines says what the lines of a task type hold, after verb; in
// group, on more than one shard.
func printClassLines(w io.Writer, verb, group string, c throttle.ClassLines) {
	in := ""
	if group != "" {
		in = fmt.Sprintf(" in shard %q", group)
	}
	fmt.Fprintf(w, "%s the fair lines of %q%s: %d keys, %d tasks waiting, %d granted not claimed (%d places in the windows), %d at the entrance\n",
		verb, c.Class, in, len(c.Keys), len(c.Waiting), len(c.Granted), c.Places, len(c.Entering))
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
