package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// TestLineSpreadsReturns: a backlog denied at once is sent back one freed slot
// at a time. With a full window of 5 entries admitted at s0..s4, caller k in
// line comes back when exit k frees: s[k] + W for k < 5, then the exits of
// the units placed at those times, s[k-5] + 2W, and so on.
func TestLineSpreadsReturns(t *testing.T) {
	t.Parallel()
	p := throttle.Policy{Limit: 5, Window: 10 * time.Second}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.Check{{Key: "tenant", Policy: p, Cost: 1}}
		for i := range 5 {
			md, err := l.AllowInLine(ctx, fmt.Sprint("first-", i), checks)
			if err != nil || !md.Allowed {
				t.Fatalf("request %d: %+v, %v", i, md, err)
			}
			time.Sleep(2 * time.Millisecond) // distinct admission times
		}
		s := scores(t, rdb, redisKey(t, l, "tenant"))
		w := p.Window.Microseconds()
		for k := range 12 {
			before := redisNow(t, rdb)
			md, err := l.AllowInLine(ctx, fmt.Sprint("backlog-", k), checks)
			after := redisNow(t, rdb)
			if err != nil {
				t.Fatal(err)
			}
			if md.Allowed || md.Denied != 0 || md.Early {
				t.Fatalf("backlog %d: %+v, want denied at check 0", k, md)
			}
			at := s[k%5] + int64(k/5+1)*w
			lo, hi := time.Duration(at-after)*time.Microsecond, time.Duration(at-before)*time.Microsecond
			if md.RetryAfter < lo || md.RetryAfter > hi {
				t.Errorf("backlog %d: RetryAfter %v, want its place at s[%d]+%dW, in [%v, %v]", k, md.RetryAfter, k%5, k/5+1, lo, hi)
			}
		}
		// Every place counts: the window holds 5 admissions and 12 places.
		if got := len(scores(t, rdb, redisKey(t, l, "tenant"))); got != 17 {
			t.Errorf("window holds %d members, want 17", got)
		}
	})
}

// clock is a raw key of the line tests that holds the time the script reads
// instead of TIME, as fields s (seconds) and us (microseconds).
const clock = "clock"

// clockedScript is decide.lua reading its clock from the last key, so that a
// test can run many calls at times of its choosing with one script.
var clockedScript = func() *redis.Script {
	src := lua.DecideSource()
	return redis.NewScript(strings.Replace(src, clockLine, "local t = redis.call('HMGET', KEYS[#KEYS], 's', 'us')", 1))
}()

// line runs line-mode calls of one caller set on raw keys at chosen times.
type line struct {
	t         *testing.T
	rdb       redis.UniversalClient
	prefix    string
	tolerance int64
}

// at runs decide.lua at now over the named windows in the given mode.
func (ln line) at(now int64, mode, id string, keys []string, checks ...check) reply {
	t := ln.t
	t.Helper()
	ctx := context.Background()
	ck := rawKey(ln.prefix, clock)
	if err := ln.rdb.HSet(ctx, ck, "s", now/1e6, "us", now%1e6).Err(); err != nil {
		t.Fatal(err)
	}
	raw := make([]string, len(keys))
	for i, k := range keys {
		raw[i] = rawKey(ln.prefix, k)
	}
	raw = append(throttle.WithFrontiers(raw), ck)
	args := []any{mode, id, ln.tolerance}
	var windows []int64
	for _, c := range checks {
		args = append(args, c.limit, c.window, c.cost, "sliding-log")
		windows = append(windows, c.window)
	}
	res, err := throttle.ScriptReply(clockedScript.Run(ctx, ln.rdb, raw, args...), windows...)
	if err != nil {
		t.Fatalf("decide.lua at %d %v %v: %v", now, keys, args, err)
	}
	n := len(checks)
	r := reply{allowed: res[0] == 1, wait: res[4*n+1], line: int(res[4*n+2]), early: res[4*n+3] == 1}
	for i := range n {
		c := res[1+4*i:]
		r.checks = append(r.checks, checkReply{c[0] == 1, c[1], c[2], c[3]})
	}
	return r
}

// members returns the members of a raw window with their scores.
func (ln line) members(key string) map[string]int64 {
	ln.t.Helper()
	zs, err := ln.rdb.ZRangeWithScores(context.Background(), rawKey(ln.prefix, key), 0, -1).Result()
	if err != nil {
		ln.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member.(string)] = int64(z.Score)
	}
	return out
}

// TestLinePlaces follows callers in line through every case, to the
// microsecond. Limit 2 per 1 s; the window holds admissions at 0 and 100 ms.
func TestLinePlaces(t *testing.T) {
	t.Parallel()
	const w, tol = 1_000_000, 10_000
	c := check{2, w, 1}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ln := line{t: t, rdb: rdb, prefix: prefix, tolerance: tol}
		t0 := redisNow(t, rdb)
		for i, at := range []int64{t0, t0 + 100_000} {
			if r := ln.at(at, "2", fmt.Sprint("first", i), []string{"k"}, c); !r.allowed {
				t.Fatalf("admission %d: %+v", i, r)
			}
		}
		now := t0 + 200_000

		// a, b, c: places at the two exits, then one window after a's.
		a := ln.at(now, "2", "a", []string{"k"}, c)
		b := ln.at(now, "2", "b", []string{"k"}, c)
		cc := ln.at(now, "2", "c", []string{"k"}, c)
		for name, got := range map[string][2]int64{"a": {a.wait, t0 + w}, "b": {b.wait, t0 + 100_000 + w}, "c": {cc.wait, t0 + 2*w}} {
			if got[0] != got[1]-now {
				t.Errorf("%s: wait %d µs, want %d", name, got[0], got[1]-now)
			}
		}
		if a.allowed || a.line != 1 || a.early || a.checks[0].Count != 3 {
			t.Errorf("a: %+v, want denied by check 1 with 3 members counted", a)
		}
		if got := ln.members("k"); got["@a#1"] != t0+w || got["@b#1"] != t0+100_000+w || got["@c#1"] != t0+2*w {
			t.Errorf("places = %v", got)
		}

		// a back early: told the time left; nothing changes.
		before := ln.members("k")
		if r := ln.at(t0+w-300, "2", "a", []string{"k"}, c); r.allowed || !r.early || r.wait != 300 {
			t.Errorf("a back early: %+v, want early with 300 µs left", r)
		}
		if got := ln.members("k"); !mapsEqual(got, before) {
			t.Errorf("an early return changed the window: %v, was %v", got, before)
		}

		// At a's place a caller outside the line finds the slot taken, and
		// every slot up to c's: its time is b's place plus a window.
		out := ln.at(t0+w, "1", "", []string{"k"}, c)
		if want := t0 + 100_000 + 2*w; out.allowed || out.wait != want-(t0+w) {
			t.Errorf("outsider at a's place: %+v, want denied until %d", out, want)
		}

		late := linePlacesAdmitted(ln, c, t0)
		linePlacesPartial(ln, c, late)
	})
}

// linePlacesAdmitted goes on with TestLinePlaces from a's place: a on time
// and b within the tolerance are admitted as of their places, c late is
// taken as a new caller. It returns the time c came.
func linePlacesAdmitted(ln line, c check, t0 int64) (late int64) {
	t := ln.t
	t.Helper()
	w, tol := c.window, ln.tolerance
	// a at its place: admitted as of it.
	if r := ln.at(t0+w, "2", "a", []string{"k"}, c); !r.allowed {
		t.Errorf("a at its place: %+v, want admitted", r)
	}
	// b within the tolerance after its place: admitted as of its place.
	if r := ln.at(t0+100_000+w+tol, "2", "b", []string{"k"}, c); !r.allowed {
		t.Errorf("b %d µs late: %+v, want admitted", tol, r)
	}
	got := ln.members("k")
	if got[fmt.Sprintf("%d-ca#1", t0+w)] != t0+w || got[fmt.Sprintf("%d-cb#1", t0+100_000+w)] != t0+100_000+w {
		t.Errorf("admitted places not renamed at their scores: %v", got)
	}
	if _, ok := got["@a#1"]; ok {
		t.Errorf("a's place is still there after its admission: %v", got)
	}

	// c later than the tolerance: its place is dropped and it is taken
	// as a new caller, admitted now as the window has room (a's
	// admission has left it).
	late = t0 + 2*w + tol + 1
	if r := ln.at(late, "2", "c", []string{"k"}, c); !r.allowed {
		t.Errorf("c late: %+v, want admitted as a new caller", r)
	}
	got = ln.members("k")
	if _, ok := got["@c#1"]; ok || len(got) != 2 || got[member(late, 1)] != late {
		t.Errorf("window after c came late: %v, want b's admission and c's at %d, no place", got, late)
	}
	return late
}

// linePlacesPartial ends TestLinePlaces at late: a place in only some of
// the caller's windows (one reset) is given up, and the caller is placed
// again in all.
func linePlacesPartial(ln line, c check, late int64) {
	t := ln.t
	t.Helper()
	w := c.window
	ln.rdb.Del(context.Background(), rawKey(ln.prefix, "k"))
	two := []string{"k", "g"}
	for i := range 2 {
		ln.at(late, "2", fmt.Sprint("fill", i), two, c, check{10, w, 1})
	}
	d := ln.at(late, "2", "d", two, c, check{10, w, 1})
	if d.allowed || d.wait != w {
		t.Fatalf("d: %+v, want placed a window on", d)
	}
	ln.rdb.Del(context.Background(), rawKey(ln.prefix, "g"))
	if r := ln.at(late+w, "2", "d", two, c, check{10, w, 1}); !r.allowed {
		t.Errorf("d at its place with one window reset: %+v, want admitted as a new caller (room in both)", r)
	}
	if got := ln.members("k"); len(got) != 1 || got[member(late+w, 0)] != late+w {
		t.Errorf("window k after d: %v, want d's admission alone (its place gone, the fills left)", got)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestLinePlacesHoldInEveryCheck: a caller placed by its tenant's quota
// holds its slot in the global window too, so the global limit cannot be
// used up before it comes back; a place far ahead does not keep anyone from
// a slot that is free now.
func TestLinePlacesHoldInEveryCheck(t *testing.T) {
	t.Parallel()
	const w = 1_000_000
	tenant, global := check{1, 10 * w, 1}, check{3, w, 1}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ln := line{t: t, rdb: rdb, prefix: prefix, tolerance: 0}
		now := redisNow(t, rdb)
		if r := ln.at(now, "2", "a1", []string{"tenant-a", "global"}, tenant, global); !r.allowed {
			t.Fatalf("a1: %+v", r)
		}
		// a2 waits for tenant a's window: 10 s, and holds that slot in the
		// global window.
		a2 := ln.at(now+1, "2", "a2", []string{"tenant-a", "global"}, tenant, global)
		if a2.allowed || a2.line != 1 || a2.wait != 10*w-1 {
			t.Fatalf("a2: %+v, want placed by the tenant 10 s on", a2)
		}
		if got := ln.members("global")["@a2#1"]; got != now+10*w {
			t.Errorf("a2's place in the global window = %d, want %d", got, now+10*w)
		}
		// Far ahead, a2's place takes nothing now: two more fit at once.
		for i := range 2 {
			if r := ln.at(now+2, "2", fmt.Sprint("b", i), []string{fmt.Sprint("tenant-b", i), "global"}, tenant, global); !r.allowed {
				t.Errorf("b%d now: %+v, want admitted beside a place 10 s ahead", i, r)
			}
		}
		// Half a window before a2's place, the global window takes two
		// more, not three: a third would make four with a2 in the window
		// ending at a2's place. Its time is a window on, when c0 leaves.
		near := now + 10*w - 500_000
		if r := ln.at(near, "2", "c0", []string{"tenant-c0", "global"}, tenant, global); !r.allowed {
			t.Errorf("c0 near a2's place: %+v, want admitted (two in the window with a2)", r)
		}
		if r := ln.at(near, "2", "c1", []string{"tenant-c1", "global"}, tenant, global); !r.allowed {
			t.Errorf("c1 near a2's place: %+v, want admitted (three in the window with a2)", r)
		}
		c2 := ln.at(near, "2", "c2", []string{"tenant-c2", "global"}, tenant, global)
		if c2.allowed || c2.line != 2 || c2.wait != w {
			t.Errorf("c2 near a2's place: %+v, want placed by the global window one window on, when c0 leaves", c2)
		}
		// a2 comes back at its place and is admitted: its slot was kept.
		if r := ln.at(now+10*w, "2", "a2", []string{"tenant-a", "global"}, tenant, global); !r.allowed {
			t.Errorf("a2 at its place: %+v, want admitted", r)
		}
		checkWindows(t, ln, map[string]int64{"global": w, "tenant-a": 10 * w}, map[string]int{"global": 3, "tenant-a": 1})
	})
}

// checkWindows fails when any window of the named raw keys holds more than
// its limit: it slides a window of each key's length over its members.
func checkWindows(t *testing.T, ln line, windows map[string]int64, limits map[string]int) {
	t.Helper()
	for key, w := range windows {
		var s []int64
		for _, score := range ln.members(key) {
			s = append(s, score)
		}
		slices.Sort(s)
		limit := limits[key]
		for i := limit; i < len(s); i++ {
			if s[i]-s[i-limit] < w {
				t.Errorf("window %s: %d members in (%d, %d], limit %d", key, limit+1, s[i]-w, s[i], limit)
			}
		}
	}
}

// TestLineSchedule drives many callers through two tenants' quotas and a
// global limit, at random times, some coming back late or early, and checks
// that no window ever holds more than its limit, that every caller back on
// time is admitted at once (one denial each, at most), and that all are
// admitted in the end. It runs with the search's command budget as
// written and cut to 3, where the search gives up and falls back to the
// end of the window's members.
func TestLineSchedule(t *testing.T) {
	t.Parallel()
	for _, budget := range []string{"", "3"} {
		t.Run("budget="+budget, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
				script := clockedScript
				if budget != "" {
					src := strings.Replace(lua.DecideSource(), clockLine, "local t = redis.call('HMGET', KEYS[#KEYS], 's', 'us')", 1)
					if !strings.Contains(src, "local budget = 200") {
						t.Fatal("decide.lua no longer has 'local budget = 200'")
					}
					script = redis.NewScript(strings.Replace(src, "local budget = 200", "local budget = "+budget, 1))
				}
				schedule(t, rdb, prefix, script)
			})
		})
	}
}

// The figures of schedule: its window and line tolerance in µs, and how
// many callers it drives.
const (
	scheduleWindow  = 1_000_000
	scheduleTol     = 5_000
	scheduleCallers = 240
)

// scheduleTenant is a tenant of schedule, with its limit per window.
type scheduleTenant struct {
	name  string
	limit int64
}

// scheduleCaller is one caller of schedule.
type scheduleCaller struct {
	id     string
	tenant int
	next   int64 // when it calls next
	place  int64 // its place, 0 before it has one
	denied int
	done   bool
}

// scheduleRun is one run of schedule: its callers, and the times each
// window admitted them.
type scheduleRun struct {
	t        *testing.T
	rdb      redis.UniversalClient
	prefix   string
	script   *redis.Script
	rng      *rand.Rand
	tenants  []scheduleTenant
	global   int64
	cs       []*scheduleCaller
	admitted map[string][]int64 // raw key name: admission times as recorded
	sent     map[string][]int64 // raw key name: the times of the calls that admitted
}

func schedule(t *testing.T, rdb redis.UniversalClient, prefix string, script *redis.Script) {
	s := newScheduleRun(t, rdb, prefix, script)
	for steps := 0; ; steps++ {
		if steps > 20*scheduleCallers {
			t.Fatalf("not done after %d calls", steps)
		}
		var c *scheduleCaller
		for _, x := range s.cs {
			if !x.done && (c == nil || x.next < c.next) {
				c = x
			}
		}
		if c == nil {
			break
		}
		s.call(c)
	}
	s.checkWindows()
	total := 0
	for _, c := range s.cs {
		total += c.denied
	}
	t.Logf("%d callers, %d denials", scheduleCallers, total)
}

// newScheduleRun returns a run of schedule with its callers, most of them
// due in the first second.
func newScheduleRun(t *testing.T, rdb redis.UniversalClient, prefix string, script *redis.Script) *scheduleRun {
	s := &scheduleRun{
		t: t, rdb: rdb, prefix: prefix, script: script,
		rng:      rand.New(rand.NewPCG(7, 11)),
		tenants:  []scheduleTenant{{"t0", 4}, {"t1", 4}, {"t2", 30}},
		global:   10,
		admitted: map[string][]int64{},
		sent:     map[string][]int64{},
	}
	start := redisNow(t, rdb)
	for i := range scheduleCallers {
		// Most arrive in the first second: a backlog.
		s.cs = append(s.cs, &scheduleCaller{id: fmt.Sprint("c", i), tenant: s.rng.IntN(len(s.tenants)), next: start + s.rng.Int64N(scheduleWindow)})
	}
	return s
}

// run runs the script for c at now, over its tenant's window and the
// global one.
func (s *scheduleRun) run(c *scheduleCaller, now int64) reply {
	const w = scheduleWindow
	ctx := context.Background()
	tn := s.tenants[c.tenant]
	ck := rawKey(s.prefix, clock)
	keys := append(throttle.WithFrontiers([]string{rawKey(s.prefix, tn.name), rawKey(s.prefix, "global")}), ck)
	s.rdb.HSet(ctx, ck, "s", now/1e6, "us", now%1e6)
	res, err := throttle.ScriptReply(s.script.Run(ctx, s.rdb, keys, "2", c.id, scheduleTol, tn.limit, w, 1, "sliding-log", s.global, w, 1, "sliding-log"), w, w)
	if err != nil {
		s.t.Fatalf("%s at %d: %v", c.id, now, err)
	}
	return reply{allowed: res[0] == 1, wait: res[9], line: int(res[10]), early: res[11] == 1}
}

// call has c call at its next time, records an admission, and picks when
// c comes back if it is not admitted.
func (s *scheduleRun) call(c *scheduleCaller) {
	const w, tol = scheduleWindow, scheduleTol
	t, rng := s.t, s.rng
	now := c.next
	r := s.run(c, now)
	switch {
	case r.allowed:
		at := now
		if c.place != 0 && now >= c.place && now <= c.place+tol {
			at = c.place // admitted as of its place
		}
		for _, k := range []string{s.tenants[c.tenant].name, "global"} {
			s.admitted[k] = append(s.admitted[k], at)
			s.sent[k] = append(s.sent[k], now)
		}
		c.done = true
	case r.early:
		if c.place == 0 || now >= c.place || r.wait != c.place-now {
			t.Fatalf("%s early at %d: wait %d, its place %d", c.id, now, r.wait, c.place)
		}
		c.next = c.place
	default:
		if c.place != 0 && now >= c.place && now <= c.place+tol {
			t.Fatalf("%s back at %d, within the tolerance of its place %d, denied again: %+v", c.id, now, c.place, r)
		}
		c.denied++
		c.place = now + r.wait
		// Back at its place, or a little late, or late beyond the
		// tolerance, or early.
		switch k := rng.IntN(10); {
		case k < 6:
			c.next = c.place
		case k < 8:
			c.next = c.place + rng.Int64N(tol+1)
		case k < 9:
			c.next = c.place + tol + 1 + rng.Int64N(w/2)
		default:
			c.next = now + rng.Int64N(c.place-now)
		}
	}
}

// checkWindows checks, once all are admitted, that no window held more
// than its limit and that none keeps a place.
func (s *scheduleRun) checkWindows() {
	const w, tol = scheduleWindow, scheduleTol
	t := s.t
	limits := map[string]int{"global": int(s.global)}
	for _, tn := range s.tenants {
		limits[tn.name] = int(tn.limit)
	}
	for key, limit := range limits {
		// As recorded, no window holds more than the limit; as sent, no
		// window shortened by the tolerance does.
		for _, m := range []struct {
			name  string
			times []int64
			w     int64
		}{{"recorded", s.admitted[key], w}, {"sent", s.sent[key], w - tol}} {
			sorted := slices.Sorted(slices.Values(m.times))
			for i := limit; i < len(sorted); i++ {
				if sorted[i]-sorted[i-limit] < m.w {
					t.Errorf("%s %s: %d admissions in (%d, %d], limit %d", key, m.name, limit+1, sorted[i]-m.w, sorted[i], limit)
				}
			}
		}
	}
	ln := line{t: t, rdb: s.rdb, prefix: s.prefix}
	for key := range limits {
		for m := range ln.members(key) {
			if strings.HasPrefix(m, "@") {
				t.Errorf("window %s keeps a place after everyone was admitted: %s", key, m)
			}
		}
	}
}

// TestLineOptions: the tolerance cannot be negative, and the caller id
// cannot be empty.
func TestLineOptions(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.Check{{Key: "k", Policy: throttle.PerSecond(1), Cost: 1}}
		bad := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix), throttle.WithLineTolerance(-time.Millisecond))
		if _, err := bad.AllowInLine(ctx, "a", checks); err == nil || !strings.Contains(err.Error(), "line tolerance -1ms is negative") {
			t.Errorf("negative tolerance: %v", err)
		}
		if _, err := l.AllowInLine(ctx, "", checks); err == nil {
			t.Errorf("empty caller id accepted")
		}
	})
}
