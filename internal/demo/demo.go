package demo

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hibiken/asynq"
	"golang.org/x/term"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// builtinPolicies are the demo's policies unless Config.Policies replaces
// them.
//
//go:embed policies.yaml
var builtinPolicies []byte

// tenantShares are the demo's tenants, and their shares of the tasks: acme
// gets three in six, globex two, initech one.
var tenantShares = []struct {
	Name  string
	Share int
}{{"acme", 3}, {"globex", 2}, {"initech", 1}}

// Defaults and bounds of Config.
const (
	DefaultTasks = 60
	MinTasks     = 3 // one per tenant
	MaxTasks     = 1000
)

// ErrInterrupted is returned by Run when ctx was cancelled before the end
// (Ctrl-C): the worker was shut down gracefully, the summary of what was
// sent printed, and no verdict given.
var ErrInterrupted = errors.New("demo: interrupted")

// ErrFailed is returned by Run when the verdict failed: a task was not sent,
// or sent twice, or a window was exceeded. The verdict line says which.
var ErrFailed = errors.New("demo: the verdict failed")

// Config configures a demo run. Zero fields take the defaults given.
type Config struct {
	// RedisURL is the Redis to run on. "" starts miniredis, a
	// Redis-compatible server, in the process, on 127.0.0.1 and a random
	// port. On a Redis of the user's the demo uses a queue and a limiter
	// prefix of its own (sluice-demo-<random>), and deletes their keys at
	// the end.
	RedisURL string

	// Policies replace the built-in policies (policies.yaml beside this
	// file) when set. Their sms:send rules apply; the tenants stay acme,
	// globex and initech.
	Policies *policies.File

	// Tasks is how many SMS tasks to enqueue at once, shared out over
	// the tenants (3:2:1); default DefaultTasks, from MinTasks to MaxTasks.
	Tasks int

	// Timeout ends the run, whatever is left to send, and the verdict then
	// fails. Zero or less means the default, computed from the policies and
	// Tasks: TimeoutFactor × the time the limits make the tasks take at
	// best, + TimeoutSlack (24.5 s for the default 60 SMS under the
	// built-in policies).
	Timeout time.Duration

	// Out receives the progress, the summary and the verdict; nil means
	// os.Stdout. On a terminal the progress is redrawn in place four times a
	// second; otherwise a plain line is written every second.
	Out io.Writer

	// Logger receives the worker's logs; nil means warnings and errors, as
	// text, on os.Stderr.
	Logger *slog.Logger
}

// Run runs the demo: it enqueues a burst of SMS tasks for three tenants,
// runs a worker in the process that sends them through a recording
// provider under the policies, shows progress until every task is sent, and
// ends with a summary and a verdict. It returns nil when the verdict
// passes, ErrFailed when it fails, ErrInterrupted when ctx ends first, and
// another error when the demo could not run (Redis unreachable, say).
func Run(ctx context.Context, cfg Config) error {
	out := cfg.Out
	if out == nil {
		out = os.Stdout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	tasks := cfg.Tasks
	if tasks == 0 {
		tasks = DefaultTasks
	}
	if tasks < MinTasks || tasks > MaxTasks {
		return fmt.Errorf("demo: %d tasks: give %d to %d", tasks, MinTasks, MaxTasks)
	}
	policyFile := cfg.Policies
	if policyFile == nil {
		p, err := policies.Parse("built-in demo policies", builtinPolicies)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		policyFile = policies.Static(p)
	}

	b, err := openBroker(ctx, cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer b.close()
	queue, prefix := runNames()
	if b.embedded != nil {
		fmt.Fprintf(out, "redis: none configured (--redis, REDIS_URL), so an embedded miniredis runs at %s, gone when the demo ends\n", b.addr)
	} else {
		fmt.Fprintf(out, "redis: %s, queue %s and limiter prefix %s of this run only, deleted at the end\n", b.addr, queue, prefix)
	}
	lt := newLate(tasks)
	tenants := make([]string, len(tenantShares))
	for i, t := range tenantShares {
		tenants[i] = t.Name
	}
	counts := split(tasks)
	if lt != nil {
		counts = append(split(tasks-1), 1)
		tenants = append(tenants, lt.tenant)
	}
	current := policyFile.Current()
	rules := current.Rules(producer.TypeSMS)
	fmt.Fprintf(out, "policies: %s\n", describe(current.Source(), rules, tenants))
	drain := drainTime(current, tenants, counts)
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = timeoutFor(drain)
	}

	r := &runner{
		out:     out,
		term:    terminal(out),
		broker:  b,
		queue:   queue,
		prefix:  prefix,
		rules:   rules,
		tenants: tenants,
		late:    lt,
		prov:    newDemoProvider(),
		returns: map[string]int{},
	}
	err = r.run(ctx, policyFile, counts[:len(tenantShares)], drain, timeout, logger)
	if b.embedded == nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := b.cleanup(cctx, queue, prefix); cerr != nil {
			err = errors.Join(err, fmt.Errorf("demo: %w", cerr))
		}
	}
	return err
}

// runner is one run of the demo.
type runner struct {
	out     io.Writer
	term    int // out's file descriptor when it is a terminal, else -1
	drawn   int // rows of the terminal the last progress took
	broker  *broker
	queue   string
	prefix  string
	rules   []policies.Rule
	tenants []string // acme, globex, initech, and the late tenant if any
	late    *late    // nil: none
	prov    *demoProvider

	mu      sync.Mutex
	returns map[string]int // tenant -> throttled returns, from the worker's ErrorHandler
}

// run enqueues counts[i] SMS of each of the demo's tenants at once (and
// later the late tenant's), runs the worker until every task is sent, the
// timeout, or ctx's end, and prints the summary. drain is how long the
// tasks take at best (drainTime).
func (r *runner) run(ctx context.Context, policyFile *policies.File, counts []int, drain, timeout time.Duration, logger *slog.Logger) error {
	want, err := r.enqueue(ctx, counts)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(r.out, "interrupted while enqueueing")
			return ErrInterrupted
		}
		return fmt.Errorf("demo: %w", err)
	}
	srv, err := r.newServer(policyFile, logger)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(r.out, "tasks: %s enqueued at once; a worker in this process sends them through a demo provider that records when each arrives\n",
		shares(want, r.tenants[:len(counts)]))
	tasks := len(want)
	if r.late != nil {
		tasks++
		fmt.Fprintf(r.out, "late tenant: 1 SMS of %s, which has nothing waiting, enqueued once %d of the others' are sent\n", r.late.tenant, r.late.after)
	}
	fmt.Fprintf(r.out, "%s\n\n", timeLine(tasks, drain, timeout))
	fmt.Fprintf(r.out, "%s\n\n", legend)

	// The worker stops when the run says, not at once on ctx's end: the
	// run shuts it down gracefully first.
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- srv.Run(wctx) }()

	insp := asynq.NewInspectorFromRedisClient(r.broker.rdb)
	interrupted, timedOut, err := r.watch(ctx, insp, want, tasks, timeout, start, done)
	if err != nil {
		return err
	}
	switch {
	case interrupted:
		fmt.Fprintln(r.out, "\ninterrupted: stopping the worker; tasks waiting in it go back to asynq")
	case timedOut:
		fmt.Fprintf(r.out, "\ntime is up after %v: stopping the worker\n", seconds(timeout))
	}
	stop()
	if err := <-done; err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return r.report(insp, want, time.Since(start), interrupted)
}

// newServer returns the demo's worker: policyFile's rules on the demo's
// queue and prefix, SMS to the demo provider, and an ErrorHandler that
// counts each tenant's throttled returns.
func (r *runner) newServer(policyFile *policies.File, logger *slog.Logger) (*worker.Server, error) {
	return worker.NewServer(r.broker.rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{
			Logger: logger,
		},
		Policies:        policyFile,
		SMS:             r.prov,
		Email:           provider.LogProvider{Logger: logger}, // for form: the demo enqueues no email
		Queues:          map[string]int{r.queue: 1},
		Prefix:          r.prefix,
		ShutdownTimeout: 10 * time.Second,
		// miniredis has no maxmemory-policy to read, and evicts nothing.
		AllowEviction: r.broker.embedded != nil,
		ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, task *asynq.Task, err error) {
			if provider.IsThrottled(err) {
				r.mu.Lock()
				r.returns[task.Headers()[producer.HeaderTenant]]++
				r.mu.Unlock()
			}
		}),
	})
}

// watch draws the progress until every task in want is sent, the
// timeout, or ctx's end, and draws it once more at the end. It reports
// which of the last two stopped it, and fails when the worker, whose
// result comes on done, stops first.
func (r *runner) watch(ctx context.Context, insp *asynq.Inspector, want map[string]string, tasks int, timeout time.Duration, start time.Time, done <-chan error) (interrupted, timedOut bool, err error) {
	interval := time.Second
	if r.term >= 0 {
		interval = 250 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last map[string]states
	draw := func() {
		if s, err := taskStates(insp, r.queue, tasks); err == nil {
			last = s
		}
		r.draw(r.progress(want, last), start)
	}
loop:
	for {
		sent := sentOf(want, r.prov.receipts())
		if r.late.due(sent) && ctx.Err() == nil {
			err := r.enqueueLate(ctx, want, sent)
			if err == nil {
				continue
			}
			if ctx.Err() == nil {
				return false, false, fmt.Errorf("demo: %w", err)
			}
		}
		if sent == len(want) && !r.late.due(sent) {
			break // every task sent, the late tenant's too if it had one
		}
		select {
		case <-r.prov.received:
		case <-tick.C:
			draw()
		case <-deadline.C:
			timedOut = true
			break loop
		case <-ctx.Done():
			interrupted = true
			break loop
		case err := <-done:
			return false, false, fmt.Errorf("demo: the worker stopped: %w", err)
		}
	}
	draw()
	return interrupted, timedOut, nil
}

// report prints the summary of the run, which took took, and returns
// ErrInterrupted when it was interrupted, ErrFailed when a rule was
// broken or a task not sent.
func (r *runner) report(insp *asynq.Inspector, want map[string]string, took time.Duration, interrupted bool) error {
	o := r.outcome(want)
	o.took = took
	if qi, err := insp.GetQueueInfo(r.queue); err == nil {
		o.left = qi.Size
	} else if !errors.Is(err, asynq.ErrQueueNotFound) {
		return fmt.Errorf("demo: read the queue after the run: %w", err)
	}
	s := o.summarize()
	fmt.Fprintf(r.out, "\nsummary: %d of %d tasks sent in %s, %s\n", s.Sent, s.Enqueued, seconds(took), count(s.Returns, "throttled return"))
	fmt.Fprintln(r.out, "rule columns: the most the provider received within one window of the rule, of its limit")
	fmt.Fprint(r.out, s.table(r.rules))
	if line := r.late.line(o.got); line != "" {
		fmt.Fprintln(r.out, line)
	}
	if interrupted {
		fmt.Fprintln(r.out, s.interrupted())
		return ErrInterrupted
	}
	fmt.Fprintln(r.out, s.verdict())
	if !s.OK() {
		return ErrFailed
	}
	return nil
}

// enqueue enqueues counts[j] SMS of the j-th tenant through the producer,
// the tenants taking turns, and returns their IDs and tenants.
func (r *runner) enqueue(ctx context.Context, counts []int) (map[string]string, error) {
	pc := producer.NewClientFromRedisClient(r.broker.rdb, producer.WithPrefix(r.prefix))
	defer pc.Close()
	tasks := 0
	for _, n := range counts {
		tasks += n
	}
	want := map[string]string{}
	for i := 0; len(want) < tasks; i++ {
		for j, tenant := range r.tenants[:len(counts)] {
			if i >= counts[j] {
				continue
			}
			m := producer.SMS{To: fmt.Sprintf("+1555%07d", len(want)), Body: fmt.Sprintf("Sluice demo message %d for %s", i+1, tenant)}
			info, err := pc.EnqueueSMS(ctx, tenant, m, asynq.Queue(r.queue))
			if err != nil {
				return nil, err
			}
			want[info.ID] = tenant
		}
	}
	return want, nil
}

// outcome is what happened so far.
func (r *runner) outcome(want map[string]string) outcome {
	r.mu.Lock()
	returns := make(map[string]int, len(r.returns))
	for t, n := range r.returns {
		returns[t] = n
	}
	r.mu.Unlock()
	return outcome{rules: r.rules, tenants: r.tenants, want: want, got: r.prov.receipts(), returns: returns}
}

// progress is the moment now, with where asynq has the tasks.
func (r *runner) progress(want map[string]string, s map[string]states) progress {
	return progress{outcome: r.outcome(want), now: time.Now(), states: s}
}

// draw shows p: redrawn in place over the last one on a terminal, a line
// otherwise.
func (r *runner) draw(p progress, start time.Time) {
	if r.term < 0 {
		fmt.Fprintln(r.out, p.line(start))
		return
	}
	frame := p.table(start)
	up := r.drawn
	width, _, err := term.GetSize(r.term)
	if err != nil {
		width = 0
	}
	r.drawn = rows(frame, width)
	if up > 0 {
		// Back to the start of the first line drawn, and clear to the end.
		frame = fmt.Sprintf("\x1b[%dF\x1b[J", up) + frame
	}
	fmt.Fprint(r.out, frame)
}

// rows returns how many rows of a terminal width columns wide text takes,
// its long lines wrapped; width 0 is unknown, a row per line.
func rows(text string, width int) int {
	n := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		n++
		if l := utf8.RuneCountInString(strings.TrimSuffix(line, "\n")); width > 0 && l > width {
			n += (l - 1) / width
		}
	}
	return n
}

// sentOf counts the tasks of want that got holds, each once.
func sentOf(want map[string]string, got []receipt) int {
	seen := map[string]bool{}
	for _, r := range got {
		if _, ok := want[r.ID]; ok {
			seen[r.ID] = true
		}
	}
	return len(seen)
}

// split shares n tasks out over the tenants, every tenant at least one.
func split(n int) []int {
	total := 0
	for _, t := range tenantShares {
		total += t.Share
	}
	counts := make([]int, len(tenantShares))
	left := n
	for i, t := range tenantShares[1:] {
		counts[i+1] = max(1, n*t.Share/total)
		left -= counts[i+1]
	}
	counts[0] = left
	return counts
}

// shares describes how many tasks each tenant has: "59 SMS (acme 31,
// globex 19, initech 9)".
func shares(want map[string]string, tenants []string) string {
	n := map[string]int{}
	for _, t := range want {
		n[t]++
	}
	parts := make([]string, len(tenants))
	for i, t := range tenants {
		parts[i] = fmt.Sprintf("%s %d", t, n[t])
	}
	return fmt.Sprintf("%d SMS (%s)", len(want), strings.Join(parts, ", "))
}

// describe says what the sms:send rules of source are for tenants, in one
// line.
func describe(source string, rules []policies.Rule, tenants []string) string {
	if len(rules) == 0 {
		return source + " has no rules for " + producer.TypeSMS + ": the demo's tasks run unthrottled"
	}
	parts := make([]string, len(rules))
	for i, r := range rules {
		if r.Scope == policies.ScopeGlobal {
			parts[i] = fmt.Sprintf("%s %v for all tenants together", r.Name, r.Policy)
			continue
		}
		limits := make([]string, len(tenants))
		for j, t := range tenants {
			limit, window := policyFor(r, t)
			limits[j] = fmt.Sprintf("%s %d/%v", t, limit, window)
		}
		parts[i] = fmt.Sprintf("%s %s", r.Name, strings.Join(limits, ", "))
	}
	return fmt.Sprintf("%s: %s: %s", source, producer.TypeSMS, strings.Join(parts, "; "))
}

// runNames returns the asynq queue and the limiter prefix of one run.
func runNames() (queue, prefix string) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	queue = "sluice-demo-" + hex.EncodeToString(b)
	return queue, queue + ":"
}

// terminal returns w's file descriptor when w is a terminal, else -1.
func terminal(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return int(f.Fd())
	}
	return -1
}
