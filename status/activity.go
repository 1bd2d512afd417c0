package status

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/worker"
)

// DenialSpan is the span of Activity.DenialRate: the denials a second on
// the status page are those of the last 10 s, divided by 10.
const DenialSpan = 10 * time.Second

// ProviderSpan is the span of ProviderActivity's recent counts: the
// provider's answers, and its 429s, in the last minute.
const ProviderSpan = time.Minute

// Defaults of ActivityConfig.
const (
	defaultActivityTenants = 50
	defaultActivityForget  = 5 * time.Minute
)

// ActivityConfig configures NewActivity. Zero fields take the defaults
// given; a nil *ActivityConfig takes them all.
type ActivityConfig struct {
	// Tenants is the most tenants an Activity keeps; when one more is seen,
	// the tenant seen least recently is dropped. Default 50.
	Tenants int

	// Forget is how long a tenant is kept after the last limiter call for
	// one of its tasks; default 5 min.
	Forget time.Duration

	// Now is the clock; default time.Now. Tests set it.
	Now func() time.Time
}

// Check at compile time that Activity is a worker.Observer.
var _ worker.Observer = (*Activity)(nil)

// Activity is what one worker has seen lately: the tenants whose tasks it
// asked the limiter about, the denials of each rule, and its providers'
// answers. It is the worker's own view, not the fleet's: the status page
// (Page) takes its list of tenants and its denials a second from it,
// and the use of each window from Redis.
//
// It is a worker.Observer: a Server feeds it when it is one of
// Config.Observers. In your own asynq server, call ObserveDecision from
// ThrottleConfig.OnDecision and ObserveProvider after each send.
//
// Its memory is bounded: at most ActivityConfig.Tenants tenants, each
// dropped ActivityConfig.Forget after it was last seen, with a counter of
// the last DenialSpan for each of their rules. Safe for concurrent use.
type Activity struct {
	max    int
	forget time.Duration
	now    func() time.Time

	mu        sync.Mutex
	tenants   map[string]*tenantSeen
	rules     map[ruleRef]counts // denials of each rule, every tenant together
	providers map[string]*providerSeen
}

// ruleRef names a rule: its task type and its name.
type ruleRef struct{ taskType, rule string }

// tenantSeen is what an Activity keeps of one tenant.
type tenantSeen struct {
	last    time.Time
	types   map[string]bool    // the task types of its tasks seen
	denials map[ruleRef]counts // its denials, by the rule that set the wait
}

// providerSeen is what an Activity keeps of one provider.
type providerSeen struct {
	answers, tooMany           counts // over ProviderSpan
	answersTotal, tooManyTotal int
	lastTooMany                time.Time
}

// NewActivity returns an empty Activity; a nil cfg takes every default.
func NewActivity(cfg *ActivityConfig) *Activity {
	if cfg == nil {
		cfg = &ActivityConfig{}
	}
	a := &Activity{
		max:       cfg.Tenants,
		forget:    cfg.Forget,
		now:       cfg.Now,
		tenants:   map[string]*tenantSeen{},
		rules:     map[ruleRef]counts{},
		providers: map[string]*providerSeen{},
	}
	if a.max <= 0 {
		a.max = defaultActivityTenants
	}
	if a.forget <= 0 {
		a.forget = defaultActivityForget
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// ObserveDecision records one limiter call of the Throttle middleware: its
// tenant was seen, and when the call denied, the rule that set the wait
// counts a denial. A task back before its place in line (Early) and a call
// that failed are not denials.
func (a *Activity) ObserveDecision(e worker.DecisionEvent) {
	if e.Tenant == "" {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := a.tenants[e.Tenant]
	if ts == nil {
		a.drop(now)
		if len(a.tenants) >= a.max {
			oldest := ""
			for name, t := range a.tenants {
				if oldest == "" || t.last.Before(a.tenants[oldest].last) {
					oldest = name
				}
			}
			delete(a.tenants, oldest)
		}
		ts = &tenantSeen{types: map[string]bool{}, denials: map[ruleRef]counts{}}
		a.tenants[e.Tenant] = ts
	}
	ts.last = now
	ts.types[e.TaskType] = true
	rule, ok := deniedRule(e)
	if !ok {
		return
	}
	ref := ruleRef{e.TaskType, rule}
	for _, m := range []map[ruleRef]counts{ts.denials, a.rules} {
		c := m[ref]
		if c == nil {
			c = newCounts(DenialSpan)
			m[ref] = c
		}
		c.add(now)
	}
}

// deniedRule returns the rule that denied e, as Metrics counts it: the one
// that set the wait. It returns false when e is no denial: allowed, early,
// or failed.
func deniedRule(e worker.DecisionEvent) (string, bool) {
	d := e.Decision
	if e.Err != nil || d.Allowed || d.Early || len(e.Rules) == 0 {
		return "", false
	}
	if d.Denied >= 0 && d.Denied < len(e.Rules) {
		return e.Rules[d.Denied], true
	}
	return e.Rules[0], true
}

// ObserveProvider records the answer of e.Provider ("sms", "email") to one
// message: e.Err is what its Send returned (see ResponseClass).
func (a *Activity) ObserveProvider(e worker.ProviderEvent) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.providers[e.Provider]
	if p == nil {
		p = &providerSeen{answers: newCounts(ProviderSpan), tooMany: newCounts(ProviderSpan)}
		a.providers[e.Provider] = p
	}
	p.answers.add(now)
	p.answersTotal++
	if ResponseClass(e.Err) == "429" {
		p.tooMany.add(now)
		p.tooManyTotal++
		p.lastTooMany = now
	}
}

// ObserveThrottled does nothing: the status page reads the throttled
// backlog from the retry sets, every worker's included.
func (a *Activity) ObserveThrottled(worker.ThrottledEvent) {}

// drop forgets the tenants not seen within forget, and the rules with no
// denial within DenialSpan. a.mu is held.
func (a *Activity) drop(now time.Time) {
	for name, t := range a.tenants {
		if now.Sub(t.last) > a.forget {
			delete(a.tenants, name)
		}
	}
	for ref, c := range a.rules {
		if c.sum(now) == 0 {
			delete(a.rules, ref)
		}
	}
}

// SeenTenant is one tenant that an Activity holds.
type SeenTenant struct {
	// Tenant is the tenant's id.
	Tenant string

	// LastSeen is when the worker last asked the limiter about one of its
	// tasks.
	LastSeen time.Time

	// TaskTypes are the task types of its tasks seen, in name order.
	TaskTypes []string
}

// Tenants returns the tenants seen within ActivityConfig.Forget, at most
// ActivityConfig.Tenants of them, in name order.
func (a *Activity) Tenants() []SeenTenant {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drop(now)
	out := make([]SeenTenant, 0, len(a.tenants))
	for name, t := range a.tenants {
		types := make([]string, 0, len(t.types))
		for tt := range t.types {
			types = append(types, tt)
		}
		slices.Sort(types)
		out = append(out, SeenTenant{Tenant: name, LastSeen: t.last, TaskTypes: types})
	}
	slices.SortFunc(out, func(x, y SeenTenant) int { return strings.Compare(x.Tenant, y.Tenant) })
	return out
}

// DenialRate returns the denials a second that the rule named rule of
// taskType gave tenant's tasks over the last DenialSpan, in this worker;
// tenant "" means every tenant's. With 4 denials in the last 10 s it is
// 0.4.
func (a *Activity) DenialRate(taskType, rule, tenant string) float64 {
	now := a.now()
	ref := ruleRef{taskType, rule}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.rules[ref]
	if tenant != "" {
		c = nil
		if t := a.tenants[tenant]; t != nil {
			c = t.denials[ref]
		}
	}
	if c == nil {
		return 0
	}
	return float64(c.sum(now)) / DenialSpan.Seconds()
}

// ProviderActivity is what an Activity saw of one provider's answers.
type ProviderActivity struct {
	// Provider is "sms" or "email".
	Provider string

	// Answers and TooMany are the provider's answers, and those of them
	// that were 429 (or an SMTP server's equivalent, see ResponseClass),
	// in the last ProviderSpan.
	Answers, TooMany int

	// AnswersTotal and TooManyTotal count them since the Activity began.
	AnswersTotal, TooManyTotal int

	// LastTooMany is when the last 429 came; zero for never.
	LastTooMany time.Time
}

// Providers returns what the Activity saw of each provider that answered,
// in name order.
func (a *Activity) Providers() []ProviderActivity {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]ProviderActivity, 0, len(a.providers))
	for name, p := range a.providers {
		out = append(out, ProviderActivity{
			Provider: name, Answers: p.answers.sum(now), TooMany: p.tooMany.sum(now),
			AnswersTotal: p.answersTotal, TooManyTotal: p.tooManyTotal, LastTooMany: p.lastTooMany,
		})
	}
	slices.SortFunc(out, func(x, y ProviderActivity) int { return strings.Compare(x.Provider, y.Provider) })
	return out
}
