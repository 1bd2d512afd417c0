package demo

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// The demo stops at a timeout computed from its policies, unless
// Config.Timeout sets one: TimeoutFactor × the drain time + TimeoutSlack.
// The drain time is how long the policies' limits make the demo's tasks
// take at best (see drainTime): 12.1 s for the default 60 SMS under the
// built-in policies, so the demo stops after 24.5 s; 1,000 SMS take
// 218.9 s and stop after 272.7 s.
const (
	// TimeoutFactor multiplies the drain time: the worker admits a little
	// later than the limits would allow, because a throttled task waits in
	// asynq's retry set until a whole second (asynq stores retry times in
	// seconds) and until asynq next moves it back to its queue.
	TimeoutFactor = 1.2

	// TimeoutSlack is added to the drain time × TimeoutFactor: the time to
	// start the worker, take the first tasks and stop it.
	TimeoutSlack = 10 * time.Second
)

// TimeoutRule says how the demo's timeout is computed, for help texts.
var TimeoutRule = fmt.Sprintf("the time its policies need for its SMS × %g + %v", TimeoutFactor, TimeoutSlack)

// timeoutFor returns the demo's timeout when the tasks take drain at
// best: drain × TimeoutFactor + TimeoutSlack, to the millisecond, and at
// most the longest time.Duration.
func timeoutFor(drain time.Duration) time.Duration {
	t := float64(drain)*TimeoutFactor + float64(TimeoutSlack)
	if t >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(t).Round(time.Millisecond)
}

// drainTime returns how long the sms:send rules of p take at best
// to admit tasks[i] SMS of each of tenants[i], all enqueued at once.
//
// Every window key of a rule (one per tenant for a tenant rule, one for a
// global rule) must admit the tasks of its tenants, n of them, at limit L
// per window W, where L and W are the effective policy: the tenant's
// override if any, W widened by the rule's margin (policies.Policies.For).
// L go at once, L more a window later, and so on: the last of them goes
// ceil(n/L)-1 windows after the first. The drain time is the longest of
// these over every key of every rule; rules in shadow mode hold nothing
// back and do not count. It is 0 when every key admits all its tasks at
// once, and a lower bound when several rules bind in turn.
//
// The formula is exact for the sliding log, the default algorithm. GCRA
// admits L at once and then one every W/L, (n-L)·W/L in all, and a fixed
// window's first burst may come late in its window: for them it is an
// upper bound. The sliding-window counter admits about L per W.
func drainTime(p *policies.Policies, tenants []string, tasks []int) time.Duration {
	type load struct {
		limit  int
		window time.Duration
		n      int
	}
	keys := map[string]*load{}
	for i, tenant := range tenants {
		for _, a := range p.For(producer.TypeSMS, tenant) {
			if a.Shadow {
				continue
			}
			l := keys[a.Check.Key]
			if l == nil {
				l = &load{limit: a.Check.Policy.Limit, window: a.Check.Policy.Window}
				keys[a.Check.Key] = l
			}
			l.n += tasks[i] * a.Check.Cost
		}
	}
	var drain time.Duration
	for _, l := range keys {
		windows := time.Duration((l.n+l.limit-1)/l.limit - 1)
		if windows > 0 && l.window > math.MaxInt64/windows {
			return math.MaxInt64
		}
		drain = max(drain, windows*l.window)
	}
	return drain
}

// timeLine is the line that says, before the run, how long n SMS take at
// best and when the demo stops, in seconds as the summary gives its time.
func timeLine(n int, drain, timeout time.Duration) string {
	stops := fmt.Sprintf("the demo stops after %s unless all are sent", seconds(timeout))
	if drain == 0 {
		return fmt.Sprintf("time: the limits let the %d SMS go at once; %s", n, stops)
	}
	return fmt.Sprintf("time: %d SMS at the limits take about %s; %s", n, seconds(drain), stops)
}

// seconds writes d in seconds, to a tenth: "24.5s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
