package bench

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/sink"
)

// drainScenario is the backlog the drain section drains, and its limits.
type drainScenario struct {
	mode    string  // "full" or "short", for the report
	tasks   int     // SMS tasks in the backlog
	tenants int     // they belong to
	skew    float64 // tenant i has a share ∝ 1/(i+1)^skew of the tasks
	seed    uint64  // of the shuffle of the enqueue order

	tenantLimit   int           // the rule "tenant": per tenant, per window
	providerLimit int           // the rule "provider": all tenants together, per window
	window        time.Duration // of both rules
	weights       []float64     // of the tenants in turn, in the policies file; nil: all 1

	// latency is how long the provider takes to answer each request (it
	// counts the arrival at once): a slow provider needs many tasks in
	// flight.
	latency time.Duration

	// A strategy stops at deadlineFactor × the ideal drain time plus
	// deadlineSlack, delivered or not: a run whose tasks stopped moving
	// must still end.
	deadlineFactor float64
	deadlineSlack  time.Duration
}

// The scenarios of the drain section: full is the default of cmd/bench;
// short, for the tests and CI, drains in about 6 s a strategy; slow is the
// issue "fair service"'s slow provider, equal backlogs answered after
// 250 ms each.
var (
	drainFull = drainScenario{
		mode: "full", tasks: 10_000, tenants: 50, skew: 0.5, seed: 1,
		tenantLimit: 20, providerLimit: 200, window: time.Second,
		deadlineFactor: 4, deadlineSlack: 30 * time.Second,
	}
	drainSlow = drainScenario{
		mode: "slow", tasks: 1200, tenants: 20, skew: 0, seed: 1,
		tenantLimit: 20, providerLimit: 100, window: time.Second, latency: 250 * time.Millisecond,
		deadlineFactor: 4, deadlineSlack: 30 * time.Second,
	}
	// Equal backlogs, weights 3, 1, 1 and 1, the provider's limit alone
	// binding: while all four wait, tenant-00 is owed 30 a second and
	// each other 10, and tenant-00 sends its backlog in 12 s.
	drainWeighted = drainScenario{
		mode: "weighted", tasks: 1440, tenants: 4, skew: 0, seed: 1,
		tenantLimit: 60, providerLimit: 60, window: time.Second, weights: []float64{3, 1, 1, 1},
		deadlineFactor: 4, deadlineSlack: 30 * time.Second,
	}
	drainShort = drainScenario{
		mode: "short", tasks: 600, tenants: 10, skew: 0.5, seed: 1,
		tenantLimit: 20, providerLimit: 100, window: time.Second,
		deadlineFactor: 4, deadlineSlack: 15 * time.Second,
	}
)

// policies returns the policies file of the scenario: its two rules on
// sms:send, with the default margin.
func (sc drainScenario) policies() string {
	var weights strings.Builder
	if len(sc.weights) > 0 {
		weights.WriteString("weights:\n")
		for i, w := range sc.weights {
			fmt.Fprintf(&weights, "  tenant-%02d: %g\n", i, w)
		}
	}
	return weights.String() + fmt.Sprintf(`tasks:
  sms:send:
    - name: tenant
      scope: tenant
      limit: %d
      window: %v
    - name: provider
      scope: global
      limit: %d
      window: %v
`, sc.tenantLimit, sc.window, sc.providerLimit, sc.window)
}

// drainPlan is a scenario made concrete: which tenant each task belongs
// to, in enqueue order, and the ideal schedules of that order.
type drainPlan struct {
	sc          drainScenario
	tenantNames []string // tenant-00, tenant-01, ...
	tenantTasks []int    // tasks of each tenant
	order       []int    // the tenant of each task, in enqueue order

	// ideal is the ideal schedule of the limits as written; withMargin
	// the same with the margin added to the windows, as Sluice enforces
	// them; paced the same again with the provider's admissions after its
	// first window full spread a slot interval apart, as the fair lines
	// give them (docs/FAIRNESS.md, "Pacing").
	ideal, withMargin, paced schedule
}

// schedule is an ideal schedule: when each task is admitted, from the
// start.
type schedule struct {
	byTenant [][]time.Duration // each tenant's slots in order: the k-th is its k-th task's
	drain    time.Duration     // the last slot
}

// newDrainPlan sizes the tenants, shuffles the enqueue order with the
// scenario's seed and simulates the ideal schedules, without and with
// margin added to the windows.
func newDrainPlan(sc drainScenario, margin time.Duration) *drainPlan {
	p := &drainPlan{sc: sc, tenantTasks: tenantSizes(sc.tasks, sc.tenants, sc.skew)}
	for i, n := range p.tenantTasks {
		p.tenantNames = append(p.tenantNames, fmt.Sprintf("tenant-%02d", i))
		for range n {
			p.order = append(p.order, i)
		}
	}
	rng := rand.New(rand.NewPCG(sc.seed, sc.seed))
	rng.Shuffle(len(p.order), func(i, j int) { p.order[i], p.order[j] = p.order[j], p.order[i] })
	p.ideal = p.schedule(sc.window, 0)
	p.withMargin = p.schedule(sc.window+margin, 0)
	p.paced = p.schedule(sc.window+margin, (sc.window+margin)/time.Duration(sc.providerLimit))
	return p
}

// schedule simulates the ideal schedule of the plan's order with both
// rules' windows of length window, the provider's paced by pace (0: not).
func (p *drainPlan) schedule(window, pace time.Duration) schedule {
	slots := idealSchedule(p.order, p.sc.tenants, p.sc.tenantLimit, p.sc.providerLimit, window, pace)
	s := schedule{byTenant: make([][]time.Duration, p.sc.tenants)}
	for i, t := range p.order {
		s.byTenant[t] = append(s.byTenant[t], slots[i])
		s.drain = max(s.drain, slots[i])
	}
	return s
}

// deadline is how long a strategy may run before it is stopped.
func (p *drainPlan) deadline() time.Duration {
	return time.Duration(p.sc.deadlineFactor*float64(p.ideal.drain)) + p.sc.deadlineSlack
}

// taskID is the asynq task ID of the i-th task in enqueue order.
func taskID(i int) string { return fmt.Sprintf("%s%05d", taskIDPrefix, i) }

// taskIDPrefix starts the ID of every task of the plan.
const taskIDPrefix = "drain-"

// tenantSizes splits tasks over tenants in shares ∝ 1/(i+1)^skew, rounded
// by largest remainder so that they add up to tasks exactly.
func tenantSizes(tasks, tenants int, skew float64) []int {
	weights := make([]float64, tenants)
	var sum float64
	for i := range weights {
		weights[i] = 1 / math.Pow(float64(i+1), skew)
		sum += weights[i]
	}
	sizes := make([]int, tenants)
	rest := make([]int, tenants) // tenant indices, by remainder
	left := tasks
	for i, w := range weights {
		exact := float64(tasks) * w / sum
		sizes[i] = int(exact)
		left -= sizes[i]
		rest[i] = i
	}
	frac := func(i int) float64 {
		exact := float64(tasks) * weights[i] / sum
		return exact - math.Floor(exact)
	}
	slices.SortStableFunc(rest, func(a, b int) int { return -cmpFloat(frac(a), frac(b)) })
	for _, i := range rest[:left] {
		sizes[i]++
	}
	return sizes
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// idealSchedule simulates a perfect throttler that admits the tasks of a
// backlog, the tenant of each given in enqueue order, under a sliding
// window of window holding at most tenantLimit admissions per tenant and
// providerLimit in all. At every moment it admits every task that fits,
// the earliest enqueued first, so a task waits only while its tenant's or
// the provider's window is full; an admission leaves the window exactly
// window later, as in the limiter. With pace, once the provider's window
// has been full, its admissions are at least pace apart. It returns each
// task's admission time from the start (the first admissions are at 0).
func idealSchedule(order []int, tenants, tenantLimit, providerLimit int, window, pace time.Duration) []time.Duration {
	pending := make([][]int, tenants) // each tenant's tasks, in enqueue order
	for i, t := range order {
		pending[t] = append(pending[t], i)
	}
	next := make([]int, tenants)                                     // each tenant's first task not admitted
	admitted := make([][]time.Duration, tenants)                     // each tenant's admissions, in order
	var all []time.Duration                                          // every admission, in order
	slots := make([]time.Duration, len(order))                       // the result
	inWindow := func(times []time.Duration, now time.Duration) int { // admissions in (now-window, now]
		i, _ := slices.BinarySearchFunc(times, now-window, func(t, bound time.Duration) int {
			if t > bound {
				return 1
			}
			return -1
		})
		return len(times) - i
	}
	// freeAt is when a window holding times has room for one more, at now
	// or later.
	freeAt := func(times []time.Duration, limit int, now time.Duration) time.Duration {
		if inWindow(times, now) < limit {
			return now
		}
		return times[len(times)-limit] + window
	}

	var now time.Duration
	for left := len(order); left > 0; {
		room := providerLimit - inWindow(all, now)
		paced := pace > 0 && len(all) >= providerLimit
		if paced {
			room = min(room, 1)
			if now < all[len(all)-1]+pace {
				room = 0
			}
		}
		for room > 0 {
			best := -1
			for t := range tenants {
				if next[t] < len(pending[t]) && inWindow(admitted[t], now) < tenantLimit &&
					(best < 0 || pending[t][next[t]] < pending[best][next[best]]) {
					best = t
				}
			}
			if best < 0 {
				break
			}
			i := pending[best][next[best]]
			next[best]++
			slots[i] = now
			admitted[best] = append(admitted[best], now)
			all = append(all, now)
			room--
			left--
		}
		if left == 0 {
			break
		}
		// The next moment something fits: a tenant with tasks left has
		// room, and so has the provider. Nothing fits now, so it is later.
		provider := freeAt(all, providerLimit, now)
		if paced {
			provider = max(provider, all[len(all)-1]+pace)
		}
		later := time.Duration(math.MaxInt64)
		for t := range tenants {
			if next[t] < len(pending[t]) {
				later = min(later, max(provider, freeAt(admitted[t], tenantLimit, now)))
			}
		}
		now = later
	}
	return slots
}

// delivery is what the provider saw of one strategy's run, measured
// against the ideal schedule; drainDelivery computes it.
type delivery struct {
	delivered, received int
	drained             bool
	first, last         time.Duration // first and last delivery from the start; last is of the last task delivered

	globalOver, tenantOver int // arrivals over the limit as written
	tenantsOver            int // tenants with any
	maxGlobal, maxTenant   int // most arrivals in one window

	lateness, marginLateness latenessStats // against the ideal schedule, and the one with margin
	series                   DrainSeries
	jain                     JainResult   // among the backlogged tenants
	shares                   *ShareResult // with weights only
}

// latenessStats are percentiles of the lateness of deliveries.
type latenessStats struct{ p50, p99, max time.Duration }

// seriesStep is the spacing of the samples of DrainSeries.
const seriesStep = 100 * time.Millisecond

// seriesTenants is how many of the largest tenants DrainSeries follows.
const seriesTenants = 3

// drainDelivery measures receipts, the provider's arrivals since start, as
// the provider counts them: every arrival (duplicates included) against
// each rule's limit and window as written, without margin, and each
// task's first arrival as its delivery, the k-th delivery of a tenant
// against the tenant's k-th ideal slot.
func drainDelivery(p *drainPlan, start time.Time, receipts []sink.Receipt) delivery {
	var d delivery
	sc := p.sc
	tenantOf := map[string]int{}
	for i, name := range p.tenantNames {
		tenantOf[name] = i
	}
	firstAt := map[string]time.Time{}
	all := make([]time.Time, 0, len(receipts))
	byTenant := make([][]time.Time, sc.tenants)   // every arrival, a joiner's of the tenant's included
	deliveries := make([][]time.Time, sc.tenants) // first arrivals of the plan's tasks
	for _, r := range receipts {
		all = append(all, r.At)
		t, ok := tenantOf[r.Tenant]
		if !ok {
			continue // the newcomer's: counted in all, no tenant's
		}
		// The urgent tasks are a plan tenant's: they count in its windows,
		// not among the plan's deliveries.
		byTenant[t] = append(byTenant[t], r.At)
		if !strings.HasPrefix(r.ID, taskIDPrefix) {
			continue
		}
		d.received++
		if _, seen := firstAt[r.ID]; !seen {
			firstAt[r.ID] = r.At
			deliveries[t] = append(deliveries[t], r.At)
		}
	}
	d.delivered = len(firstAt)
	d.drained = d.delivered >= sc.tasks
	d.globalOver = arrivals.OverLimit(all, sc.window, sc.providerLimit)
	d.maxGlobal = arrivals.MaxInWindow(all, sc.window)
	for _, times := range byTenant {
		over := arrivals.OverLimit(times, sc.window, sc.tenantLimit)
		d.tenantOver += over
		if over > 0 {
			d.tenantsOver++
		}
		d.maxTenant = max(d.maxTenant, arrivals.MaxInWindow(times, sc.window))
	}
	if len(firstAt) > 0 {
		times := slices.Collect(maps.Values(firstAt))
		d.first = slices.MinFunc(times, time.Time.Compare).Sub(start)
		d.last = slices.MaxFunc(times, time.Time.Compare).Sub(start)
	}

	for _, times := range deliveries {
		slices.SortFunc(times, time.Time.Compare)
	}
	d.jain = jainOf(deliveries, sc.weights, start, sc.window)
	d.shares = sharesOf(p, deliveries, start)
	d.lateness = lateness(deliveries, p.ideal, start)
	d.marginLateness = lateness(deliveries, p.withMargin, start)

	// The plots' series: up to the later of the last arrival and the ideal
	// drain, and a window more.
	end := p.ideal.drain
	if len(all) > 0 {
		end = max(end, slices.MaxFunc(all, time.Time.Compare).Sub(start))
	}
	end += sc.window
	d.series = DrainSeries{StepMs: float64(seriesStep) / float64(time.Millisecond), WindowMs: float64(sc.window) / float64(time.Millisecond)}
	d.series.Global = windowPeaks(all, start, sc.window, seriesStep, end)
	for _, t := range largestTenants(p.tenantTasks, seriesTenants) {
		d.series.Tenants = append(d.series.Tenants, TenantSeries{
			Tenant: p.tenantNames[t], Tasks: p.tenantTasks[t],
			Counts: windowPeaks(byTenant[t], start, sc.window, seriesStep, end),
		})
	}
	return d
}

// lateness measures each tenant's deliveries (sorted) against its slots
// of ideal: the k-th delivery against the k-th slot.
func lateness(deliveries [][]time.Time, ideal schedule, start time.Time) latenessStats {
	var late []time.Duration
	for t, times := range deliveries {
		for k, at := range times {
			if k < len(ideal.byTenant[t]) {
				late = append(late, at.Sub(start)-ideal.byTenant[t][k])
			}
		}
	}
	if len(late) == 0 {
		return latenessStats{}
	}
	slices.Sort(late)
	return latenessStats{p50: percentile(late, 50), p99: percentile(late, 99), max: late[len(late)-1]}
}

// windowPeaks returns, for each span (t-step, t] at t = 0, step, 2·step,
// ... up to end after start, the most of times in any window of length
// window that ends within the span: the count a sliding-window limit holds
// to its limit, at its highest, so that a burst shows whatever the step.
// The first span is the instant 0.
func windowPeaks(times []time.Time, start time.Time, window, step, end time.Duration) []int {
	ts := slices.Clone(times)
	slices.SortFunc(ts, time.Time.Compare)
	at := trailingCounts(ts, start, window, step, end) // at each sample
	// The count in the window ending at each arrival: where the count
	// rises, so where it peaks.
	peak := make([]int, len(ts))
	lo := 0
	for i := range ts {
		for ts[i].Sub(ts[lo]) >= window {
			lo++
		}
		// Arrivals at the same instant all count at the last of them.
		peak[i] = i - lo + 1
	}
	out := make([]int, len(at))
	next := 0 // first arrival after the previous sample
	for k := range at {
		now := start.Add(time.Duration(k) * step)
		out[k] = at[k]
		if k > 0 {
			out[k] = max(out[k], at[k-1]) // the count just after the span's start
		}
		for next < len(ts) && !ts[next].After(now) {
			if k > 0 || !ts[next].Before(now) {
				out[k] = max(out[k], peak[next])
			}
			next++
		}
	}
	return out
}

// trailingCounts returns, at start, start+step, ... up to start+end, how
// many of times fall in the window that ends there, (t-window, t]: the
// count a sliding-window limit holds to its limit.
func trailingCounts(times []time.Time, start time.Time, window, step, end time.Duration) []int {
	ts := slices.Clone(times)
	slices.SortFunc(ts, time.Time.Compare)
	var out []int
	lo, hi := 0, 0
	for at := time.Duration(0); at <= end; at += step {
		now := start.Add(at)
		for hi < len(ts) && !ts[hi].After(now) {
			hi++
		}
		for lo < hi && now.Sub(ts[lo]) >= window {
			lo++
		}
		out = append(out, hi-lo)
	}
	return out
}

// largestTenants returns the indices of the n tenants with the most tasks,
// the largest first (the lower index first among equals).
func largestTenants(sizes []int, n int) []int {
	idx := make([]int, len(sizes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return sizes[b] - sizes[a] })
	return idx[:min(n, len(idx))]
}
