package status

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// Defaults of PageConfig.
const (
	defaultStatusTimeout    = time.Second
	defaultStatusRefresh    = 2 * time.Second
	defaultStatusRetryTasks = 10000
)

// statusReads is how many Redis reads the status page makes at once, all
// requests together: a page asks for one read per tenant and task type
// and one per queue.
const statusReads = 4

// statusFlows is the most waiting flows of each shard's fair lines a page
// reads: one script call holds the shard's Redis for each.
const statusFlows = 200

// PageConfig configures Page. Zero fields take the defaults given.
type PageConfig struct {
	// Policies are the rules the workers enforce; required. Pass the
	// worker's own (worker.Config.Policies): the page reads each window with
	// policies.Usage, which prunes with the window it is given.
	Policies *policies.File

	// Activity is what the worker has seen; required. The page shows its
	// tenants, and its denials a second. Pass the one the Server feeds
	// (one of worker.Config.Observers).
	Activity *Activity

	// Queues are the asynq queues whose retry sets the page reads for the
	// throttled backlog: give the worker's (worker.Server.Queues). Default
	// {"default"}.
	Queues []string

	// Prefix starts the limiter's Redis keys: the worker's
	// worker.Config.Prefix.
	// Default throttle.DefaultPrefix.
	Prefix string

	// Timeout bounds the Redis reads of one page; default 1 s. Past it the
	// page shows what it has read and says what it has not: a page renders
	// within about Timeout whether Redis answers or not.
	Timeout time.Duration

	// Refresh is how often the browser reloads the page (a meta refresh);
	// default 2 s, negative for never.
	Refresh time.Duration

	// RetryTasks is the most tasks of each queue's retry set that a load
	// of the page reads (retryset.Head), to count the backlog by rule and by
	// tenant: its time grows with them, not with the set. Beyond them the
	// page shows how many more wait, uncounted. Default 10,000.
	RetryTasks int

	// Name names the worker in the page's title; default the host name and
	// the process ID, "host (pid 4242)".
	Name string

	// Refused reports what Redis has refused the worker lately (damaged
	// keys: worker.Server.Refused); nil for nothing. The page shows it
	// at the top.
	Refused func() error

	// Lines are the fair lines the workers serve tasks through, one per
	// shard, when fairness is on (worker.Server.AllLines); nil for none.
	// The page then shows, per task type, each waiting tenant's tasks in
	// line by priority and its share of the recent grants of the shared
	// rules, every shard's together.
	Lines []*throttle.Lines
}

// Page returns the handler of a worker's status page, an HTML page
// that refreshes itself, for OpsConfig.Status. For each tenant that the
// Activity holds, and each rule of each task type seen for it, it shows
// how much of the tenant's window is used now against its limit (a bar),
// the places in line given, when the next slot frees, the denials a second
// in this worker, and the tasks waiting in the retry set; the global rules
// once, the same way; the throttled backlog in the retry set of each queue
// (by rule, and when the next task returns); the providers' 429s.
//
// The windows and the retry sets are read from rdb, the workers' Redis,
// every worker's use included; the tenants and denials are this worker's.
// The Redis reads of one page are bounded by PageConfig.Timeout, and at
// most 4 run at once: when Redis is down or slow the page still renders,
// and says what it could not read.
//
// A nil rdb, or a PageConfig without Policies or Activity, is an error.
// The handler is safe for concurrent use.
func Page(rdb redis.UniversalClient, cfg PageConfig) (http.Handler, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("status: Page: nil Redis client")
	case cfg.Policies == nil:
		return nil, errors.New("status: Page: nil Policies")
	case cfg.Activity == nil:
		return nil, errors.New("status: Page: nil Activity")
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	cfg.Queues = slices.Compact(slices.Sorted(slices.Values(cfg.Queues)))
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultStatusTimeout
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = defaultStatusRefresh
	}
	if cfg.RetryTasks <= 0 {
		cfg.RetryTasks = defaultStatusRetryTasks
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "worker"
		}
		cfg.Name = fmt.Sprintf("%s (pid %d)", host, os.Getpid())
	}
	return &statusPage{
		rdb:   rdb,
		ins:   asynq.NewInspectorFromRedisClient(rdb),
		cfg:   cfg,
		reads: make(chan struct{}, statusReads),
	}, nil
}

// statusPage is the handler of Page.
type statusPage struct {
	rdb   redis.UniversalClient
	ins   *asynq.Inspector
	cfg   PageConfig
	reads chan struct{} // a semaphore: the Redis reads under way, every request's
}

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Parse(statusHTML))

func (s *statusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	data := s.collect(ctx)
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, data); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}
