package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// RuleUsage is how much of one window is used now: a RuleWindow and what
// the limiter says of it. With a rule of 4 a second (margin 100 ms) and
// three tasks admitted in the last 1.1 s, Used is 3, InLine 0, Remaining 1
// and NextFree 0. After a burst of 20 tasks, Used is 4, InLine 16 (the
// places given to the 16 denied ones, four in each of the next four
// windows), Remaining 0, and NextFree about 5.5 s: a new task would come
// after the 16, in the fifth window.
type RuleUsage struct {
	RuleWindow

	// Used is the number of units admitted in the window now (Window +
	// Margin). With an algorithm other than the sliding log it is the
	// algorithm's own count (see throttle.Algorithm).
	Used int

	// InLine is the number of places in line reserved in the window for
	// tasks that were denied and come back later (see
	// throttle.Limiter.AllowInLine): they count against the limit from
	// their time on. Only the sliding log reserves places; 0 for the
	// others.
	InLine int

	// Remaining is how many more tasks fit now, at least: 0 exactly when
	// NextFree is not (none fits now); otherwise Limit less Used and the
	// places in line within one window from now, and at least 1. (Places
	// further ahead leave room now: Limit-Used-InLine may be 0 or less
	// while a task fits.)
	Remaining int

	// NextFree is 0 when a task fits now; otherwise the time until one
	// would, if nothing else were admitted meanwhile, behind the places in
	// line already given.
	NextFree time.Duration

	// EmptyIn is the time until the window holds nothing, places included;
	// 0 when it is empty.
	EmptyIn time.Duration
	// InForce is an adaptive rule's limit in force, which its tasks are
	// held to (throttle.Limiter.LimitInForce); Limit is its ceiling. 0
	// for a rule that does not adapt.
	InForce int
}

// MarshalJSON encodes u as one object with snake_case names and durations
// in seconds: {"task_type": "sms:send", "rule": "tenant-per-second",
// "scope": "tenant", "tenant": "acme", "key": "rule/sms:send/...",
// "limit": 4, "window_seconds": 1, "margin_seconds": 0.1, "algorithm":
// "sliding-log", "shadow": false, "used": 3, "in_line": 0, "remaining": 1,
// "next_free_seconds": 0, "empty_in_seconds": 0.84}. A global rule's
// tenant is "". An adaptive rule adds "limit_in_force": 45.
func (u RuleUsage) MarshalJSON() ([]byte, error) {
	alg := u.Algorithm
	if alg == "" {
		alg = throttle.SlidingLog
	}
	return json.Marshal(struct {
		TaskType  string  `json:"task_type"`
		Rule      string  `json:"rule"`
		Scope     string  `json:"scope"`
		Tenant    string  `json:"tenant"`
		Key       string  `json:"key"`
		Limit     int     `json:"limit"`
		Window    float64 `json:"window_seconds"`
		Margin    float64 `json:"margin_seconds"`
		Algorithm string  `json:"algorithm"`
		Shadow    bool    `json:"shadow"`
		InForce   int     `json:"limit_in_force,omitempty"`
		Used      int     `json:"used"`
		InLine    int     `json:"in_line"`
		Remaining int     `json:"remaining"`
		NextFree  float64 `json:"next_free_seconds"`
		EmptyIn   float64 `json:"empty_in_seconds"`
	}{u.TaskType, u.Rule, u.Scope, u.Tenant, u.Key, u.Limit, u.Window.Seconds(), u.Margin.Seconds(), string(alg),
		u.Shadow, u.InForce, u.Used, u.InLine, u.Remaining, u.NextFree.Seconds(), u.EmptyIn.Seconds()})
}

// limiter returns the limiter of the workers whose Redis is rdb and whose
// keys start with prefix ("" for throttle.DefaultPrefix), as worker.NewServer
// makes it but for batching, which changes no key.
func limiter(rdb redis.UniversalClient, prefix string) *throttle.Limiter {
	if prefix == "" {
		prefix = throttle.DefaultPrefix
	}
	return throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
}

// Usage returns how much of each window that Windows(p, taskType, "",
// tenant) selects is used now: every rule that applies to tenant's tasks,
// tenant's own windows and the global ones. rdb is the workers' Redis and
// prefix their limiter's key prefix (worker.Config.Prefix; "" for
// throttle.DefaultPrefix).
//
// Each window is read with the limiter's Usage (throttle.Limiter.Usage),
// which records nothing and gives a window's figures at one instant; the
// windows are read one after another, a few milliseconds apart. Like the
// next decision, it drops the entries that have left the window; since it
// prunes with the window it is given, p must be the policies the workers
// enforce: an older file with a shorter window would drop entries that the
// workers still count.
//
// The windows are read where the layout Redis names keeps them
// (docs/SCALING.md). On more than one shard a global rule has a log in
// each shard and the pool, read as one window of the whole limit: Used,
// InLine and EmptyIn are the logs' sums and latest; Remaining is Limit
// less Used and the places within a window, or 0 (a task may still wait
// for its shard's lease); NextFree, when Remaining is 0, is EmptyIn: an
// upper bound, since no one log knows when the sum frees.
//
// An error about the selection matches ErrSelection; others are Redis's.
// Safe for concurrent use.
func Usage(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, taskType, tenant string) ([]RuleUsage, error) {
	windows, err := Windows(p, taskType, "", tenant)
	if err != nil {
		return nil, err
	}
	s, err := readShards(ctx, rdb, prefix)
	if err != nil {
		return nil, fmt.Errorf("usage for tenant %s: %w", tenant, err)
	}
	out := make([]RuleUsage, len(windows))
	for i, w := range windows {
		if out[i], err = s.usage(ctx, w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// usage reads w's window in each log that holds it (shards.logs), and
// sums them as Usage says.
func (s shards) usage(ctx context.Context, w RuleWindow) (RuleUsage, error) {
	c := w.Check()
	groups := s.logs(w)
	all := make([]throttle.Usage, len(groups))
	for i, g := range groups {
		u, err := s.limiter(g).Usage(ctx, c.Key, c.Policy)
		if err != nil {
			return RuleUsage{}, fmt.Errorf("usage of %s rule %s%s: %w", w.TaskType, w.Rule, s.in(g), err)
		}
		all[i] = u
	}
	inForce := 0
	if w.Min > 0 {
		// The first group keeps the state: the tenant's, or for a global
		// rule the pool's, which every shard is held to.
		a, err := s.limiter(groups[0]).LimitInForce(ctx, c, w.Min)
		if err != nil {
			return RuleUsage{}, fmt.Errorf("usage of %s rule %s: %w", w.TaskType, w.Rule, err)
		}
		inForce = max(w.Min, a.InForce())
	}
	if len(all) == 1 {
		u := all[0]
		return RuleUsage{RuleWindow: w, Used: u.Used, InLine: u.InLine, Remaining: u.Remaining,
			NextFree: u.RetryAfter, EmptyIn: u.ResetAfter, InForce: inForce}, nil
	}
	ru, soon := RuleUsage{RuleWindow: w, InForce: inForce}, 0
	for _, u := range all {
		ru.Used += u.Used
		ru.InLine += u.InLine
		soon += u.InLineSoon
		ru.EmptyIn = max(ru.EmptyIn, u.ResetAfter)
	}
	limit := w.Limit
	if inForce > 0 {
		limit = inForce
	}
	ru.Remaining = max(0, limit-ru.Used-soon)
	if ru.Remaining == 0 {
		ru.NextFree = ru.EmptyIn
	}
	return ru, nil
}
