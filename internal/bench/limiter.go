package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
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

// Targets of the issue "Performance", checked on the allowing variant.
const (
	TargetCallers       = 32   // the number of callers the targets apply to
	TargetOverRedisRate = 1.0  // least sluice/redis_rate throughput
	TargetOverFloor     = 0.85 // least sluice/floor throughput
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
	Callers   int         `json:"callers"`
	Floor     Measurement `json:"floor"`
	Sluice    Measurement `json:"sluice"`
	RedisRate Measurement `json:"redis_rate"`

	// SluiceBatched is Sluice's Allow on a Limiter with
	// throttle.WithBatching's defaults; nil in results from before it was
	// measured.
	SluiceBatched *Measurement `json:"sluice_batched,omitempty"`

	// SluiceOverFloor is Sluice's throughput over the floor's, round by
	// round: the share of the round-trip floor that Allow achieves.
	SluiceOverFloor Ratio `json:"sluice_over_floor"`

	// SluiceOverRedisRate is Sluice's throughput over redis_rate's, round by
	// round.
	SluiceOverRedisRate Ratio `json:"sluice_over_redis_rate"`

	// RedisRateOverFloor is redis_rate's throughput over the floor's, round
	// by round: how near to the floor a script that does little gets.
	RedisRateOverFloor Ratio `json:"redis_rate_over_floor"`

	// SluiceBatchedOverFloor, SluiceBatchedOverRedisRate and
	// SluiceBatchedOverSluice are batched Sluice's throughput over the
	// floor's, redis_rate's and unbatched Sluice's, round by round; zero
	// when SluiceBatched is nil.
	SluiceBatchedOverFloor     Ratio `json:"sluice_batched_over_floor,omitzero"`
	SluiceBatchedOverRedisRate Ratio `json:"sluice_batched_over_redis_rate,omitzero"`
	SluiceBatchedOverSluice    Ratio `json:"sluice_batched_over_sluice,omitzero"`
}

// Target is one goal of the issue "Performance" against what was measured.
type Target struct {
	// Name is "sluice_over_redis_rate" or "sluice_over_floor", or the same
	// with "sluice_batched" for the batched Limiter.
	Name    string  `json:"name"`
	Variant string  `json:"variant"`
	Callers int     `json:"callers"`
	Want    float64 `json:"want"` // the least ratio that meets it
	Got     float64 `json:"got"`  // the median ratio measured
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
	for _, s := range []*redis.Script{floorScript, lua.Allow} {
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
	// for both.
	batched := throttle.NewLimiter(r.rdb, throttle.WithPrefix(prefix), throttle.WithBatching(nil))
	gcra := redis_rate.NewLimiter(r.rdb)
	contenders := limiterContenders(r, spec, prefix, sluice, batched, gcra)

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
				r.logf("limiter %-5s round %d/%d callers %3d %-14s %9.0f/s  p50 %6.0f µs  p99 %6.0f µs  Redis %5.1f µs/call  allowed %3.0f%%",
					spec.name, round+1, r.cfg.Repeat, callers, c.name, got.PerSecond, got.P50, got.P99, got.RedisUsPerCall, 100*got.AllowedShare)
			}
		}
	}
	v.Points = variantPoints(r.cfg.Callers, contenders, rounds)
	return v, nil
}

// limiterContenders returns the limiters that runVariant compares, in
// the order of their first round, each on keys under prefix: the floor
// (floorScript, the cheapest script call), sluice, go-redis/redis_rate,
// and sluice batched.
func limiterContenders(r *runner, spec variantSpec, prefix string, sluice, batched *throttle.Limiter, gcra *redis_rate.Limiter) []contender {
	return []contender{{
		name: "floor",
		decide: func(ctx context.Context, key string) (bool, error) {
			return true, floorScript.Run(ctx, r.rdb, []string{prefix + key}).Err()
		},
		result: func(p *Point) *Measurement { return &p.Floor },
	}, {
		name: "sluice",
		decide: func(ctx context.Context, key string) (bool, error) {
			d, err := sluice.Allow(ctx, key, spec.policy)
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
		name: "sluice batched",
		decide: func(ctx context.Context, key string) (bool, error) {
			d, err := batched.Allow(ctx, key, spec.policy)
			return d.Allowed, err
		},
		result: func(p *Point) *Measurement {
			if p.SluiceBatched == nil {
				p.SluiceBatched = &Measurement{}
			}
			return p.SluiceBatched
		},
	}}
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
// the throughput ratios between contenders.
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
		p.SluiceBatchedOverFloor = throughputRatio(p.SluiceBatched.Rounds, p.Floor.Rounds)
		p.SluiceBatchedOverRedisRate = throughputRatio(p.SluiceBatched.Rounds, p.RedisRate.Rounds)
		p.SluiceBatchedOverSluice = throughputRatio(p.SluiceBatched.Rounds, p.Sluice.Rounds)
		points = append(points, p)
	}
	return points
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

// targets checks the goals of the issue "Performance" against the allowing
// variant at TargetCallers, when it was measured.
func targets(lr *LimiterResult) []Target {
	var out []Target
	for i := range lr.Variants {
		v := &lr.Variants[i]
		p := v.point(TargetCallers)
		if v.Name != "allow" || p == nil {
			continue
		}
		out = append(out,
			limiterTarget("sluice_over_redis_rate", v.Name, TargetOverRedisRate, p.SluiceOverRedisRate),
			limiterTarget("sluice_over_floor", v.Name, TargetOverFloor, p.SluiceOverFloor))
		if p.SluiceBatched != nil {
			out = append(out,
				limiterTarget("sluice_batched_over_redis_rate", v.Name, TargetOverRedisRate, p.SluiceBatchedOverRedisRate),
				limiterTarget("sluice_batched_over_floor", v.Name, TargetOverFloor, p.SluiceBatchedOverFloor))
		}
	}
	return out
}

// limiterTarget checks the median of r against want, at TargetCallers.
func limiterTarget(name, variant string, want float64, r Ratio) Target {
	return Target{Name: name, Variant: variant, Callers: TargetCallers, Want: want, Got: r.Median, Met: r.Median >= want}
}
