package throttle

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// FailureMode says what a user of the limiter does when the limiter cannot
// decide: Redis is down, or slower than the user's decision timeout. The
// task middleware (package worker) and the HTTP middleware (package
// httplimit) both take one.
type FailureMode int

const (
	// FailClosed lets nothing through without a decision: a task waits and
	// comes back, its retry budget untouched; a request is answered 503.
	// The default.
	FailClosed FailureMode = iota
	// FailOpen lets the task or request through without a decision; it is
	// not counted against any limit.
	FailOpen
)

// Outage logs when the limiter stops answering and when it answers again,
// once each way: during an outage every call fails, and one line says so
// better than thousands. Safe for concurrent use.
type Outage struct {
	logger         *slog.Logger
	downMsg, upMsg string

	mu      sync.Mutex
	down    time.Time   // when the limiter began to fail; zero while it answers
	anyDown atomic.Bool // !down.IsZero(), read without the lock
}

// NewOutage returns an Outage that logs downMsg, at warn, when a call first
// fails, and upMsg, at info with how long the outage lasted
// (unavailable_for), when one succeeds again. A nil logger means
// slog.Default().
func NewOutage(logger *slog.Logger, downMsg, upMsg string) *Outage {
	if logger == nil {
		logger = slog.Default()
	}
	return &Outage{logger: logger, downMsg: downMsg, upMsg: upMsg}
}

// Observe records the outcome of one limiter call: err is nil when the
// limiter decided. attrs go with the down line, after the error. A call
// that decided while the limiter answers costs one atomic load.
func (o *Outage) Observe(err error, attrs ...any) {
	if err == nil && !o.anyDown.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err != nil && o.down.IsZero():
		o.down = time.Now()
		o.anyDown.Store(true)
		o.logger.Warn(o.downMsg, append([]any{"err", err}, attrs...)...)
	case err == nil && !o.down.IsZero():
		o.logger.Info(o.upMsg, "unavailable_for", time.Since(o.down).Round(time.Millisecond))
		o.down = time.Time{}
		o.anyDown.Store(false)
	}
}
