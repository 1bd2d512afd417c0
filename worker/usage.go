package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// ErrSelection is matched (errors.Is) by the errors of Windows, Usage,
// ResetPlan and ResetTenant about what they were asked for: a tenant id
// that is not valid, a task type or a rule that the policies do not have,
// or a global rule given to a reset. Such an error is found before
// anything is sent to Redis.
var ErrSelection = errors.New("no such windows")

// selectionError is an error that matches ErrSelection and says, in its
// own words, what was asked for that does not exist.
type selectionError struct{ msg string }

func (e *selectionError) Error() string        { return e.msg }
func (e *selectionError) Is(target error) bool { return target == ErrSelection }

// selectionErrorf returns a *selectionError.
func selectionErrorf(format string, args ...any) error {
	return &selectionError{msg: fmt.Sprintf(format, args...)}
}

// RuleWindow is one rule of the policies as it applies to one tenant: the
// window that workers check for the tenant's tasks of one type. For a rule
// of ScopeTenant it is the tenant's own window; for ScopeGlobal the one that
// every tenant shares.
type RuleWindow struct {
	// TaskType is the task type the rule belongs to, such as "sms:send".
	TaskType string

	// Rule is the rule's name.
	Rule string

	// Scope is ScopeTenant or ScopeGlobal.
	Scope string

	// Tenant is the tenant whose window this is; "" for a global rule,
	// whose window is shared by every tenant.
	Tenant string

	// Key is the limiter key of the window (see Policies.For), such as
	// "rule/sms:send/tenant-per-second/acme".
	Key string

	// Limit is the most tasks admitted in any Window: the rule's, or the
	// tenant's override.
	Limit int

	// Window is the span Limit applies to, as the policies file writes it
	// (the rule's, or the tenant's override), without Margin.
	Window time.Duration

	// Margin is what the worker adds to Window (see Rule.Margin): an
	// admission counts for Window + Margin.
	Margin time.Duration

	// Algorithm is the rule's algorithm; "" is the sliding log.
	Algorithm throttle.Algorithm

	// Shadow reports a rule in shadow mode (Rule.Shadow): its window fills
	// as if it were enforced, but it holds no task back.
	Shadow bool
}

// Check returns the limiter check that workers make for w, as
// Policies.For does: Window widened by Margin, a cost of 1.
func (w RuleWindow) Check() throttle.Check {
	return throttle.Check{
		Key:    w.Key,
		Policy: throttle.Policy{Limit: w.Limit, Window: w.Window + w.Margin, Algorithm: w.Algorithm},
		Cost:   1,
	}
}

// Windows returns the windows of the rules of p that apply to tenant's
// tasks: tenant's own window of every rule of ScopeTenant, and the shared
// window of every rule of ScopeGlobal. taskType "" means every task type of
// p, in name order, and otherwise one that p has rules for; rule "" means
// every rule, in file order, and otherwise the rules of that name (one per
// task type that has it). The keys and policies are those of
// Policies.For. It asks nothing of Redis. An error matches ErrSelection and
// names the tenant, task type or rule that is wrong.
func Windows(p *Policies, taskType, rule, tenant string) ([]RuleWindow, error) {
	if p == nil {
		return nil, errors.New("no policies")
	}
	if err := producer.ValidateTenant(tenant); err != nil {
		if fe, ok := errors.AsType[*producer.FieldError](err); ok {
			return nil, selectionErrorf("tenant %s: %s", fe.Value, fe.Problem)
		}
		return nil, selectionErrorf("tenant: %v", err)
	}
	types := p.taskTypes()
	if taskType != "" {
		if len(p.Rules(taskType)) == 0 {
			return nil, selectionErrorf("task type %q has no rules in %s (it runs unthrottled); %s", taskType, p.Source(), p.listTypes())
		}
		types = []string{taskType}
	}
	var out []RuleWindow
	for _, t := range types {
		rules := p.Rules(t)
		for i, a := range p.For(t, tenant) {
			r := rules[i]
			if rule != "" && r.Name != rule {
				continue
			}
			pol := r.Policy
			w := RuleWindow{TaskType: t, Rule: r.Name, Scope: r.Scope, Key: a.Check.Key, Limit: a.Check.Policy.Limit,
				Algorithm: pol.Algorithm, Shadow: a.Shadow}
			if r.Scope == ScopeTenant {
				w.Tenant = tenant
				if o, ok := r.Tenants[tenant]; ok {
					pol = o
				}
			}
			// The check is For's: the margin is what it added.
			w.Window, w.Margin = pol.Window, a.Check.Policy.Window-pol.Window
			out = append(out, w)
		}
	}
	if rule != "" && len(out) == 0 {
		where := "task type " + strings.Join(types, ", ")
		if taskType == "" {
			where = "any task type"
		}
		return nil, selectionErrorf("rule %q is not a rule of %s in %s; %s", rule, where, p.Source(), p.listRules(types))
	}
	return out, nil
}

// taskTypes returns the task types that p has rules for, in name order.
func (p *Policies) taskTypes() []string {
	types := make([]string, 0, len(p.tasks))
	for t := range p.tasks {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

// listTypes says which task types p has rules for, for an error message.
func (p *Policies) listTypes() string {
	types := p.taskTypes()
	if len(types) == 0 {
		return "it has rules for no task type"
	}
	return "it has rules for " + strings.Join(types, ", ")
}

// listRules says which rules the task types have, for an error message.
func (p *Policies) listRules(types []string) string {
	var names []string
	for _, t := range types {
		for _, r := range p.Rules(t) {
			names = append(names, t+" "+r.Name)
		}
	}
	if len(names) == 0 {
		return "it has no rules"
	}
	return "its rules: " + strings.Join(names, ", ")
}

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
}

// MarshalJSON encodes u as one object with snake_case names and durations
// in seconds: {"task_type": "sms:send", "rule": "tenant-per-second",
// "scope": "tenant", "tenant": "acme", "key": "rule/sms:send/...",
// "limit": 4, "window_seconds": 1, "margin_seconds": 0.1, "algorithm":
// "sliding-log", "shadow": false, "used": 3, "in_line": 0, "remaining": 1,
// "next_free_seconds": 0, "empty_in_seconds": 0.84}. A global rule's
// tenant is "".
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
		Used      int     `json:"used"`
		InLine    int     `json:"in_line"`
		Remaining int     `json:"remaining"`
		NextFree  float64 `json:"next_free_seconds"`
		EmptyIn   float64 `json:"empty_in_seconds"`
	}{u.TaskType, u.Rule, u.Scope, u.Tenant, u.Key, u.Limit, u.Window.Seconds(), u.Margin.Seconds(), string(alg),
		u.Shadow, u.Used, u.InLine, u.Remaining, u.NextFree.Seconds(), u.EmptyIn.Seconds()})
}

// limiter returns the limiter of the workers whose Redis is rdb and whose
// keys start with prefix ("" for throttle.DefaultPrefix), as NewServer
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
// prefix their limiter's key prefix (Config.Prefix; "" for
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
// An error about the selection matches ErrSelection; others are Redis's.
// Safe for concurrent use.
func Usage(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, taskType, tenant string) ([]RuleUsage, error) {
	windows, err := Windows(p, taskType, "", tenant)
	if err != nil {
		return nil, err
	}
	l := limiter(rdb, prefix)
	out := make([]RuleUsage, len(windows))
	for i, w := range windows {
		c := w.Check()
		u, err := l.Usage(ctx, c.Key, c.Policy)
		if err != nil {
			return nil, fmt.Errorf("usage of %s rule %s: %w", w.TaskType, w.Rule, err)
		}
		out[i] = RuleUsage{RuleWindow: w, Used: u.Used, InLine: u.InLine, Remaining: u.Remaining,
			NextFree: u.RetryAfter, EmptyIn: u.ResetAfter}
	}
	return out, nil
}

// ResetPlan returns what ResetTenant(ctx, rdb, prefix, p, taskType, rule, tenant)
// would do, without doing it: the windows of tenant it would empty (rules
// of ScopeTenant) and the global windows it would leave as they are,
// shared as they are by every tenant. A rule that names only global rules
// is an error matching ErrSelection, as are those of Windows.
func ResetPlan(p *Policies, taskType, rule, tenant string) (reset, left []RuleWindow, err error) {
	windows, err := Windows(p, taskType, rule, tenant)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range windows {
		if w.Scope == ScopeGlobal {
			left = append(left, w)
		} else {
			reset = append(reset, w)
		}
	}
	if rule != "" && len(reset) == 0 {
		return nil, nil, selectionErrorf("rule %q of %s is global: its window is shared by every tenant, and a tenant's reset never empties it", rule, left[0].TaskType)
	}
	return reset, left, nil
}

// ResetTenant empties tenant's windows of the rules of ScopeTenant that
// ResetPlan(p, taskType, rule, tenant) selects, with the limiter's Reset:
// the admissions in them and the places in line reserved there, whatever
// the algorithm. It never empties a global window: those are returned in
// left, untouched. reset holds the windows emptied, all of them unless
// Redis failed part way. Tasks that held places in an emptied window are
// placed again when they come back. rdb and prefix are as for Usage.
func ResetTenant(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, taskType, rule, tenant string) (reset, left []RuleWindow, err error) {
	plan, left, err := ResetPlan(p, taskType, rule, tenant)
	if err != nil {
		return nil, nil, err
	}
	l := limiter(rdb, prefix)
	for _, w := range plan {
		if err := l.Reset(ctx, w.Key); err != nil {
			return reset, left, fmt.Errorf("reset %s rule %s for tenant %s: %w", w.TaskType, w.Rule, tenant, err)
		}
		reset = append(reset, w)
	}
	return reset, left, nil
}
