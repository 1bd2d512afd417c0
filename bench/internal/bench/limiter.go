package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// floorScript is the cheapest script call there is: the round trip that any
// decision made in Redis costs at least.
var floorScript = redis.NewScript(`return 1`)

// redisRatePrefix starts every key redis_rate writes; it cannot be changed.
const redisRatePrefix = "rate:"

// Targets of the issues "Performance" and "The cost of a decision",
// checked on the allowing variant: sluice is the default throttle.Limiter.
const (
	TargetCallers            = 32   // the number of callers the throughput and Redis-time targets apply to
	TargetOverRedisRate      = 1.0  // least sluice/redis_rate throughput
	TargetOverFloor          = 0.85 // least sluice/floor throughput
	TargetRedisUsOverGCRA    = 1.0  // most sluice/redis_rate Redis time per decision
	TargetP50OverToday       = 1.10 // most sluice/today p50 latency at one caller
	TargetP50OverTodayCaller = 1    // the number of callers the p50 target applies to
)

// LimiterResult is the limiter section: Allow against the floor and
// redis_rate.
type LimiterResult struct {
	Keys     int       `json:"keys"` // keys the calls spread over
	Variants []Variant `json:"variants"`
	Targets  []Target  `json:"targets"`
}

// Variant is one policy, measured at every number of callers.
type Variant struct {
	Name      string  `json:"name"` // "allow" or "deny"
	About     string  `json:"about"`
	Sluice    string  `json:"sluice_policy"`    // as throttle.Policy.String
	RedisRate string  `json:"redis_rate_limit"` // as redis_rate.Limit.String
	Points    []Point `json:"points"`
}

// Point is the contenders at one number of callers.
type Point struct {
	Callers int         `json:"callers"`
	Floor   Measurement `json:"floor"`
	// Sluice is Allow on the default throttle.NewLimiter, which batches.
	Sluice    Measurement `json:"sluice"`
	RedisRate Measurement `json:"redis_rate"`

	// SluiceUnbatched is Allow on a Limiter with throttle.WithoutBatching;
	// Textbook the textbook sliding-window log (textbookScript) on the same
	// keys; Today the decision script of 2026-11-26 (todayScript), one call
	// a decision. Nil in results from before they were measured.
	SluiceUnbatched *Measurement `json:"sluice_unbatched,omitempty"`
	Textbook        *Measurement `json:"textbook,omitempty"`
	Today           *Measurement `json:"today,omitempty"`

	// SluiceOverFloor is Sluice's throughput over the floor's, round by
	// round: the share of the round-trip floor that Allow achieves.
	SluiceOverFloor Ratio `json:"sluice_over_floor"`

	// SluiceOverRedisRate is Sluice's throughput over redis_rate's, round by
	// round.
	SluiceOverRedisRate Ratio `json:"sluice_over_redis_rate"`

	// RedisRateOverFloor is redis_rate's throughput over the floor's, round
	// by round: how near to the floor a script that does little gets.
	RedisRateOverFloor Ratio `json:"redis_rate_over_floor"`

	// SluiceOverUnbatched and SluiceOverToday are Sluice's throughput over
	// SluiceUnbatched's and Today's, TextbookOverRedisRate the textbook's
	// over redis_rate's, round by round; zero when not measured.
	SluiceOverUnbatched   Ratio `json:"sluice_over_unbatched,omitzero"`
	SluiceOverToday       Ratio `json:"sluice_over_today,omitzero"`
	TextbookOverRedisRate Ratio `json:"textbook_over_redis_rate,omitzero"`

	// SluiceRedisUsOverRedisRate is Sluice's Redis time per decision over
	// redis_rate's, and SluiceP50OverToday its p50 latency over Today's,
	// round by round; zero when not measured.
	SluiceRedisUsOverRedisRate Ratio `json:"sluice_redis_us_over_redis_rate,omitzero"`
	SluiceP50OverToday         Ratio `json:"sluice_p50_over_today,omitzero"`
}

// Target is one goal of the issues against what was measured.
type Target struct {
	// Name is "sluice_over_redis_rate", "sluice_over_floor",
	// "sluice_redis_us_over_redis_rate" or "sluice_p50_over_today".
	Name    string  `json:"name"`
	Variant string  `json:"variant"`
	Callers int     `json:"callers"`
	Want    float64 `json:"want"`    // the bound that meets it
	AtMost  bool    `json:"at_most"` // Want is the most, not the least
	Got     float64 `json:"got"`     // the median ratio measured
	Met     bool    `json:"met"`
}

// point returns the Point of v at callers, or nil.
func (v *Variant) point(callers int) *Point {
	for i := range v.Points {
		if v.Points[i].Callers == callers {
			return &v.Points[i]
		}
	}
	return nil
}

// variantSpec is a variant to run: the policy of each limiter, and whether
// every key is filled to its limit first so that every call is denied.
type variantSpec struct {
	name, about string
	policy      throttle.Policy
	limit       redis_rate.Limit
	fill        bool
}

var variants = []variantSpec{{
	name: "allow",
	about: "100 a second per key for both limiters. Spread over the keys, each key " +
		"sees a few calls a second, so every call is allowed and recorded: the " +
		"write path, with a few entries per Sluice window.",
	policy: throttle.PerSecond(100),
	limit:  redis_rate.PerSecond(100),
}, {
	name: "deny",
	about: "10 a day per key for both limiters, every key filled to its limit " +
		"before the first round, so every call is denied: the path of a " +
		"backlog retrying against a full window.",
	policy: throttle.PerDay(10),
	limit:  redis_rate.Limit{Rate: 10, Burst: 10, Period: 24 * time.Hour},
	fill:   true,
}}

// contender is one of the things measured.
type contender struct {
	name   string
	decide decideFunc
	result func(*Point) *Measurement
}

// runLimiter runs every variant: in each round, every number of callers,
// and at each the contenders one after another in an order that rotates
// from round to round.
func runLimiter(ctx context.Context, r *runner, res *Results) error {
	today, err := todayScript(ctx)
	if err != nil {
		r.logf("limiter: sluice today left out: %v", err)
	}
	r.today = today
	for _, s := range []*redis.Script{floorScript, lua.Decide, textbookScript, today} {
		if s == nil {
			continue
		}
		if err := s.Load(ctx, r.rdb).Err(); err != nil {
			return fmt.Errorf("load script: %w", err)
		}
	}
	keys := make([]string, r.cfg.Keys)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	lr := &LimiterResult{Keys: len(keys)}
	for _, spec := range variants {
		v, err := runVariant(ctx, r, spec, keys)
		if err != nil {
			return fmt.Errorf("%s: %w", spec.name, err)
		}
		lr.Variants = append(lr.Variants, v)
	}
	lr.Targets = targets(lr)
	res.Limiter = lr
	return nil
}

// runVariant measures one variant on keys of its own: a warm-up of each
// contender, then the rounds.
func runVariant(ctx context.Context, r *runner, spec variantSpec, keys []string) (Variant, error) {
	prefix := r.prefix + spec.name + ":"
	sluice := throttle.NewLimiter(r.rdb, throttle.WithPrefix(prefix))
	// On the same keys as sluice, so that the deny variant's fill holds
	// for all three.
	unbatched := throttle.NewLimiter(r.rdb, throttle.WithPrefix(prefix), throttle.WithoutBatching())
	redisKeys := make(map[string]string, len(keys))
	for _, k := range keys {
		rk, err := sluice.RedisKey(k)
		if err != nil {
			return Variant{}, err
		}
		redisKeys[k] = rk
	}
	gcra := redis_rate.NewLimiter(r.rdb)
	contenders := limiterContenders(r, spec, prefix, limiterSluices{sluice, unbatched, redisKeys}, gcra)

	if spec.fill {
		if err := fill(ctx, r, keys, sluice, gcra, spec); err != nil {
			return Variant{}, err
		}
	}
	// Warm up every contender at the most callers: scripts cached, the
	// pool's connections open.
	most := slices.Max(r.cfg.Callers)
	for _, c := range contenders {
		if _, err := measure(ctx, most, keys, 0, r.cfg.Warmup, c.decide); err != nil {
			return Variant{}, fmt.Errorf("warm up %s: %w", c.name, err)
		}
	}

	v := Variant{Name: spec.name, About: spec.about, Sluice: spec.policy.String(), RedisRate: spec.limit.String()}
	rounds := make(map[string][][]Round) // contender -> callers index -> rounds
	for round := range r.cfg.Repeat {
		for ci, callers := range r.cfg.Callers {
			for k := range contenders {
				c := contenders[(round+k)%len(contenders)]
				got, err := measureRound(ctx, r, c, callers, keys)
				if err != nil {
					return Variant{}, err
				}
				if rounds[c.name] == nil {
					rounds[c.name] = make([][]Round, len(r.cfg.Callers))
				}
				rounds[c.name][ci] = append(rounds[c.name][ci], got)
				r.logf("limiter %-5s round %d/%d callers %3d %-16s %9.0f/s  p50 %6.0f µs  p99 %6.0f µs  Redis %5.1f µs/call  allowed %3.0f%%",
					spec.name, round+1, r.cfg.Repeat, callers, c.name, got.PerSecond, got.P50, got.P99, got.RedisUsPerCall, 100*got.AllowedShare)
			}
		}
	}
	v.Points = variantPoints(r.cfg.Callers, contenders, rounds)
	return v, nil
}

// limiterSluices are the Limiters the limiter section measures: the
// default one, one WithoutBatching on the same keys, and the Redis key of
// each bench key, on which the textbook and today's script run too.
type limiterSluices struct {
	sluice, unbatched *throttle.Limiter
	redisKeys         map[string]string
}

// limiterContenders returns the limiters that runVariant compares, in
// the order of their first round: the floor (floorScript, the cheapest
// script call), sluice, go-redis/redis_rate, sluice unbatched, the
// textbook log and today's script, each on keys under prefix.
func limiterContenders(r *runner, spec variantSpec, prefix string, ls limiterSluices, gcra *redis_rate.Limiter) []contender {
	var seq atomic.Int64 // names the textbook's members
	window := spec.policy.Window.Microseconds()
	cs := []contender{{
		name: "floor",
		decide: func(ctx context.Context, key string) (bool, error) {
			return true, floorScript.Run(ctx, r.rdb, []string{prefix + key}).Err()
		},
		result: func(p *Point) *Measurement { return &p.Floor },
	}, {
		name: "sluice",
		decide: func(ctx context.Context, key string) (bool, error) {
			d, err := ls.sluice.Allow(ctx, key, spec.policy)
			return d.Allowed, err
		},
		result: func(p *Point) *Measurement { return &p.Sluice },
	}, {
		name: "redis_rate",
		decide: func(ctx context.Context, key string) (bool, error) {
			res, err := gcra.Allow(ctx, prefix+key, spec.limit)
			if err != nil {
				return false, err
			}
			return res.Allowed > 0, nil
		},
		result: func(p *Point) *Measurement { return &p.RedisRate },
	}, {
		name: "sluice unbatched",
		decide: func(ctx context.Context, key string) (bool, error) {
			d, err := ls.unbatched.Allow(ctx, key, spec.policy)
			return d.Allowed, err
		},
		result: func(p *Point) *Measurement { return optional(&p.SluiceUnbatched) },
	}, {
		name: "textbook",
		decide: func(ctx context.Context, key string) (bool, error) {
			n, err := textbookScript.Run(ctx, r.rdb, []string{ls.redisKeys[key]}, spec.policy.Limit, window,
				strconv.FormatInt(seq.Add(1), 10)).Int()
			return n == 1, err
		},
		result: func(p *Point) *Measurement { return optional(&p.Textbook) },
	}}
	if r.today == nil {
		return cs
	}
	return append(cs, contender{
		name: "sluice today",
		decide: func(ctx context.Context, key string) (bool, error) {
			// The arguments the Limiter of 2026-11-26 sent for Allow.
			reply, err := r.today.Run(ctx, r.rdb, []string{ls.redisKeys[key]}, "1", "", 0,
				spec.policy.Limit, window, 1, spec.policy.Algorithm.String()).Int64Slice()
			return err == nil && len(reply) > 0 && reply[0] == 1, err
		},
		result: func(p *Point) *Measurement { return optional(&p.Today) },
	})
}

// optional returns *m, made first when nil.
func optional(m **Measurement) *Measurement {
	if *m == nil {
		*m = &Measurement{}
	}
	return *m
}

// measureRound measures contender c for one round at callers callers
// over keys, with Redis's own time per EVALSHA call from INFO
// commandstats around it.
func measureRound(ctx context.Context, r *runner, c contender, callers int, keys []string) (Round, error) {
	before, err := evalshaStats(ctx, r.rdb)
	if err != nil {
		return Round{}, err
	}
	got, err := measure(ctx, callers, keys, r.cfg.Warmup, r.cfg.Duration, c.decide)
	if err != nil {
		return Round{}, fmt.Errorf("%s at %d callers: %w", c.name, callers, err)
	}
	after, err := evalshaStats(ctx, r.rdb)
	if err != nil {
		return Round{}, err
	}
	if calls := after.calls - before.calls; calls > 0 {
		got.RedisUsPerCall = float64(after.usec-before.usec) / float64(calls)
	}
	return got, nil
}

// variantPoints sums up the rounds of each contender (contender ->
// callers index -> rounds) into one Point per number of callers, with
// the ratios between contenders.
func variantPoints(callersList []int, contenders []contender, rounds map[string][][]Round) []Point {
	var points []Point
	for ci, callers := range callersList {
		p := Point{Callers: callers}
		for _, c := range contenders {
			*c.result(&p) = measurement(rounds[c.name][ci])
		}
		p.SluiceOverFloor = throughputRatio(p.Sluice.Rounds, p.Floor.Rounds)
		p.SluiceOverRedisRate = throughputRatio(p.Sluice.Rounds, p.RedisRate.Rounds)
		p.RedisRateOverFloor = throughputRatio(p.RedisRate.Rounds, p.Floor.Rounds)
		p.SluiceRedisUsOverRedisRate = roundRatio(p.Sluice.Rounds, p.RedisRate.Rounds, func(r Round) float64 { return r.RedisUsPerCall })
		if p.SluiceUnbatched != nil {
			p.SluiceOverUnbatched = throughputRatio(p.Sluice.Rounds, p.SluiceUnbatched.Rounds)
		}
		if p.Textbook != nil {
			p.TextbookOverRedisRate = throughputRatio(p.Textbook.Rounds, p.RedisRate.Rounds)
		}
		if p.Today != nil {
			p.SluiceOverToday = throughputRatio(p.Sluice.Rounds, p.Today.Rounds)
			p.SluiceP50OverToday = roundRatio(p.Sluice.Rounds, p.Today.Rounds, func(r Round) float64 { return r.P50 })
		}
		points = append(points, p)
	}
	return points
}

// roundRatio returns the ratios of field f of num's rounds over den's,
// round by round.
func roundRatio(num, den []Round, f func(Round) float64) Ratio {
	xs, ys := make([]float64, len(num)), make([]float64, len(den))
	for i, r := range num {
		xs[i] = f(r)
	}
	for i, r := range den {
		ys[i] = f(r)
	}
	return perSecondRatio(xs, ys)
}

// fill takes every key of both limiters to its limit, so that every later
// call is denied.
func fill(ctx context.Context, r *runner, keys []string, sluice *throttle.Limiter, gcra *redis_rate.Limiter, spec variantSpec) error {
	prefix := r.prefix + spec.name + ":"
	const workers = 32
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(keys) && errs[w] == nil; i += workers {
				if _, err := sluice.AllowN(ctx, keys[i], spec.policy, spec.policy.Limit); err != nil {
					errs[w] = fmt.Errorf("fill %s: %w", keys[i], err)
				} else if _, err := gcra.AllowN(ctx, prefix+keys[i], spec.limit, spec.limit.Burst); err != nil {
					errs[w] = fmt.Errorf("fill %s: redis_rate: %w", keys[i], err)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// targets checks the goals of the issues against the allowing variant:
// throughput and Redis time at TargetCallers, latency at
// TargetP50OverTodayCaller, when they were measured.
func targets(lr *LimiterResult) []Target {
	var out []Target
	for i := range lr.Variants {
		v := &lr.Variants[i]
		if v.Name != "allow" {
			continue
		}
		if p := v.point(TargetCallers); p != nil {
			out = append(out,
				limiterTarget("sluice_over_redis_rate", v.Name, p.Callers, TargetOverRedisRate, false, p.SluiceOverRedisRate),
				limiterTarget("sluice_over_floor", v.Name, p.Callers, TargetOverFloor, false, p.SluiceOverFloor),
				limiterTarget("sluice_redis_us_over_redis_rate", v.Name, p.Callers, TargetRedisUsOverGCRA, true, p.SluiceRedisUsOverRedisRate))
		}
		if p := v.point(TargetP50OverTodayCaller); p != nil && p.Today != nil {
			out = append(out, limiterTarget("sluice_p50_over_today", v.Name, p.Callers, TargetP50OverToday, true, p.SluiceP50OverToday))
		}
	}
	return out
}

// limiterTarget checks the median of r against want: at least want, or
// at most want when atMost.
func limiterTarget(name, variant string, callers int, want float64, atMost bool, r Ratio) Target {
	met := r.Median >= want
	if atMost {
		met = r.Median > 0 && r.Median <= want
	}
	return Target{Name: name, Variant: variant, Callers: callers, Want: want, AtMost: atMost, Got: r.Median, Met: met}
}
