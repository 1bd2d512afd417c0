package throttle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/entrance"
	"github.com/sluicehq/sluice/lua"
)

// Lines are fair lines of waiting tasks in front of a Limiter's windows
// (docs/FAIRNESS.md). A task that cannot be admitted at once waits in the
// line of its flow (its class, priority and tenant); slots of the rules are
// given to the flows by start-time fair queueing, weighted, the most urgent
// priority first, and at most Lead ahead of now, as grants: places in every
// sliding-log window of the task's rules. The lines live in Redis beside
// the windows they serve, so any number of processes share them. Lines are
// safe for concurrent use.
type Lines struct {
	l       *Limiter
	cfg     LinesConfig
	scripts lua.LineScripts
	look    dispatchLook
}

// Defaults of LinesConfig, each used for a zero field.
const (
	// DefaultLinesLead is LinesConfig.Lead's default: the fetch interval
	// of an idle worker (100 ms) plus 50 ms.
	DefaultLinesLead = 150 * time.Millisecond

	// DefaultLinesLate is LinesConfig.Late's default.
	DefaultLinesLate = 500 * time.Millisecond

	// DefaultReserve is LinesConfig.Reserve's default, in percent.
	DefaultReserve = 10

	// MaxReserve is the largest LinesConfig.Reserve: a larger one is taken
	// as this. With n levels waiting, each less urgent one gets at most
	// 100 / n percent, so the most urgent always keeps as much.
	MaxReserve = 50

	// DefaultMaxGrants is LinesConfig.MaxGrants's default.
	DefaultMaxGrants = 32

	// DefaultPark is how long a task waiting in a line stays in asynq's
	// retry or scheduled set before asynq brings it back by itself: long
	// enough that it comes back through a grant; one that does come back
	// by itself keeps its turn and parks again.
	DefaultPark = entrance.DefaultPark

	// DefaultPriority is a task's priority unless it has one: the middle of
	// MostUrgent to LeastUrgent.
	DefaultPriority = 3
)

// The priorities of a task, from the most urgent to the least.
const (
	MostUrgent  = 1
	LeastUrgent = 5
)

// LinesConfig configures Lines. A zero field takes its default.
type LinesConfig struct {
	// Lead is how far ahead of now a task that waits parked (not at a
	// worker) is given its place at first: the time it takes to reach a
	// worker. Each class then learns its own from the deliveries, between
	// 1 ms and 2 s (docs/FAIRNESS.md, "The horizon").
	Lead time.Duration

	// Late is how long after its place a granted task may still claim it:
	// it is then sent at once, and its place moves to that time when every
	// window allows it. A grant not claimed by then is taken back, its
	// slot lost: a dead worker's grant holds a slot at most this long.
	Late time.Duration

	// Reserve is the share of grants, in percent (1 to MaxReserve), that each
	// waiting priority less urgent than the most urgent one waiting is owed,
	// so that no priority starves; cut to 100 / n with n levels waiting.
	Reserve int

	// MaxGrants is the most grants one call gives a class.
	MaxGrants int

	// Rules, when set, makes Dispatch take in the tasks parked at enqueue
	// (Enter) first, each with the weight and checks it gives: a worker
	// sets it from its policies. Producers leave it nil.
	Rules EntryRules
}

// Lines returns the fair lines in front of l's windows.
func (l *Limiter) Lines(cfg LinesConfig) *Lines {
	if cfg.Lead <= 0 {
		cfg.Lead = DefaultLinesLead
	}
	if cfg.Late <= 0 {
		cfg.Late = DefaultLinesLate
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = DefaultReserve
	}
	cfg.Reserve = min(cfg.Reserve, MaxReserve)
	if cfg.MaxGrants <= 0 {
		cfg.MaxGrants = DefaultMaxGrants
	}
	return &Lines{l: l, cfg: cfg, scripts: lua.Lines}
}

// LineCheck is a Check of a task in line, and whether its key is shared
// by several tenants (a rule of scope global): the fair share is of the
// shared keys. A Leased check is shared too.
type LineCheck struct {
	Check
	Shared bool
}

// Arrival is a task at a worker, asking to be sent.
type Arrival struct {
	Class    string      // what competes for the same shared keys: the task type
	Priority int         // MostUrgent to LeastUrgent; 0 is DefaultPriority
	Tenant   string      // the flow within the class and priority
	Weight   float64     // the tenant's share of shared keys; 0 is 1
	Queue    string      // the asynq queue the task lives in
	ID       string      // the task ID, unique within its queue
	Checks   []LineCheck // the task's rules, in one group
}

// Outcome is what Arrive decided.
type Outcome int

// The outcomes of Arrive.
const (
	// Admitted: recorded now, send at once.
	Admitted Outcome = iota + 1
	// Placed: recorded at a place Wait from now; wait, then send.
	Placed
	// Parked: the task waits in its line; send it back to the queue's
	// retry set until a grant moves it to the front of its queue.
	Parked
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Placed:
		return "placed"
	case Parked:
		return "parked"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Grant is a parked task given a place: move it to the front of its queue.
type Grant struct {
	Queue, ID string
}

// Turn is the reply of Arrive and Dispatch.
type Turn struct {
	Outcome Outcome       // Arrive only
	Wait    time.Duration // Placed: the time until the place
	// Wake is, for Dispatch, the time until its next call may give a
	// grant; negative when nothing waits, and for Arrive.
	Wake time.Duration
	// At is, for Admitted and Placed, the time the task's entries stand
	// at in each sliding log of its rules, by the Redis clock: the record
	// of its admission (docs/SCALING.md, "The history checker").
	At time.Time
	// Granted are parked tasks given a place by this call, to be moved to
	// the front of their queues.
	Granted []Grant
	// Refused says what Redis refused in the flows and classes this call
	// set aside for a while (a damaged key), serving the others.
	Refused []string
	// Calls is, for Dispatch, how many script calls it made: more than one
	// when a call needed keys it was not given (docs/SCRIPTS.md).
	Calls int
	// wanted are the keys dispatch.lua asked for (dispatchLook.learn).
	wanted []string
	// By is, for Parked, the index in Arrival.Checks of the check the task
	// waits for: the one with room last, or the first shared one when the
	// task waits for its turn; -1 otherwise.
	By int
}

// Arrive asks for a task at a worker: it claims the task's grant, or admits
// it at once when nothing waits and every key has room, or puts it in its
// line and gives the slots due (to it or to others); see Turn.
func (ls *Lines) Arrive(ctx context.Context, a Arrival) (Turn, error) {
	fail := func(err error) (Turn, error) {
		return Turn{}, fmt.Errorf("throttle: arrive %s in line: %w", a.ID, err)
	}
	if ls.l.err != nil {
		return Turn{}, ls.l.err
	}
	if a.Priority == 0 {
		a.Priority = DefaultPriority
	}
	if a.Weight == 0 {
		a.Weight = 1
	}
	switch {
	case a.ID == "" || a.Queue == "" || a.Tenant == "" || a.Class == "":
		return fail(fmt.Errorf("%w: class, tenant, queue and task id are all needed", ErrInvalidKey))
	case a.Priority < MostUrgent || a.Priority > LeastUrgent:
		return fail(fmt.Errorf("%w: priority %d is not %d to %d", ErrInvalidPolicy, a.Priority, MostUrgent, LeastUrgent))
	case !(a.Weight > 0) || math.IsInf(a.Weight, 0):
		return fail(fmt.Errorf("%w: weight %v is not a positive number", ErrInvalidPolicy, a.Weight))
	}
	if len(a.Checks) == 0 {
		return fail(fmt.Errorf("%w: no checks", ErrInvalidKey))
	}
	rules, group, err := ls.rules(a.Checks)
	if err != nil {
		return fail(err)
	}
	if group != ls.group() {
		// Dispatch, Waiting and Refresh serve the lines' own group.
		return fail(fmt.Errorf("%w: the fair lines need every key in their group, %s, not %s", ErrInvalidConfig, ls.group(), group))
	}
	own := lua.Arrival{Class: encodeKeyPart(a.Class), Level: a.Priority, Tenant: a.Tenant, Weight: a.Weight,
		Queue: a.Queue, ID: a.ID, Rules: rules}
	keys := ls.settings(group).ClassKeys(own.Class)
	for i := 0; i < len(rules); i += 6 {
		keys = append(keys, beside(rules[i])...)
	}
	t, err := ls.runKeys(ctx, ls.scripts.Arrive, group, keys, own.Args()...)
	if err != nil {
		return fail(err)
	}
	return t, nil
}

// Dispatch gives the slots due to parked tasks of every class of the
// lines' group, fairly, and says when to call again. With
// LinesConfig.Rules, it first takes in the tasks parked at enqueue. With
// an error, the Turn holds the grants its first calls gave, if any: move
// them still.
func (ls *Lines) Dispatch(ctx context.Context) (Turn, error) {
	if ls.l.err != nil {
		return Turn{}, ls.l.err
	}
	group := ls.group()
	in, extra, n, ierr := ls.entering(ctx, group)
	damaged := redis.Error(nil)
	if ierr != nil && !errors.As(ierr, &damaged) {
		// Redis unreachable, or ctx done: the step would fare no better.
		return Turn{}, fmt.Errorf("throttle: dispatch the lines: read the entrance: %w", ierr)
	}
	// Each call declares the keys the last one asked for; one that needs
	// others says so and gives what it could, and the next declares them.
	t := Turn{}
	for call := 1; ; call++ {
		r, err := ls.runKeys(ctx, ls.scripts.Dispatch, group, ls.look.keys(ls.settings(group), extra), in...)
		if err != nil {
			// What the first calls gave stands: the Turn holds it.
			return t, fmt.Errorf("throttle: dispatch the lines (call %d): %w", call, err)
		}
		t.Granted, t.Refused, t.Wake = append(t.Granted, r.Granted...), append(t.Refused, r.Refused...), r.Wake
		t.Calls = call
		if r.Outcome != dispatchAgain {
			break
		}
		ls.look.learn(r.wanted)
		in, extra = nil, nil // taken in by the first call
		if call == mostDispatchCalls {
			t.Wake = 0 // the loop calls again at once
			break
		}
	}
	if damaged != nil {
		// A damaged entrance stops no one: the lines go on without it.
		t.Refused = append(t.Refused, fmt.Sprintf("the entrance %sqe: %v", ls.base(group), ierr))
	}
	if n == entranceBatch {
		t.Wake = 0 // more may wait at the entrance
	}
	return t, nil
}

// Drop takes task id, which no longer exists (deleted from its queue), out
// of its line; if it had a grant its task never claimed, the places go
// with it, and the dispatch loops of every process are woken (Wakeups) to
// give the slot again. A task that is in no line is not an error. It
// reads the task's entry first, to name its keys to the script, and reads
// again (up to three times) when the entry changes meanwhile.
func (ls *Lines) Drop(ctx context.Context, id string) error {
	_, err := ls.drop(ctx, id, false)
	return err
}

// Absent takes back the grant of task id, which its task did not claim
// at once although it runs at some worker (it stood there, and that
// worker died or stalled): its slots go to others now, not when the
// grant lapses, and the task goes to the tail of its flow, its turn
// spent. Absent again a second or more later, it leaves the lines, and
// Absent reports it: the caller should bring it back to its queue if it
// stops running (its worker was alive after all), else asynq brings it
// back when it recovers it. A task not granted is left as it is. Safe for
// concurrent use.
func (ls *Lines) Absent(ctx context.Context, id string) (left bool, err error) {
	return ls.drop(ctx, id, true)
}

// drop is Drop, or Absent.
func (ls *Lines) drop(ctx context.Context, id string, absent bool) (left bool, err error) {
	if ls.l.err != nil {
		return false, ls.l.err
	}
	group := ls.group()
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("throttle: drop %s from the lines: %w", id, err)
	}
	for again := 0; ; again++ {
		keys, args, err := ls.dropLook(ctx, group, id)
		if err != nil {
			return fail(err)
		}
		if keys == nil {
			break // in no line
		}
		args = append(args, b2i(absent))
		t, err := ls.runKeys(ctx, ls.scripts.Drop, group, keys, args...)
		if err != nil {
			return fail(err)
		}
		if t.Outcome == 0 || t.Outcome == 2 {
			left = t.Outcome == 2
			break
		}
		if again == 2 {
			return fail(errors.New("its entry changed three times while it was dropped"))
		}
	}
	if err := ls.publishWake(ctx, group); err != nil {
		return fail(err)
	}
	return left, nil
}

// dropLook reads task id's record and, for a grant, its flow's stored
// rules, and returns drop.lua's own KEYS and ARGV; no keys when the task
// is in no line.
func (ls *Lines) dropLook(ctx context.Context, group, id string) ([]string, []any, error) {
	base := ls.base(group)
	raw, err := ls.l.rdb.HGet(ctx, base+"qt", id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var task struct {
		State string          `json:"s"`
		Start json.RawMessage `json:"S"` // read, so that "S" is not taken for "s"
		C     string          `json:"c"`
		L     int             `json:"l"`
		T     string          `json:"t"`
	}
	if err := json.Unmarshal([]byte(raw), &task); err != nil {
		return nil, nil, fmt.Errorf("its entry %.80q: %w", raw, err)
	}
	level := strconv.Itoa(task.L)
	keys := []string{base + "qL:" + task.C + ":" + level, base + "qF:" + task.C,
		base + "qr:" + task.C + ":" + level, base + "qb:" + task.C, base + "qi:" + task.C + ":" + level,
		base + "q:" + task.C, base + "qa"}
	rules := ""
	if task.State == "G" {
		rules, err = ls.l.rdb.HGet(ctx, keys[1], "r"+level+":"+task.T).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, err
		}
		var flat []string // six values a rule: lua/lines_head.lua
		if err := json.Unmarshal([]byte(rules), &flat); rules != "" && err != nil {
			return nil, nil, fmt.Errorf("the stored rules of its flow %.80q: %w", rules, err)
		}
		for i := 0; i+5 < len(flat); i += 6 {
			switch flat[i+4] {
			case SlidingLog.String():
				keys = append(keys, flat[i], frontierOf(flat[i]))
			case Concurrency.String():
				keys = append(keys, flat[i]) // its slot, freed
			}
		}
	}
	return keys, []any{id, raw, rules}, nil
}

// Wake makes the lines of class (a task type) look for slots to give at
// the next Dispatch or arrival, whatever they found before, and wakes the
// dispatch loops of every process to do so now (Wakeups): call it after
// making room that the lines did not make, such as a window reset by
// hand (policies.ResetTenant does). Until then a waiting class is looked
// at when its next slot was due, and tasks of its waiting tenants that
// arrive meanwhile are parked without a look. A class with nothing
// waiting is not an error.
func (ls *Lines) Wake(ctx context.Context, class string) error {
	if ls.l.err != nil {
		return ls.l.err
	}
	group := ls.group()
	if _, err := ls.runKeys(ctx, ls.scripts.Wake, group, []string{ls.base(group) + "qb:" + encodeKeyPart(class)}, encodeKeyPart(class)); err != nil {
		return fmt.Errorf("throttle: wake the lines of %s: %w", class, err)
	}
	if err := ls.publishWake(ctx, group); err != nil {
		return fmt.Errorf("throttle: wake the lines of %s: %w", class, err)
	}
	return nil
}

// Granted reports whether task id holds a grant its task has not claimed
// yet: a mover that could not move the task at once tries again only
// while it does.
func (ls *Lines) Granted(ctx context.Context, id string) (bool, error) {
	if ls.l.err != nil {
		return false, ls.l.err
	}
	group := ls.group()
	t, err := ls.run(ctx, ls.scripts.Granted, group, id)
	if err != nil {
		return false, fmt.Errorf("throttle: is %s granted: %w", id, err)
	}
	return t.Outcome == 1, nil
}

// Flow names the line of one class, priority and tenant.
type Flow struct {
	Class    string
	Priority int
	Tenant   string
}

// MaxFlows is the most flows Waiting returns.
const MaxFlows = 10000

// FlowRules are the rules and weight that a waiting flow is given anew.
type FlowRules struct {
	Flow
	Weight float64 // 0 is 1
	Checks []LineCheck
}

// Refresh gives waiting flows new rules and weights, as a policies reload
// changes them (each Flow as Waiting returns it: its class as the lines
// keep it): the next slots given to their tasks follow them. A flow
// that no longer waits is left alone; its next task brings its rules. A
// flow given no Checks keeps the rules it has: its tasks were parked under
// rules, and a flow without any would be given every slot at once (a
// reload that no longer limits a task type frees its tasks as they
// arrive, not the ones parked). It wakes the dispatch loops of every
// process (Wakeups), as the new rules may have room.
func (ls *Lines) Refresh(ctx context.Context, flows []FlowRules) error {
	if ls.l.err != nil {
		return ls.l.err
	}
	type refresh struct {
		C string   `json:"c"`
		L int      `json:"l"`
		T string   `json:"t"`
		F int      `json:"f"` // the index in KEYS of its class's records
		B int      `json:"b"` // of its class's blocked flows
		W float64  `json:"w"`
		R []string `json:"r"`
	}
	group := ls.group()
	base := ls.base(group)
	var keys []string
	records, blocked := map[string]int{}, map[string]int{} // class -> its index in KEYS
	batch := make([]refresh, 0, len(flows))
	for _, f := range flows {
		if len(f.Checks) == 0 {
			continue
		}
		rules, _, err := ls.rules(f.Checks)
		if err != nil {
			return fmt.Errorf("throttle: refresh the rules of %s/%d/%s: %w", f.Class, f.Priority, f.Tenant, err)
		}
		w := f.Weight
		if w == 0 {
			w = 1
		}
		if _, ok := records[f.Class]; !ok {
			keys = append(keys, base+"qF:"+f.Class, base+"qb:"+f.Class)
			records[f.Class], blocked[f.Class] = 2+len(keys), 3+len(keys)
		}
		batch = append(batch, refresh{C: f.Class, L: f.Priority, T: f.Tenant, F: records[f.Class], B: blocked[f.Class], W: w, R: rules})
	}
	enc, err := json.Marshal(batch)
	if err != nil {
		return fmt.Errorf("throttle: refresh the waiting flows: %w", err)
	}
	if _, err := ls.runKeys(ctx, ls.scripts.Refresh, group, keys, string(enc)); err != nil {
		return fmt.Errorf("throttle: refresh the waiting flows: %w", err)
	}
	if len(batch) > 0 {
		if err := ls.publishWake(ctx, group); err != nil {
			return fmt.Errorf("throttle: refresh the waiting flows: %w", err)
		}
	}
	return nil
}

// rules validates checks and returns them as the lines' scripts read
// them, six values a rule (key, limit, window in microseconds, cost,
// algorithm, 2 if leased, 1 if shared, else 0: lua/lines_head.lua), and
// their group.
func (ls *Lines) rules(lc []LineCheck) ([]string, string, error) {
	if len(lc) == 0 {
		return nil, ls.group(), nil
	}
	checks := make([]Check, len(lc))
	for i, c := range lc {
		checks[i] = c.Check
	}
	keys, group, err := ls.l.resolve(checks)
	if err != nil {
		return nil, "", err
	}
	flat := make([]string, 0, 6*len(lc))
	for i, c := range lc {
		if !utf8.ValidString(keys[i]) {
			// JSON, which carries a flow's stored rules, would change it.
			return nil, "", fmt.Errorf("%w: key %s is not valid UTF-8, which the fair lines carry in JSON", ErrInvalidKey, Quote(c.Key))
		}
		shared := b2i(c.Shared)
		if c.Leased {
			shared = 2
		}
		flat = append(flat, keys[i], strconv.Itoa(c.Policy.Limit), strconv.FormatInt(c.Policy.Window.Microseconds(), 10),
			strconv.Itoa(c.Cost), c.Policy.Algorithm.String(), strconv.Itoa(shared))
	}
	return flat, group, nil
}

// settings are the ARGV every lines script of group is given first.
func (ls *Lines) settings(group string) lua.LinesSettings {
	return lua.LinesSettings{Base: ls.base(group), Lead: ls.cfg.Lead, Tolerance: ls.l.lineTolerance,
		MostGrants: ls.cfg.MaxGrants, Reserve: ls.cfg.Reserve, Late: ls.cfg.Late}
}

// group is the encoded group of the lines: DefaultGroup, or the one of
// Limiter.InGroup.
func (ls *Lines) group() string { return encodeKeyPart(ls.l.linesGroup) }

// base is the start of every key of the lines of group: the limiter's
// prefix and hash tag.
func (ls *Lines) base(group string) string { return ls.l.prefix + "{" + group + "}" }

// run runs a lines script with its own args and reads its reply.
func (ls *Lines) run(ctx context.Context, script *redis.Script, group string, own ...any) (Turn, error) {
	return ls.runKeys(ctx, script, group, nil, own...)
}

// runKeys is run with the script's own keys after the fixed ones.
func (ls *Lines) runKeys(ctx context.Context, script *redis.Script, group string, keys []string, own ...any) (Turn, error) {
	s := ls.settings(group)
	res, err := script.Run(ctx, ls.l.rdb, s.Keys(keys...), s.Args(own...)...).Result()
	if err != nil {
		return Turn{}, err
	}
	if at, ok := res.(int64); ok {
		// The short reply of the most common arrival: admitted at `at`.
		return Turn{Outcome: Admitted, Wake: -1, By: -1, At: time.UnixMicro(at)}, nil
	}
	reply, ok := res.([]any)
	if !ok {
		return Turn{}, fmt.Errorf("fair lines script replied %v, not an array", res)
	}
	if len(reply) < 4 || len(reply)%2 == 1 {
		return Turn{}, fmt.Errorf("fair lines script replied %d values", len(reply))
	}
	var n [4]int64
	for i := range n {
		v, ok := reply[i].(int64)
		if !ok {
			return Turn{}, fmt.Errorf("fair lines script replied %v at %d, not an integer", reply[i], i)
		}
		n[i] = v
	}
	t := Turn{Outcome: Outcome(n[0]), Wait: time.Duration(n[1]) * time.Microsecond, Wake: -1, By: int(n[3]) - 1}
	if n[2] >= 0 {
		t.Wake = time.Duration(n[2]) * time.Microsecond
	}
	for i := 4; i+1 < len(reply); i += 2 {
		q, _ := reply[i].(string)
		if q == "\x01" {
			at, _ := reply[i+1].(int64)
			t.At = time.UnixMicro(at)
			continue
		}
		id, _ := reply[i+1].(string)
		if q == "\x00" {
			t.wanted = append(t.wanted, id)
			continue
		}
		if q == "" {
			t.Refused = append(t.Refused, id)
			continue
		}
		t.Granted = append(t.Granted, Grant{Queue: q, ID: id})
	}
	return t, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
