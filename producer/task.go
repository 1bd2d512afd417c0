package producer

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
)

// Headers every task of this package carries.
const (
	// HeaderTenant is the task header that holds the tenant id.
	HeaderTenant = "sluice-tenant"

	// HeaderMaxRetry is the task header that holds the caller's retry
	// budget, in decimal: how many times the worker may retry the task
	// after a failure (not after a throttle denial). See the package
	// documentation for why it is not asynq's MaxRetry.
	HeaderMaxRetry = "sluice-max-retry"

	// HeaderEnqueued is the task header that holds the time from which the
	// task waits to be sent, in RFC 3339 with nanoseconds, UTC: when it
	// was built for enqueueing, or the time asynq.ProcessAt or ProcessIn
	// made it due. The worker's sluice_wait_seconds measures from it.
	HeaderEnqueued = "sluice-enqueued"

	// HeaderQueue is the task header that NewSMSTask and NewEmailTask set
	// to QueueByLayout when they are given no asynq.Queue: the Client then
	// enqueues the task on the queue the deployment's layout gives its
	// type and tenant (docs/SCALING.md), unless Enqueue is given a queue.
	// A task without it goes where its own options say, as in asynq.
	HeaderQueue = "sluice-queue"

	// QueueByLayout is HeaderQueue's value.
	QueueByLayout = "layout"

	// HeaderRetain is the task header that NewSMSTask and NewEmailTask set
	// to "id" when given an asynq.TaskID and no asynq.Retention, and to
	// "own" when given a retention: the Client keeps the first once it has
	// run (WithRetention), so that its ID stays taken.
	HeaderRetain = "sluice-retain"
)

// TaskTypes returns the task types of this package's tasks, in name
// order: TypeEmail and TypeSMS. They are the types Sluice's workers handle
// (worker.NewServer), and so the task types a policies file may name by
// default (policies.WithTaskTypes). Each call returns a new slice.
func TaskTypes() []string { return []string{TypeEmail, TypeSMS} }

// DefaultMaxRetry is the retry budget of a task built without an
// asynq.MaxRetry option: asynq's own default.
const DefaultMaxRetry = 25

// maxBudget is the largest retry budget: asynq stores MaxRetry in 32 bits,
// and the task is given the budget plus one.
const maxBudget = math.MaxInt32 - 1

// NewSMSTask validates tenant and m and returns a TypeSMS task for them
// (an m whose JSON is larger than MaxPayload is a *PayloadSizeError),
// with the headers HeaderTenant and HeaderMaxRetry. opts are asynq options
// (asynq.Queue, ProcessIn, TaskID, Unique, Timeout, ...), applied when the
// task is enqueued; an asynq.MaxRetry(n) among them becomes the
// HeaderMaxRetry budget n, and the task gets asynq.MaxRetry(n+1), as the
// package documentation explains; a Priority(p) among them becomes the
// HeaderPriority header.
func NewSMSTask(tenant string, m SMS, opts ...asynq.Option) (*asynq.Task, error) {
	return newTask(TypeSMS, tenant, m, opts)
}

// NewEmailTask validates tenant and m and returns a TypeEmail task for
// them, as NewSMSTask does for an SMS.
func NewEmailTask(tenant string, m Email, opts ...asynq.Option) (*asynq.Task, error) {
	return newTask(TypeEmail, tenant, m, opts)
}

// message is a task payload.
type message interface{ Validate() error }

// newTask validates and builds a task of type typ.
func newTask(typ, tenant string, m message, opts []asynq.Option) (*asynq.Task, error) {
	if err := ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("producer: new %s task: %w", typ, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("producer: new %s task for tenant %q: %w", typ, tenant, err)
	}
	budget, opts, err := retryBudget(opts)
	if err != nil {
		return nil, fmt.Errorf("producer: new %s task for tenant %q: %w", typ, tenant, err)
	}
	prio, opts, err := priority(opts)
	if err != nil {
		return nil, fmt.Errorf("producer: new %s task for tenant %q: %w", typ, tenant, err)
	}
	payload, err := encode(m)
	if err != nil {
		return nil, fmt.Errorf("producer: new %s task for tenant %q: encode payload: %w", typ, tenant, err)
	}
	if err := CheckPayloadSize(payload); err != nil {
		return nil, fmt.Errorf("producer: new %s task for tenant %q: %w", typ, tenant, err)
	}
	headers := map[string]string{
		HeaderTenant:   tenant,
		HeaderMaxRetry: strconv.Itoa(budget),
	}
	if prio != 0 {
		headers[HeaderPriority] = strconv.Itoa(prio)
	}
	headers[HeaderEnqueued] = due(opts).UTC().Format(time.RFC3339Nano)
	if _, ok := queueOf(opts); !ok {
		headers[HeaderQueue] = QueueByLayout
	}
	if r := retainOf(opts); r != "" {
		headers[HeaderRetain] = r
	}
	return asynq.NewTaskWithHeaders(typ, payload, headers, append(opts, asynq.MaxRetry(budget+1))...), nil
}

// due returns when a task with opts may run: now, or the time the last
// asynq.ProcessAt or ProcessIn among them says, if later.
func due(opts []asynq.Option) time.Time {
	now := time.Now()
	at := now
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		switch v := opt.Value().(type) {
		case time.Time:
			if opt.Type() == asynq.ProcessAtOpt {
				at = v
			}
		case time.Duration:
			if opt.Type() == asynq.ProcessInOpt {
				at = now.Add(v)
			}
		}
	}
	if at.Before(now) {
		return now
	}
	return at
}

// queueOf returns the queue the last asynq.Queue among opts names, and
// whether there is one.
func queueOf(opts []asynq.Option) (string, bool) {
	q, ok := "", false
	for _, opt := range opts {
		if opt != nil && opt.Type() == asynq.QueueOpt {
			q, ok = fmt.Sprint(opt.Value()), true
		}
	}
	return q, ok
}

// TaskEnqueued returns the time task's HeaderEnqueued holds, and false
// when it has none that parses (a task of another producer).
func TaskEnqueued(task *asynq.Task) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339Nano, task.Headers()[HeaderEnqueued])
	return at, err == nil
}

// retryBudget returns the budget set by the last asynq.MaxRetry in opts
// (DefaultMaxRetry without one; a negative one counts as 0), and the other
// options, in order. Nil options, which asynq ignores, are dropped.
func retryBudget(opts []asynq.Option) (int, []asynq.Option, error) {
	budget := DefaultMaxRetry
	rest := make([]asynq.Option, 0, len(opts)+1)
	for _, opt := range opts {
		switch {
		case opt == nil:
			continue
		case opt.Type() != asynq.MaxRetryOpt:
			rest = append(rest, opt)
			continue
		}
		n, ok := opt.Value().(int)
		if !ok {
			return 0, nil, fmt.Errorf("%w: option %v has a %T value, want an int", ErrInvalid, opt, opt.Value())
		}
		budget = max(n, 0)
	}
	if budget > maxBudget {
		return 0, nil, fieldError(HeaderMaxRetry, strconv.Itoa(budget), "is more than %d, the most asynq can store", maxBudget)
	}
	return budget, rest, nil
}

// checkTask validates a task built by NewSMSTask or NewEmailTask, or by
// hand with the same type, payload and headers, and returns its tenant and
// retry budget.
func checkTask(task *asynq.Task) (tenant string, budget int, err error) {
	if task == nil {
		return "", 0, fmt.Errorf("%w: the task is nil", ErrInvalid)
	}
	switch task.Type() {
	case TypeSMS:
		_, err = DecodeSMS(task.Payload())
	case TypeEmail:
		_, err = DecodeEmail(task.Payload())
	default:
		return "", 0, fmt.Errorf("%w: type %s is neither %s nor %s", ErrInvalid, quote(task.Type()), TypeSMS, TypeEmail)
	}
	if err != nil {
		return "", 0, err
	}
	tenant = task.Headers()[HeaderTenant]
	if err := ValidateTenant(tenant); err != nil {
		return "", 0, err
	}
	s, ok := task.Headers()[HeaderMaxRetry]
	if !ok {
		return "", 0, fieldError(HeaderMaxRetry, s, "header is missing")
	}
	budget, err = strconv.Atoi(s)
	if err != nil || budget < 0 || budget > maxBudget || strconv.Itoa(budget) != s {
		return "", 0, fieldError(HeaderMaxRetry, s, "is not a decimal number from 0 to %d", maxBudget)
	}
	if _, err := TaskPriority(task); err != nil {
		return "", 0, err
	}
	return tenant, budget, nil
}
