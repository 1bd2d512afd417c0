package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// runLayout runs "admin layout" with args: it shows the layout, changes
// it (--shards), or forgets the old layouts whose queues are empty.
func runLayout(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin layout"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rf := addRedisFlags(fs)
	shards := fs.Int("shards", 0, "change the layout to `N` shards (1 to 256), the workers stopped; 0 shows it")
	policyFile := fs.String("policies", "", "the workers' policies `file` (YAML), whose windows move (with --shards)")
	forget := fs.Bool("forget-drained", false, "stop serving the old layouts whose queues are empty (workers started after it)")
	yes := fs.Bool("yes", false, "change the layout; without it the command only says what it would do, and exits 2")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var to layout.Layout
	if *shards != 0 {
		var err error
		if to, err = layout.Parse(fmt.Sprintf("shards=%d", *shards)); err != nil {
			return failf(stderr, 2, name, "--shards %d: %v", *shards, err)
		}
		if *policyFile == "" {
			return failf(stderr, 2, name, "no policies: set --policies or SLUICE_POLICIES to the workers' file, whose windows move")
		}
	}
	if *forget && *shards != 0 {
		return failf(stderr, 2, name, "give --shards or --forget-drained, not both")
	}
	if code, ok := rf.checkPrefix(name, stderr); !ok {
		return code
	}
	var p *policies.Policies
	if *shards != 0 {
		var err error
		if p, err = policies.Load(*policyFile); err != nil {
			return failf(stderr, 1, name, "%v", err)
		}
	}
	c, code, ok := rf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	switch {
	case *forget:
		return c.forgetDrained(ctx, name, stdout, stderr)
	case *shards != 0:
		return c.changeLayout(ctx, name, p, to, *yes, stdout, stderr)
	}
	return c.showLayout(ctx, name, stdout, stderr)
}

// showLayout prints the layout, a change under way, and the old layouts
// whose queues the workers still serve, with the tasks each holds.
func (c *conn) showLayout(ctx context.Context, name string, stdout, stderr io.Writer) int {
	if from, to, ok, err := layout.Switching(ctx, c.rdb, c.prefix); err != nil {
		return failf(stderr, 1, name, "%v", err)
	} else if ok {
		fmt.Fprintf(stdout, "changing from %s to %s: run admin layout --shards %d again to finish it\n", from, to, to.Shards)
		return 0
	}
	l, named, err := layout.Read(ctx, c.rdb, c.prefix)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	if !named {
		l = layout.Old
	}
	fmt.Fprintf(stdout, "layout %s: queues %s\n", l, strings.Join(typeQueues(l), ", "))
	draining, tasks, err := c.draining(ctx)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	for i, d := range draining {
		fmt.Fprintf(stdout, "draining %s: %d tasks in queues %s\n", d, tasks[i], strings.Join(typeQueues(d), ", "))
	}
	return 0
}

// draining returns the old layouts whose queues the workers still serve,
// and the tasks left to run in each one's queues that the current layout
// does not use (shard names can be the same in two layouts).
func (c *conn) draining(ctx context.Context) ([]layout.Layout, []int, error) {
	draining, err := layout.Draining(ctx, c.rdb, c.prefix)
	if err != nil {
		return nil, nil, err
	}
	cur, _, err := layout.Read(ctx, c.rdb, c.prefix)
	if err != nil {
		return nil, nil, err
	}
	tasks := make([]int, len(draining))
	for i, d := range draining {
		old := slices.DeleteFunc(typeQueues(d), func(q string) bool { return slices.Contains(typeQueues(cur), q) })
		if tasks[i], err = c.tasksIn(old); err != nil {
			return nil, nil, err
		}
	}
	return draining, tasks, nil
}

// changeLayout changes the layout to to, moving p's windows, with the
// workers stopped: docs/SCALING.md, "Changing the layout".
func (c *conn) changeLayout(ctx context.Context, name string, p *policies.Policies, to layout.Layout, yes bool, stdout, stderr io.Writer) int {
	from, resumed, err := c.layoutFrom(ctx, to)
	if err != nil {
		return failf(stderr, selectionCode(err), name, "%v", err)
	}
	if from == to {
		fmt.Fprintf(stdout, "the layout is %s already\n", to)
		return 0
	}
	if err := c.noWorkers(ctx, from, to); err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	if !yes {
		fmt.Fprintf(stdout, "would change the layout from %s to %s: move each tenant's windows to its new shard, the global windows to the pool, reset the old lines and run their tasks; the workers then serve the queues of both\n",
			from, to)
		return failf(stderr, 2, name, "nothing changed: give --yes, with the workers stopped")
	}
	if !resumed {
		if err := layout.Begin(ctx, c.rdb, c.prefix, from, to); err != nil {
			return failf(stderr, 1, name, "%v", err)
		}
	}
	// A worker that started as the change began shows now: it says it
	// runs before it reads the marker, which it then finds marked.
	if err := c.noWorkers(ctx, from, to); err != nil {
		return failf(stderr, 1, name, "%v; the change is marked begun: stop it and run this again", err)
	}
	done, err := policies.Relayout(ctx, c.rdb, c.prefix, p, producer.TaskTypes(), from, to)
	if err == nil {
		err = layout.Finish(ctx, c.rdb, c.prefix, from, to)
	}
	// The old lines' tasks run even when the change stopped midway: a run
	// again finds their lines empty.
	moved, left := runParked(c.inspector(), done.Parked)
	if err != nil {
		return failf(stderr, 1, name, "%v; %d parked tasks run; nothing admits meanwhile: run this again", err, moved)
	}
	fmt.Fprintf(stdout, "changed the layout from %s to %s: %d tenant windows moved, %d global entries merged into the pool, %d parked tasks run\n",
		from, to, done.Moved, done.Merged, moved)
	if len(left) > 0 {
		fmt.Fprintf(stdout, "%d tasks not moved (pending or running already, or gone): %s\n", len(left), strings.Join(left, "; "))
	}
	return 0
}

// layoutFrom returns the layout a change to to starts from: the one Redis
// names (Old when none), or the one of a change to to under way (resumed).
func (c *conn) layoutFrom(ctx context.Context, to layout.Layout) (from layout.Layout, resumed bool, err error) {
	from, going, ok, err := layout.Switching(ctx, c.rdb, c.prefix)
	switch {
	case err != nil:
		return layout.Layout{}, false, err
	case ok && going != to:
		return layout.Layout{}, false, fmt.Errorf("%w: a change from %s to %s is under way: finish it with --shards %d first",
			policies.ErrSelection, from, going, going.Shards)
	case ok:
		return from, true, nil
	}
	l, named, err := layout.Read(ctx, c.rdb, c.prefix)
	if err != nil || !named {
		return layout.Old, false, err
	}
	return l, false, nil
}

// noWorkers returns an error naming the workers running: those of c's
// prefix (layout.Running: every worker of this version, whatever its
// queues), and the asynq servers that serve a queue of from, to or Sluice
// 0.x's default, which older workers are.
func (c *conn) noWorkers(ctx context.Context, from, to layout.Layout) error {
	ids, err := layout.Running(ctx, c.rdb, c.prefix)
	if err != nil {
		return err
	}
	servers, err := c.inspector().Servers()
	if err != nil {
		return fmt.Errorf("look for running workers: %w", err)
	}
	running := layout.Serving(servers, append(append(typeQueues(from), typeQueues(to)...), layout.Legacy))
	switch {
	case len(ids) > 0:
		return fmt.Errorf("%d workers still run under this prefix: stop them first (a worker killed counts for %v)", len(ids), layout.PresenceFor)
	case len(running) > 0:
		return fmt.Errorf("%d asynq servers still serve the layouts' queues or default (%s): stop them first (one killed shows for up to 10 s)",
			len(running), strings.Join(running, ", "))
	}
	return nil
}

// forgetDrained forgets the old layouts whose queues hold no task.
func (c *conn) forgetDrained(ctx context.Context, name string, stdout, stderr io.Writer) int {
	draining, tasks, err := c.draining(ctx)
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	for i, d := range draining {
		if n := tasks[i]; n > 0 {
			fmt.Fprintf(stdout, "kept %s: %d tasks in queues %s\n", d, n, strings.Join(typeQueues(d), ", "))
			continue
		}
		if err := layout.Forget(ctx, c.rdb, c.prefix, d); err != nil {
			return failf(stderr, 1, name, "%v", err)
		}
		fmt.Fprintf(stdout, "forgot %s: workers started from now on do not serve its queues\n", d)
	}
	return 0
}

// tasksIn returns the tasks in queues still to run (pending, active,
// scheduled, retry, aggregating; not archived or completed); a queue that
// was never used holds none.
func (c *conn) tasksIn(queues []string) (int, error) {
	known, err := c.inspector().Queues()
	if err != nil {
		return 0, fmt.Errorf("list the queues: %w", err)
	}
	n := 0
	for _, q := range queues {
		if !slices.Contains(known, q) {
			continue
		}
		info, err := c.inspector().GetQueueInfo(q)
		if err != nil {
			return 0, fmt.Errorf("queue %s: %w", q, err)
		}
		n += info.Pending + info.Active + info.Scheduled + info.Retry + info.Aggregating
	}
	return n, nil
}

// typeQueues returns the queues of every task type under l, each once.
func typeQueues(l layout.Layout) []string {
	var qs []string
	for _, t := range producer.TaskTypes() {
		for _, q := range l.TypeQueues(t) {
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
		}
	}
	return qs
}
