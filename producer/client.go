package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/internal/entrance"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
)

// Client enqueues validated tasks on Redis. It is safe for concurrent use
// by multiple goroutines.
type Client struct {
	rdb     redis.UniversalClient
	aq      *asynq.Client
	owns    bool  // Close closes rdb
	err     error // returned by every call when the Client was built wrong
	prefix  string
	parking bool
	parker  *parker // nil without parking
	// retention keeps a task with an ID once it has run (WithRetention).
	retention time.Duration

	// layout gives a task without a queue its queue; read from Redis at
	// the first enqueue that needs it.
	layoutMu   sync.Mutex
	layoutRead time.Time // when layout was read; zero: never
	layout     layout.Layout

	tracer trace.Tracer // WithTracerProvider; nil: the global provider's
}

// NewClient returns a Client that connects to Redis with r, for example an
// asynq.RedisClientOpt or the result of asynq.ParseRedisURI. The Client owns
// the connection: Close closes it. A nil r, or one whose MakeRedisClient
// does not return a redis.UniversalClient, gives a Client whose every call
// returns an error. While a task's type waits in the fair lines, the Client
// parks the task at enqueue (see WithPrefix and WithoutParking).
func NewClient(r asynq.RedisConnOpt, opts ...ClientOption) *Client {
	if r == nil {
		return &Client{err: errors.New("producer: NewClient: the Redis connection option is nil")}
	}
	rdb, ok := r.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return &Client{err: fmt.Errorf("producer: NewClient: unsupported Redis connection option %T", r)}
	}
	c := NewClientFromRedisClient(rdb, opts...)
	c.owns = true
	return c
}

// NewClientFromRedisClient returns a Client that enqueues through rdb, a
// plain, failover or cluster client. The caller owns rdb: Close does not
// close it. A nil rdb gives a Client whose every call returns an error.
func NewClientFromRedisClient(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	if rdb == nil {
		return &Client{err: errors.New("producer: NewClientFromRedisClient: the Redis client is nil")}
	}
	c := &Client{rdb: rdb, aq: asynq.NewClientFromRedisClient(rdb), prefix: keyspace.DefaultPrefix, parking: true, retention: DefaultRetention}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.err != nil {
		return &Client{err: c.err}
	}
	if c.parking {
		if err := keyspace.CheckPrefix(c.prefix); err != nil {
			return &Client{err: fmt.Errorf("producer: %w: %w", ErrInvalidConfig, err)}
		}
		c.parker = &parker{rdb: rdb, prefix: c.prefix, inspect: asynq.NewInspectorFromRedisClient(rdb),
			doors: map[string]*entrance.Door{}, waits: map[string]time.Time{}}
	}
	return c
}

// layoutRecheck is how long a Client keeps the layout it read before it
// reads the marker again: a worker of this version writes it as it
// starts.
const layoutRecheck = 10 * time.Second

// readLayout returns the layout Redis names: the one the first worker of
// this version wrote, layout.Old until then; read again every
// layoutRecheck; during a change of layout, the new one. When the marker
// cannot be read, the layout read last stays; with none read yet, that is
// an error.
func (c *Client) readLayout(ctx context.Context) (layout.Layout, error) {
	c.layoutMu.Lock()
	defer c.layoutMu.Unlock()
	if !c.layoutRead.IsZero() && time.Since(c.layoutRead) < layoutRecheck {
		return c.layout, nil
	}
	got, ok, err := layout.Read(ctx, c.rdb, c.prefix)
	if errors.Is(err, layout.ErrSwitching) {
		// A change under way (admin layout): its tasks go where the
		// workers started after it look first.
		if _, to, switching, serr := layout.Switching(ctx, c.rdb, c.prefix); serr == nil && switching {
			got, ok, err = to, true, nil
		}
	}
	switch {
	case err != nil && c.layoutRead.IsZero():
		return layout.Layout{}, err
	case err != nil:
		return c.layout, nil // ask again at the next call
	}
	c.layoutRead, c.layout = time.Now(), layout.Old
	if ok {
		c.layout = got
	}
	return c.layout, nil
}

// Queue returns the queue a task of taskType for tenant goes to when it
// is given none (HeaderQueue): its type's on one shard, its tenant's
// shard's on more, or default while Redis names no layout (no worker of
// this version has started: docs/SCALING.md, "From 0.1.0").
func (c *Client) Queue(ctx context.Context, taskType, tenant string) (string, error) {
	if c.err != nil {
		return "", c.err
	}
	l, err := c.readLayout(ctx)
	if err != nil {
		return "", fmt.Errorf("producer: the queue of %s: %w", taskType, err)
	}
	return l.Queue(taskType, tenant), nil
}

// Close closes the Redis connection if NewClient made it; otherwise it does
// nothing. The Client cannot be used after Close.
func (c *Client) Close() error {
	if !c.owns {
		return nil
	}
	if err := c.rdb.Close(); err != nil {
		return fmt.Errorf("producer: close Redis connection: %w", err)
	}
	return nil
}

// EnqueueSMS validates tenant and m, then enqueues a TypeSMS task for them.
// opts are the asynq options of NewSMSTask. A validation error matches
// ErrInvalid and nothing is sent to Redis.
func (c *Client) EnqueueSMS(ctx context.Context, tenant string, m SMS, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	if c.err != nil {
		return nil, c.err
	}
	task, err := NewSMSTask(tenant, m, opts...)
	if err != nil {
		return nil, err
	}
	return c.enqueue(ctx, task, tenant, nil)
}

// EnqueueEmail validates tenant and m, then enqueues a TypeEmail task for
// them. opts are the asynq options of NewEmailTask. A validation error
// matches ErrInvalid and nothing is sent to Redis.
func (c *Client) EnqueueEmail(ctx context.Context, tenant string, m Email, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	if c.err != nil {
		return nil, c.err
	}
	task, err := NewEmailTask(tenant, m, opts...)
	if err != nil {
		return nil, err
	}
	return c.enqueue(ctx, task, tenant, nil)
}

// Enqueue validates and enqueues a task built by NewSMSTask or
// NewEmailTask, or one with the same type, payload and headers. opts
// override the task's own options, as in asynq.Client.Enqueue, except
// asynq.MaxRetry, which must be given when the task is built: the budget
// is in the task's HeaderMaxRetry header, and the task is enqueued with
// asynq.MaxRetry of the header plus one whatever options it carries.
//
// A validation error matches ErrInvalid and nothing is sent to Redis.
// Errors from asynq are wrapped, so asynq.ErrTaskIDConflict and
// asynq.ErrDuplicateTask match with errors.Is.
func (c *Client) Enqueue(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	if c.err != nil {
		return nil, c.err
	}
	tenant, budget, err := checkTask(task)
	if err != nil {
		return nil, fmt.Errorf("producer: enqueue: %w", err)
	}
	for _, opt := range opts {
		if _, ok := opt.(priorityOption); ok {
			return nil, fmt.Errorf("producer: enqueue %s for tenant %q: %w: %v: give Priority to NewSMSTask or NewEmailTask, which record it in the %s header",
				task.Type(), tenant, ErrInvalid, opt, HeaderPriority)
		}
		if opt != nil && opt.Type() == asynq.MaxRetryOpt {
			return nil, fmt.Errorf("producer: enqueue %s for tenant %q: %w: %v: give MaxRetry to NewSMSTask or NewEmailTask, which record it in the %s header",
				task.Type(), tenant, ErrInvalid, opt, HeaderMaxRetry)
		}
	}
	return c.enqueue(ctx, task, tenant, append(opts[:len(opts):len(opts)], asynq.MaxRetry(budget+1)))
}

// enqueue sends a validated task to Redis: on the queue the layout gives
// it when it asks for one (HeaderQueue) and opts name none, within a
// PRODUCER span whose trace context the task carries (docs/TRACING.md).
func (c *Client) enqueue(ctx context.Context, task *asynq.Task, tenant string, opts []asynq.Option) (*asynq.TaskInfo, error) {
	ctx, span, task := c.startSend(ctx, task, tenant)
	info, err := c.send(ctx, task, tenant, opts)
	endSend(span, info, err)
	return info, err
}

// send is enqueue without its span.
func (c *Client) send(ctx context.Context, task *asynq.Task, tenant string, opts []asynq.Option) (*asynq.TaskInfo, error) {
	opts = c.retained(task, opts)
	_, named := queueOf(opts)
	byLayout := !named && task.Headers()[HeaderQueue] == QueueByLayout
	at, _ := TaskEnqueued(task)
	park := c.parker != nil && parkable(at, opts)
	var l layout.Layout
	if byLayout || park {
		var err error
		l, err = c.readLayout(ctx)
		switch {
		case err != nil && byLayout:
			return nil, fmt.Errorf("producer: enqueue %s for tenant %q: %w", task.Type(), tenant, err)
		case err != nil:
			park = false // its line's group unknown: enqueued as without parking
		}
	}
	if byLayout {
		opts = append([]asynq.Option{asynq.Queue(l.Queue(task.Type(), tenant))}, opts...)
	}
	var info *asynq.TaskInfo
	var err error
	// A task's line is in its shard's group, whatever queue it is in.
	if group := l.Group(task.Type(), tenant); park && c.parker.waiting(ctx, group, task.Type()) {
		info, err = c.parker.park(ctx, c.aq, group, task, tenant, opts)
		if errors.Is(err, ErrEnqueuedLate) {
			return info, fmt.Errorf("producer: enqueue %s for tenant %q: %w", task.Type(), tenant, err)
		}
	} else {
		info, err = c.aq.EnqueueContext(ctx, task, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("producer: enqueue %s for tenant %q: %w", task.Type(), tenant, err)
	}
	return info, nil
}
