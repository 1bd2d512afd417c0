package throttle_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// paceWatch reads a shared log after every call of a lineSim and records
// each place the lines give in it, in the order they are given: a member
// '@<id>#1' that was not there before, or an admission '<p>-c<id>#1' of a
// task that held no place (a task at its worker given a slot). A place
// taken over by another task (the bumped task's member gone in the same
// call, the new one on it or moved to now) reuses a slot already given,
// and is recorded apart. A claim, which turns a place into an admission,
// places nothing.
type paceWatch struct {
	key      string
	interval int64         // the slot interval, µs
	from     int64         // places given by calls before this time are not checked
	late     int64         // how late a grant may be claimed, µs
	members  map[unit]bool // the log as last read
	placed   []int64       // places given, in order, swaps left out
	swapped  int
	moved    int   // claims moved later than their place
	lateness int64 // by how much in all, µs
	failures []string
}

// watchPaces makes s record the places given in its shared log (paceWatch),
// and check them from the next call after its first one on.
func (s *lineSim) watchPaces(prefix string) {
	s.t.Helper()
	key, err := throttle.NewLimiter(s.rdb, throttle.WithPrefix(prefix)).RedisKey("provider")
	if err != nil {
		s.t.Fatal(err)
	}
	s.watch = &paceWatch{key: key, interval: s.global.Window.Microseconds() / int64(s.global.Limit),
		late: throttle.DefaultLinesLate.Microseconds(), from: math.MaxInt64}
}

// checkPaces fails the test for every place found too close to the one
// before it, and returns the places checked.
func (s *lineSim) checkPaces() int {
	s.t.Helper()
	for _, f := range s.watch.failures {
		s.t.Error(f)
	}
	s.t.Logf("%d places checked, %d taken over, %d claims moved later by %v on average", len(s.watch.placed), s.watch.swapped,
		s.watch.moved, us(s.watch.lateness/int64(max(1, s.watch.moved))))
	return len(s.watch.placed)
}

// look diffs the log against the last read, after a call made at now.
func (w *paceWatch) look(s *lineSim) {
	s.t.Helper()
	zs, err := s.rdb.ZRangeWithScores(context.Background(), w.key, 0, -1).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	// A place moved (taken back and given again in one call) is a place
	// gone and a new one.
	cur := make(map[unit]bool, len(zs))
	for _, z := range zs {
		cur[unit{z.Member.(string), int64(z.Score)}] = true
	}
	// Places gone without an admission of their task, whose time had not
	// passed by more than late (not reaped): taken back by a take-over,
	// or moved.
	var bumped []int64
	for u := range w.members {
		if id, place := memberID(u.member); place && !cur[u] && !hasAdmission(cur, id) && u.at >= s.now-w.late-1 {
			bumped = append(bumped, u.at)
		}
	}
	var fresh []unit
	for u := range cur {
		if w.members[u] {
			continue
		}
		if id, place := memberID(u.member); !place {
			if p, ok := placeOf(w.members, id); ok {
				if u.at > p {
					w.moved++
					w.lateness += u.at - p
				}
				continue // a claim
			}
		}
		if i := slices.IndexFunc(bumped, func(b int64) bool { return u.at == max(b, s.now) }); i >= 0 {
			bumped = slices.Delete(bumped, i, i+1)
			w.swapped++
			continue
		}
		fresh = append(fresh, u)
	}
	w.members = cur
	if s.now < w.from {
		return
	}
	slices.SortFunc(fresh, func(a, b unit) int { return int(a.at - b.at) })
	for _, u := range fresh {
		if n := len(w.placed); n > 0 && u.at-w.placed[n-1] < w.interval && len(w.failures) < 5 {
			w.failures = append(w.failures, fmt.Sprintf("at +%v %s: a place at +%v, %v after the place given before it (+%v): the slot interval is %v",
				s.elapsed(), u.member, us(u.at-simStart), us(u.at-w.placed[n-1]), us(w.placed[n-1]-simStart), us(w.interval)))
		}
		w.placed = append(w.placed, u.at)
	}
}

// unit is a member of a log and its score.
type unit struct {
	member string
	at     int64
}

// memberID returns the task of a log's member, and whether it is a place.
func memberID(m string) (string, bool) {
	if strings.HasPrefix(m, "@") {
		return m[1:strings.LastIndex(m, "#")], true
	}
	i := strings.Index(m, "-c")
	return m[i+2 : strings.LastIndex(m, "#")], false
}

func hasAdmission(members map[unit]bool, id string) bool {
	for u := range members {
		if strings.Contains(u.member, "-c"+id+"#") {
			return true
		}
	}
	return false
}

func placeOf(members map[unit]bool, id string) (int64, bool) {
	for u := range members {
		if u.member == "@"+id+"#1" {
			return u.at, true
		}
	}
	return 0, false
}

func us(x int64) time.Duration { return time.Duration(x) * time.Microsecond }

// TestLinesPacedGrants: over a long drain (two backlogs of 1,200 under a
// shared rule of 50 a second, 2,400 slots), with deliveries from 10 ms to
// 210 ms (claims early and late), newcomers and urgent tasks at random
// times, no place the lines give in the shared log is closer than the slot
// interval (20 ms) to the one given before it, checked at every grant; so
// a slot is never more than an interval away for a task that starts
// waiting, and every newcomer's and urgent task's send comes within a slot
// plus 100 ms of its arrival. The rule is still used at 0.9 of its limit
// or more (0.93 to 0.95), and no window holds more than its limit.
func TestLinesPacedGrants(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		seed := rand.Uint64()
		if s, err := strconv.ParseUint(os.Getenv("SLUICE_SEED"), 10, 64); err == nil {
			seed = s // a failure's seed, to run it again
		}
		t.Logf("seed %d (SLUICE_SEED)", seed)
		rng := rand.New(rand.NewPCG(seed, 1))
		rule := throttle.Policy{Limit: 50, Window: time.Second}
		s := newLineSim(t, rdb, prefix, rule)
		s.watchPaces(prefix)
		s.fetch = 10_000
		for range 64 {
			s.jitter = append(s.jitter, rng.Int64N(20)*10_000) // 0 to 190 ms, in ticks
		}
		s.enqueue("acme", 3, 1200)
		s.enqueue("globex", 3, 1200)
		s.watch.from = s.now + 1
		// Newcomers (3 tasks each) and urgent tasks at random ticks.
		type visitor struct {
			at    time.Duration
			first string
		}
		var visitors []visitor
		for at := 2 * time.Second; at < 44*time.Second; at += time.Duration(1+rng.IntN(20)) * 100 * time.Millisecond {
			s.run(at)
			if len(visitors)%2 == 0 {
				visitors = append(visitors, visitor{at, s.enqueue(fmt.Sprintf("new-%d", len(visitors)), 3, 3)[0]})
			} else {
				visitors = append(visitors, visitor{at, s.enqueue(fmt.Sprintf("urgent-%d", len(visitors)), 1, 1)[0]})
			}
		}
		s.run(60 * time.Second)
		s.checkWindows()
		if n := s.checkPaces(); n < 2000 {
			t.Errorf("%d places given, want the drain's 2,000 and more", n)
		}
		sent := map[string]int64{}
		for _, x := range s.sends {
			sent[x.id] = x.at
		}
		bound := rule.Window/time.Duration(rule.Limit) + 100*time.Millisecond
		var worst time.Duration
		for _, v := range visitors {
			at, ok := sent[v.first]
			if !ok {
				t.Errorf("%s, enqueued at +%v, was not sent", v.first, v.at)
				continue
			}
			wait := us(at-simStart) - v.at
			worst = max(worst, wait)
			if wait > bound {
				t.Errorf("%s, enqueued at +%v, waited %v: want at most a slot plus 100 ms, %v", v.first, v.at, wait, bound)
			}
		}
		t.Logf("%d newcomers and urgent tasks, the longest wait %v", len(visitors), worst)
		c := s.count(3*time.Second, 43*time.Second)
		n := 0
		for _, k := range c {
			n += k
		}
		if n < 1800 {
			t.Errorf("%d sends in windows 3 to 43, want at least 0.9 of 2,000", n)
		}
		t.Logf("%d sends in windows 3 to 43, %.3f of the limit", n, float64(n)/2000)
	})
}
