package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/retryset"
)

// queueList is the value of a flag that may be given more than once.
type queueList []string

func (q *queueList) String() string { return strings.Join(*q, ",") }

func (q *queueList) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("name a queue")
	}
	*q = append(*q, s)
	return nil
}

// runThrottled runs "admin throttled" with args.
func runThrottled(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "admin throttled"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rf := addRedisURLFlag(fs)
	var queues queueList
	fs.Var(&queues, "queue", "asynq `queue` to look at; give it again for more; default every queue")
	limit := fs.Int("limit", 50, "list at most `N` throttled tasks a queue, soonest back first (0: counts only)")
	asJSON := fs.Bool("json", false, "print a JSON array, one object a queue, with its tasks")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *limit < 0 {
		return failf(stderr, 2, name, "--limit %d: must be 0 or more", *limit)
	}
	c, code, ok := rf.connect(ctx, name, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	ins := c.inspector()
	known, err := retryset.Queues(ins)
	if err != nil {
		return failf(stderr, 1, name, "%s", printable(err.Error()))
	}
	if len(queues) == 0 {
		queues = known
	}
	for _, q := range queues {
		if !slices.Contains(known, q) {
			return failf(stderr, 2, name, "--queue %q: no such queue in Redis (%s)", q, listQueues(known))
		}
	}

	sets, err := retrySets(ctx, ins, queues, *limit)
	if err != nil {
		return failf(stderr, 1, name, "%s", printable(err.Error()))
	}
	if *asJSON {
		return printJSON(stdout, stderr, name, sets)
	}
	if len(sets) == 0 {
		fmt.Fprintln(stdout, "no queues in Redis")
		return 0
	}
	if err := printThrottled(stdout, sets); err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	return 0
}

// retrySets reads the retry set of each of queues, listing at most limit
// throttled tasks of each; a queue deleted since it was listed has an
// empty one.
func retrySets(ctx context.Context, ins *asynq.Inspector, queues []string, limit int) ([]retryset.Queue, error) {
	sets := make([]retryset.Queue, 0, len(queues))
	for _, q := range queues {
		rq, err := retryset.Read(ctx, ins, q, limit)
		if errors.Is(err, asynq.ErrQueueNotFound) {
			// Deleted since it was listed: nothing waits in it.
			rq, err = retryset.Queue{Queue: q, Tasks: []retryset.Task{}}, nil
		}
		if err != nil {
			return nil, err
		}
		sets = append(sets, rq)
	}
	return sets, nil
}

// printable returns s as it is when it holds only printable characters, and
// else quoted as Go quotes it: what Redis holds (a tenant header, a task's
// error) must not send escape sequences to the terminal.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// printThrottled writes to w a table of the throttled tasks of sets, if
// any, and a line a queue with its counts.
func printThrottled(w io.Writer, sets []retryset.Queue) error {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	listed := false
	for _, rq := range sets {
		for _, t := range rq.Tasks {
			if !listed {
				fmt.Fprintln(tw, "QUEUE\tID\tTYPE\tTENANT\tBACK\tLAST ERROR")
				listed = true
			}
			tenant := printable(t.Tenant)
			if tenant == "" {
				tenant = "(none)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(t.Queue), printable(t.ID), printable(t.Type), tenant,
				back(t.NextProcessAt, now), printable(t.LastErr))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, rq := range sets {
		shown := ""
		if n := len(rq.Tasks); n < rq.Throttled {
			shown = fmt.Sprintf(" (%d listed)", n)
		}
		fmt.Fprintf(w, "queue %s: %d throttled%s, %d failed and waiting to be retried\n", printable(rq.Queue), rq.Throttled, shown, rq.Failed)
	}
	return nil
}

// back says when a task returns to its queue, in local time: "2026-11-23
// 15:04:05 (in 59m58s)", "(in <1s)", or "(due)" once the time has come.
func back(at, now time.Time) string {
	s := at.Local().Format(time.DateTime)
	switch d := at.Sub(now); {
	case d <= 0:
		return s + " (due)"
	case d < time.Second:
		return s + " (in <1s)"
	default:
		return s + " (in " + formatDuration(d.Round(time.Second)) + ")"
	}
}

// listQueues says which queues Redis knows, for an error message.
func listQueues(qs []string) string {
	if len(qs) == 0 {
		return "it has none"
	}
	shown := make([]string, len(qs))
	for i, q := range qs {
		shown[i] = printable(q)
	}
	return "it has " + strings.Join(shown, ", ")
}
