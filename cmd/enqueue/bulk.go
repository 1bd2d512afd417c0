package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/readlimit"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/producer"
)

const bulkSynopsis = `
usage: enqueue bulk --redis URL [--queue Q] [--skip-invalid] FILE

Enqueues the tasks of FILE ("-" for standard input), one JSON object a line:

  {"type": "sms", "tenant": "acme", "to": "+15551234567", "body": "Your code is 1234", "id": "otp-991"}
  {"type": "email", "tenant": "globex", "to": "ada@example.com", "subject": "Welcome", "body": "Hello"}

type is sms or email; tenant, to and body are required, subject too for
email, and from is optional. Optional for both: id (a task ID: a second task
with the same ID in the queue, or run there within --retention (a day by
default), is refused, so a file with IDs is safe to send again within it), queue (default --queue, or else the task type's: sms:send or
email:send), max_retry (default 25), priority (1, the most urgent, to 5;
default 3), and process_in (a duration such as "90s") or process_at (RFC
3339). Blank lines are skipped,
CRLF line endings accepted, unknown fields refused; a line holds at most
1 MiB, and a task's payload (its JSON as stored) at most 512 KiB.

Every line is checked before anything is sent to Redis. If one is invalid,
nothing is enqueued, unless --skip-invalid is given: then the valid lines
are. FILE is read twice, so memory stays small whatever its size: a file
that changes in between is refused, and standard input (or a pipe) is
copied to a temporary file as it is checked, up to 1 GiB. Each rejected line, invalid or with an id already taken, is reported
on stderr as "enqueue: line N: reason"; a summary follows on stdout, and a
progress bar shows on stderr when it is a terminal.

Exit status: 0 when every line was enqueued; 1 when a line was rejected or
failed to enqueue, or FILE or Redis could not be used; 2 for a usage error.`

// maxListed is the number of line numbers a summary lists.
const maxListed = 10

// runBulk runs "enqueue bulk" with args.
func runBulk(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError) // the errors' prefix (see parseFlags)
	redisURL := fs.String("redis", "", redisconn.RedisURLHelp)
	queue := fs.String("queue", "", "asynq queue of the lines without one; default: each task type's, as the deployment's layout names it")
	prefix := fs.String("prefix", keyspace.DefaultPrefix, prefixHelp)
	retention := fs.Duration("retention", producer.DefaultRetention, retentionHelp)
	skipInvalid := fs.Bool("skip-invalid", false, "enqueue the valid lines even when some are invalid")
	if code, ok := parseFlags(fs, args, bulkSynopsis, stdout, stderr, "FILE"); !ok {
		return code
	}
	switch {
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "enqueue: bulk needs FILE, or - for standard input, after the flags (see --help)")
		return 2
	case *queue != "" && producer.ValidateQueue(*queue) != nil:
		fmt.Fprintf(stderr, "enqueue: --queue: %v\n", producer.ValidateQueue(*queue))
		return 2
	}
	// The URL before the file: a bad one is refused even when the file
	// gives nothing to enqueue.
	if err := redisconn.CheckURL(*redisURL); err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return cli.ExitStatus(err)
	}
	src, err := openSource(fs.Arg(0), stdin, maxSpool)
	if err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 1
	}
	defer src.Close()

	// First pass: check every line, before anything reaches Redis.
	b := &bulk{queue: *queue, stderr: stderr, ids: map[idKey]int{}}
	if err := b.check(ctx, src); err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 1
	}
	if len(b.rejected) > 0 && !*skipInvalid {
		fmt.Fprintf(stdout, "enqueued 0 of %d tasks; %d rejected (%s); nothing enqueued because of them (--skip-invalid enqueues the valid lines)\n",
			b.total, len(b.rejected), listLines(b.rejected))
		return 1
	}
	if b.valid == 0 {
		fmt.Fprintln(stdout, summary(0, b.total, b.rejected, 0))
		return exitStatus(b.rejected, 0)
	}
	in, err := src.second()
	if err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 1
	}

	if err := checkRetention(*retention); err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 2
	}
	pc, closeRedis, err := connect(ctx, *redisURL, *prefix, *retention)
	if err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return cli.ExitStatus(err)
	}
	defer closeRedis()
	// Second pass: read the lines again and enqueue the valid ones.
	enqueued, notEnqueued := b.enqueueAll(ctx, pc, in)
	slices.Sort(b.rejected)
	fmt.Fprintln(stdout, summary(enqueued, b.total, b.rejected, notEnqueued))
	return exitStatus(b.rejected, notEnqueued)
}

// bulk is one run of "enqueue bulk": what the first pass learnt of the
// lines, which is all it keeps of them.
type bulk struct {
	queue  string // --queue, for the lines without one
	stderr io.Writer

	valid    int           // lines that give a task
	rejected []int         // line numbers
	total    int           // lines that are not blank
	ids      map[idKey]int // a task ID in its queue to the line that has it
}

// idKey is a task ID and its queue, hashed: the first pass keeps 16
// bytes for each ID, whatever its length.
type idKey [16]byte

// newIDKey returns the key of task ID id in queue q.
func newIDKey(q, id string) idKey {
	sum := sha256.Sum256([]byte(q + "\x00" + id))
	return idKey(sum[:16])
}

// reject counts line as rejected and says why on stderr.
func (b *bulk) reject(line int, format string, args ...any) {
	b.rejected = append(b.rejected, line)
	fmt.Fprintf(b.stderr, "enqueue: line %d: "+format+"\n", append([]any{line}, args...)...)
}

// check reads and checks every line of src, keeping no task. Its error
// says why the input could not be read, or that ctx ended the read.
func (b *bulk) check(ctx context.Context, src *source) error {
	read := func(line int, task *asynq.Task, opts []asynq.Option, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.total++
		if err != nil {
			if le, ok := errors.AsType[*producer.LineError](err); ok {
				err = le.Err // reject gives the line number
			}
			b.reject(line, "%v", err)
			return nil
		}
		if id := optString(opts, asynq.TaskIDOpt, ""); id != "" {
			q := queueOf(optString(opts, asynq.QueueOpt, b.queue), task)
			key := newIDKey(q, id)
			if first, ok := b.ids[key]; ok {
				b.reject(line, "id %q is the id of line %d too, in queue %s", id, first, q)
				return nil
			}
			b.ids[key] = line
		}
		b.valid++
		return nil
	}
	// Read in a goroutine, so that an interrupt stops a read from a
	// terminal or a pipe that sends nothing more.
	done := make(chan error, 1)
	go func() { done <- producer.ReadBulk(src.first(), read) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	switch {
	case ctx.Err() != nil:
		return errors.New("interrupted while reading the file; nothing enqueued")
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("%s is larger than %s, the most kept for the second pass; nothing enqueued: save it to a file and give its path",
			src.name, readlimit.Bytes(src.limit))
	}
	return err // a read error of a file names it (*fs.PathError)
}

// errChanged stops the second pass at a line that differs from the first.
var errChanged = errors.New("the input changed")

// enqueueAll reads in again and enqueues its valid lines, one task at a
// time, and returns how many were enqueued and how many were not because
// Redis failed, ctx ended or the input changed since the first pass (the
// lines after a failure would fail the same way, one timeout each). A task
// ID already taken is a rejected line.
func (b *bulk) enqueueAll(ctx context.Context, pc *producer.Client, in io.Reader) (enqueued, notEnqueued int) {
	bar := newProgress(b.stderr, b.valid)
	defer bar.clear()
	checked := b.rejected[:len(b.rejected):len(b.rejected)] // the first pass's, in line order
	done := 0
	stop := func(line int, why string) error {
		notEnqueued = b.valid - done
		fmt.Fprintf(b.stderr, "enqueue: %s at line %d: it and %s after it not enqueued\n", why, line, count(notEnqueued-1, "valid line"))
		return errChanged
	}
	err := producer.ReadBulk(in, func(line int, task *asynq.Task, opts []asynq.Option, lerr error) error {
		for len(checked) > 0 && checked[0] < line {
			checked = checked[1:]
		}
		wasRejected := len(checked) > 0 && checked[0] == line
		switch {
		case lerr != nil && !wasRejected, done == b.valid && !wasRejected:
			bar.clear()
			notEnqueued = b.valid - done
			fmt.Fprintf(b.stderr, "enqueue: line %d: the input changed since it was checked; stopped, %s not enqueued\n",
				line, count(notEnqueued, "valid line"))
			return errChanged
		case wasRejected:
			return nil
		}
		// The line's own options come last, so that they win.
		if b.queue != "" {
			opts = append([]asynq.Option{asynq.Queue(b.queue)}, opts...)
		}
		_, err := pc.Enqueue(ctx, task, opts...)
		done++
		switch {
		case err == nil:
			enqueued++
		case errors.Is(err, asynq.ErrTaskIDConflict):
			bar.clear()
			q := optString(opts, asynq.QueueOpt, b.queue)
			if q == "" {
				q, _ = pc.Queue(ctx, task.Type(), task.Headers()[producer.HeaderTenant])
			}
			b.reject(line, "id %q is taken: queue %s already has a task with this id", optString(opts, asynq.TaskIDOpt, ""), q)
		default:
			bar.clear()
			done--
			if ctx.Err() != nil {
				return stop(line, "interrupted")
			}
			fmt.Fprintf(b.stderr, "enqueue: line %d: %v\n", line, err)
			return stop(line, "stopped")
		}
		bar.update(done)
		return nil
	})
	if err != nil && !errors.Is(err, errChanged) {
		fmt.Fprintln(b.stderr, "enqueue:", err)
		notEnqueued = b.valid - done
	} else if err == nil && done < b.valid {
		fmt.Fprintf(b.stderr, "enqueue: the input changed since it was checked: %s not found again\n", count(b.valid-done, "valid line"))
		notEnqueued = b.valid - done
	}
	return enqueued, notEnqueued
}

// summary returns the last line of "enqueue bulk", such as
//
//	enqueued 7 of 9 tasks; 2 rejected (lines 3, 8)
func summary(enqueued, total int, rejected []int, notEnqueued int) string {
	s := fmt.Sprintf("enqueued %d of %d tasks", enqueued, total)
	if len(rejected) > 0 {
		s += fmt.Sprintf("; %d rejected (%s)", len(rejected), listLines(rejected))
	}
	if notEnqueued > 0 {
		s += fmt.Sprintf("; %d not enqueued after an error", notEnqueued)
	}
	return s
}

// exitStatus is 0 when every task was enqueued, 1 otherwise.
func exitStatus(rejected []int, notEnqueued int) int {
	if len(rejected) > 0 || notEnqueued > 0 {
		return 1
	}
	return 0
}

// listLines returns "line 3", "lines 3, 8" or, beyond maxListed,
// "lines 1, 2, ..., 10 and 5 more".
func listLines(lines []int) string {
	if len(lines) == 1 {
		return "line " + strconv.Itoa(lines[0])
	}
	var b strings.Builder
	b.WriteString("lines ")
	for i, n := range lines[:min(len(lines), maxListed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
	}
	if more := len(lines) - maxListed; more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}

// count returns "1 noun" or "n nouns".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// optString returns the string value of the last option of type typ in
// opts, or def without one.
func optString(opts []asynq.Option, typ asynq.OptionType, def string) string {
	for _, o := range slices.Backward(opts) {
		if o.Type() == typ {
			if s, ok := o.Value().(string); ok {
				return s
			}
		}
	}
	return def
}
