package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/throttle"
)

// The accuracy section measures how far the algorithms that keep a few
// numbers per key (throttle.SlidingWindow, GCRA, FixedWindow) stray from the
// exact sliding log, on arrival patterns simulated in Go on a clock of its
// own: no Redis, no waiting, the same figures on every run. The models
// below are the algorithms' definitions (lua/counters.lua header), computed
// with exact integers and fractions; a test runs them against the Lua
// functions in Redis, call by call, so the simulation measures what the
// limiter does.

// Settings of the accuracy section.
const (
	AccuracyLimit  = 100         // units per window of every simulated policy
	AccuracyWindow = time.Second // the window of every simulated policy
	accuracySeed   = 20_261_121  // of the Poisson arrivals
)

// accuracyEpoch is the simulated clock's start, in µs of the Unix epoch: a
// whole hour, so fixed windows start at it.
const accuracyEpoch = 1_800_000_000_000_000

// AccuracyResult is the accuracy section: each pattern of arrivals run
// through each algorithm, every request of cost 1.
type AccuracyResult struct {
	Limit         int               `json:"limit"`          // AccuracyLimit
	WindowSeconds float64           `json:"window_seconds"` // AccuracyWindow
	Patterns      []AccuracyPattern `json:"patterns"`
}

// AccuracyPattern is one pattern of arrivals and how each algorithm took it,
// the exact sliding log first.
type AccuracyPattern struct {
	Name     string        `json:"name"`
	About    string        `json:"about"`
	Requests int           `json:"requests"`
	Rows     []AccuracyRow `json:"rows"`
}

// AccuracyRow is one algorithm on one pattern.
type AccuracyRow struct {
	Algorithm string `json:"algorithm"`
	Admitted  int    `json:"admitted"`

	// AdmittedOverLog is Admitted over the sliding log's on the same
	// arrivals.
	AdmittedOverLog float64 `json:"admitted_over_log"`

	// MaxInWindowOverLimit is the most requests admitted in any span of one
	// window, over the limit: 1 at most for the exact log.
	MaxInWindowOverLimit float64 `json:"max_in_window_over_limit"`

	// LeastAtDenialOverLimit is the fewest of the algorithm's own
	// admissions that the window held at one of its denials, over the
	// limit: 1 for the exact log, which denies only a full window; below 1,
	// the algorithm denied with room left. 0 when nothing was denied.
	LeastAtDenialOverLimit float64 `json:"least_at_denial_over_limit"`

	// Denied is the number of requests denied.
	Denied int `json:"denied"`

	// WronglyDenied is the share of all requests that were denied although
	// the window then held fewer than the limit of the algorithm's own
	// admissions: the exact log, holding the same admissions, would have
	// admitted them. Under sustained overload this counts every denial
	// made while the algorithm runs a unit below the limit, although one
	// admission would fill that room: the units it costs are in
	// AdmittedOverLog.
	WronglyDenied float64 `json:"wrongly_denied"`

	// WronglyAdmitted is the share of all requests that were admitted
	// although the window already held the limit of the algorithm's own
	// admissions: the exact log would have denied them.
	WronglyAdmitted float64 `json:"wrongly_admitted"`
}

// accuracyPattern is a pattern of arrivals: times in µs, in order.
type accuracyPattern struct {
	name, about string
	arrivals    func() []int64
}

// accuracyPatterns are the patterns the section runs, at AccuracyLimit per
// AccuracyWindow.
func accuracyPatterns() []accuracyPattern {
	const w = int64(AccuracyWindow / time.Microsecond)
	const limit = AccuracyLimit
	// evenly returns n arrivals spread evenly over [from, from+span).
	evenly := func(out []int64, from, span int64, n int) []int64 {
		for i := range n {
			out = append(out, from+span*int64(i)/int64(n))
		}
		return out
	}
	return []accuracyPattern{
		{"steady, 2× the limit", "a request every 5 ms for 20 windows, from 401.234 ms into a window", func() []int64 {
			return evenly(nil, accuracyEpoch+401_234, 20*w, 2*limit*20)
		}},
		{"bursts at window edges", "the limit in the last 10 ms of a window and again in the first 10 ms of the next, every other window, 10 times", func() []int64 {
			var out []int64
			for k := int64(1); k <= 10; k++ {
				edge := accuracyEpoch + 2*k*w
				out = evenly(out, edge-w/100, w/100, limit)
				out = evenly(out, edge, w/100, limit)
			}
			return out
		}},
		{"burst, then steady", "the limit in the last 10 ms of a window, then 4× the limit spread over the next window, then two quiet windows; 10 times", func() []int64 {
			var out []int64
			for k := int64(0); k < 10; k++ {
				next := accuracyEpoch + (4*k+1)*w
				out = evenly(out, next-w/100, w/100, limit)
				out = evenly(out, next, w, 4*limit)
			}
			return out
		}},
		{"Poisson, 1.5× the limit", "random arrivals at 1.5× the limit on average, for 60 windows (seeded: the same on every run)", func() []int64 {
			r := rand.New(rand.NewPCG(accuracySeed, 1))
			mean := float64(w) / (1.5 * limit)
			var out []int64
			for t := float64(accuracyEpoch); t < accuracyEpoch+60*float64(w); t += r.ExpFloat64() * mean {
				out = append(out, int64(t))
			}
			return out
		}},
	}
}

// runAccuracy runs the section; it needs neither Redis nor r.
func runAccuracy(_ context.Context, _ *runner, res *Results) error {
	res.Accuracy = simulateAccuracy()
	return nil
}

// simulateAccuracy runs every pattern through every algorithm.
func simulateAccuracy() *AccuracyResult {
	w := int64(AccuracyWindow / time.Microsecond)
	ar := &AccuracyResult{Limit: AccuracyLimit, WindowSeconds: AccuracyWindow.Seconds()}
	for _, pat := range accuracyPatterns() {
		times := pat.arrivals()
		ap := AccuracyPattern{Name: pat.name, About: pat.about, Requests: len(times)}
		logAdmitted := 0
		for _, alg := range throttle.Algorithms() {
			row := simulate(newModel(alg), times, AccuracyLimit, w)
			row.Algorithm = string(alg)
			if alg == throttle.SlidingLog {
				logAdmitted = row.Admitted
			}
			if logAdmitted > 0 {
				row.AdmittedOverLog = float64(row.Admitted) / float64(logAdmitted)
			}
			ap.Rows = append(ap.Rows, row)
		}
		ar.Patterns = append(ar.Patterns, ap)
	}
	return ar
}

// simulate offers a request of cost 1 at each of times to m, and judges
// each decision against the exact log holding m's own admissions.
func simulate(m model, times []int64, limit, w int64) AccuracyRow {
	var row AccuracyRow
	var admitted []time.Time
	var own []int64 // m's admissions, oldest first; own[lo:] are within a window
	lo := 0
	wrongDenied, wrongAdmitted := 0, 0
	least := limit
	for _, now := range times {
		for lo < len(own) && own[lo] <= now-w {
			lo++
		}
		inWindow := int64(len(own) - lo)
		d := m.check(now, limit, w, 1)
		if d.allowed {
			m.record(now, limit, w, 1)
			own = append(own, now)
			admitted = append(admitted, time.UnixMicro(now))
			if inWindow+1 > limit {
				wrongAdmitted++
			}
			continue
		}
		row.Denied++
		least = min(least, inWindow)
		if inWindow+1 <= limit {
			wrongDenied++
		}
	}
	n := float64(len(times))
	row.Admitted = len(own)
	if row.Denied > 0 {
		row.LeastAtDenialOverLimit = float64(least) / float64(limit)
	}
	row.MaxInWindowOverLimit = float64(arrivals.MaxInWindow(admitted, time.Duration(w)*time.Microsecond)) / float64(limit)
	row.WronglyDenied = float64(wrongDenied) / n
	row.WronglyAdmitted = float64(wrongAdmitted) / n
	return row
}

// modelDecision is a model's answer, as counter_check gives it but for the
// retry (see retryOf): reset in µs.
type modelDecision struct {
	allowed      bool
	count, reset int64
}

// model is one key under one algorithm: check decides a request without
// recording anything, record admits it (only after check allowed it at the
// same now). limit, w and cost are those of the call: a key may be called
// with another policy than the last.
type model interface {
	check(now, limit, w, cost int64) modelDecision
	record(now, limit, w, cost int64)
}

// newModel returns an empty key under algorithm a.
func newModel(a throttle.Algorithm) model {
	switch a {
	case throttle.SlidingWindow:
		return &slidingModel{}
	case throttle.GCRA:
		return &gcraModel{}
	case throttle.FixedWindow:
		return &fixedModel{}
	}
	return &logModel{}
}

// retryOf returns the retry of a request that m denies at now: the least
// whole µs x > 0 at which m would admit it if nothing else were admitted,
// found by search (a model's count only falls while nothing is admitted),
// where the Lua functions have closed forms. 0 when m admits it now.
func retryOf(m model, now, limit, w, cost int64) int64 {
	fits := func(x int64) bool { return m.check(now+x, limit, w, cost).allowed }
	if fits(0) {
		return 0
	}
	hi := int64(1)
	for !fits(hi) {
		hi *= 2
	}
	lo := hi / 2 // denied at lo
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// logModel is the exact sliding log: admissions at their times.
type logModel struct{ times []int64 }

func (m *logModel) count(now, w int64) int64 {
	n := int64(0)
	for _, t := range m.times {
		if t > now-w {
			n++
		}
	}
	return n
}

// check reports allowed and count, all the simulation asks of the log.
func (m *logModel) check(now, limit, w, cost int64) modelDecision {
	if len(m.times) > int(limit) {
		// With a fixed limit the older ones decide nothing: when they are
		// in the window, so are the newer limit.
		m.times = m.times[len(m.times)-int(limit):]
	}
	n := m.count(now, w)
	return modelDecision{allowed: n+cost <= limit, count: n}
}

func (m *logModel) record(now, limit, w, cost int64) {
	for range cost {
		m.times = append(m.times, now)
	}
}

// fixedModel is throttle.FixedWindow: c units counted in the window that
// starts at s.
type fixedModel struct {
	set  bool
	s, c int64
}

func (m *fixedModel) count(now, w int64) int64 {
	if m.set && m.s >= now-now%w {
		return m.c
	}
	return 0
}

func (m *fixedModel) check(now, limit, w, cost int64) modelDecision {
	n := m.count(now, w)
	d := modelDecision{allowed: n+cost <= limit, count: n}
	if n > 0 {
		d.reset = now - now%w + w - now
	}
	return d
}

func (m *fixedModel) record(now, limit, w, cost int64) {
	n := m.count(now, w)
	m.set, m.s, m.c = true, now-now%w, n+cost
}

// slidingModel is throttle.SlidingWindow: c units counted in the window
// that starts at s, p in the one before it, both with window w0.
type slidingModel struct {
	set         bool
	s, c, p, w0 int64
}

// counts returns the units of the current and the previous window at now:
// each stored count belongs to the window its own window started in.
func (m *slidingModel) counts(now, w int64) (cur, prev int64) {
	if !m.set {
		return 0, 0
	}
	start := now - now%w
	place := func(from, n int64) {
		switch {
		case from >= start:
			cur += n
		case from >= start-w:
			prev += n
		}
	}
	place(m.s, m.c)
	place(m.s-m.w0, m.p)
	return cur, prev
}

// count returns cur + ceil(prev × left / w), left the µs left in the
// current window.
func (m *slidingModel) count(now, w int64) int64 {
	cur, prev := m.counts(now, w)
	left := now - now%w + w - now
	return cur + mulDivCeil(prev, left, w)
}

func (m *slidingModel) check(now, limit, w, cost int64) modelDecision {
	cur, prev := m.counts(now, w)
	n := m.count(now, w)
	d := modelDecision{allowed: n+cost <= limit, count: n}
	left := now - now%w + w - now
	switch {
	case cur > 0:
		d.reset = left + w
	case prev > 0:
		d.reset = left
	}
	return d
}

func (m *slidingModel) record(now, limit, w, cost int64) {
	cur, prev := m.counts(now, w)
	m.set, m.s, m.c, m.p, m.w0 = true, now-now%w, cur+cost, prev, w
}

// gcraModel is throttle.GCRA: the theoretical arrival time tat, in µs,
// kept in units of 1/l µs, l the limit it was last written with.
type gcraModel struct {
	tat *big.Rat // nil: never written
	l   int64
}

// ahead returns max(tat - now, 0) as seen with limit: tat rounded up to a
// whole number of 1/limit µs when it was written with another limit.
func (m *gcraModel) ahead(now, limit int64) *big.Rat {
	d := new(big.Rat)
	if m.tat == nil {
		return d
	}
	tat := m.tat
	if m.l != limit {
		scaled := new(big.Rat).Mul(tat, big.NewRat(limit, 1))
		tat = new(big.Rat).SetFrac(ratCeil(scaled), big.NewInt(limit))
	}
	d.Sub(tat, big.NewRat(now, 1))
	if d.Sign() < 0 {
		d.SetInt64(0)
	}
	return d
}

// gcraFits reports whether cost units fit when tat is d ahead: when d +
// cost × w/limit <= w.
func gcraFits(d *big.Rat, limit, w, cost int64) bool {
	after := new(big.Rat).Mul(big.NewRat(cost, 1), big.NewRat(w, limit))
	return after.Add(after, d).Cmp(big.NewRat(w, 1)) <= 0
}

func (m *gcraModel) check(now, limit, w, cost int64) modelDecision {
	d := m.ahead(now, limit)
	// count: ceil(d / (w/limit)).
	n := ratCeil(new(big.Rat).Mul(d, big.NewRat(limit, w)))
	dec := modelDecision{allowed: gcraFits(d, limit, w, cost), reset: ratCeil(d).Int64()}
	if n.IsInt64() {
		dec.count = n.Int64()
	} else {
		dec.count = math.MaxInt64
	}
	return dec
}

func (m *gcraModel) record(now, limit, w, cost int64) {
	d := m.ahead(now, limit)
	tat := new(big.Rat).Add(big.NewRat(now, 1), d)
	m.tat = tat.Add(tat, new(big.Rat).Mul(big.NewRat(cost, 1), big.NewRat(w, limit)))
	m.l = limit
}

// ratCeil returns the least integer at or above x.
func ratCeil(x *big.Rat) *big.Int {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// mulDivCeil returns ceil(a × b / c) for a, b >= 0 and c > 0, computing a ×
// b in 128 bits; the result must fit in an int64.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if r > 0 {
		q++
	}
	return int64(q)
}

// reportAccuracy writes the accuracy section.
func reportAccuracy(w io.Writer, res *Results) {
	ar := res.Accuracy
	if ar == nil {
		return
	}
	fmt.Fprintf(w, "\n## Accuracy of the constant-memory algorithms\n\n")
	fmt.Fprintf(w, "Simulated in Go on a clock of its own, no Redis: a policy of %d per %v, every request of cost 1, "+
		"through models of the algorithms that a test checks call by call against the Lua functions. "+
		"Each decision is judged against the exact sliding log holding the algorithm's own admissions: "+
		"*wrongly denied* requests found fewer than the limit in the window, *wrongly admitted* ones found the limit "+
		"already there (shares of all requests); *least at a denial* is the fewest the window held at a denial, over "+
		"the limit. Under sustained overload an algorithm that runs a unit below the limit denies with room at "+
		"nearly every request, though one admission would fill it: the units lost are in *vs the log*, the number "+
		"admitted over the sliding log's on the same arrivals. *Most in a window* is the most requests admitted in "+
		"any span of one window, over the limit.\n",
		ar.Limit, seconds(ar.WindowSeconds))
	for _, p := range ar.Patterns {
		fmt.Fprintf(w, "\n### %s\n\n%s: %s requests.\n\n", p.Name, upperFirst(p.About), thousands(float64(p.Requests)))
		fmt.Fprintf(w, "| algorithm | admitted | vs the log | most in a window | least at a denial | wrongly denied | wrongly admitted |\n")
		fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range p.Rows {
			least := "–"
			if r.Denied > 0 {
				least = fmt.Sprintf("%.2f", r.LeastAtDenialOverLimit)
			}
			fmt.Fprintf(w, "| %s | %s | %.3f | %.2f | %s | %s | %s |\n", r.Algorithm, thousands(float64(r.Admitted)),
				r.AdmittedOverLog, r.MaxInWindowOverLimit, least, share(r.WronglyDenied), share(r.WronglyAdmitted))
		}
	}
}

// share formats a share of requests as a percentage with two decimals:
// 0.01234 is "1.23%".
func share(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

// upperFirst returns s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
