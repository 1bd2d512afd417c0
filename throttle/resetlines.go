package throttle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// ClassLines is what the fair lines hold of one class (a task type): what
// ResetLines empties. Every task in it is parked in asynq (its retry or
// scheduled set) until its grant moves it or its park ends.
type ClassLines struct {
	Class string
	// Keys are the class's own keys that exist: its hash, ready and
	// blocked sets, its flows' lines and hashes, its share counts.
	Keys []string
	// Waiting are the tasks in its lines, Granted those given a slot they
	// have not claimed, Entering those parked at enqueue not yet in a
	// line: each a queue and a task ID.
	Waiting, Granted, Entering []Grant
	// Places is how many places the unclaimed grants hold in rule logs.
	Places int
	// Scanned says that a shared key could not be read (damaged) and the
	// class's keys were found by SCAN.
	Scanned bool
	// Refused is what Redis refused, on keys shared with other classes.
	Refused []string
}

// Parked returns every task of c: waiting, granted and entering.
func (c ClassLines) Parked() []Grant {
	return append(append(append([]Grant(nil), c.Waiting...), c.Granted...), c.Entering...)
}

// errUnreadTask is a task in qt whose entry does not parse.
var errUnreadTask = errors.New("a task's entry in the lines does not parse")

// resetTries is how many times ResetLines looks again when a flow joins
// the class while it resets.
const resetTries = 5

// ErrLinesBusy is ResetLines's error when flows kept joining the class
// while it reset the lines: nothing was reset.
var ErrLinesBusy = errors.New("throttle: flows kept joining the lines while they were reset")

// ClassLines reads what the lines hold of class, without changing it.
func (ls *Lines) ClassLines(ctx context.Context, class string) (ClassLines, error) {
	if ls.l.err != nil {
		return ClassLines{}, ls.l.err
	}
	f, err := ls.findClass(ctx, class)
	if err != nil {
		return ClassLines{}, fmt.Errorf("throttle: read the lines of %s: %w", class, err)
	}
	return f.ClassLines, nil
}

// ResetLines empties the fair lines of class, whatever its keys hold (the
// repair of a damaged one): its keys, its tasks' entries, its grants and
// their places in the rule logs, its entries at the entrance. It returns
// what it removed and wakes the dispatch loops of every process. The
// tasks stay parked in asynq: the caller moves them to their queues, or
// they come back when their park ends and enter the lines anew. The
// tenants' order and start tags, the learned lead and the share counts
// are lost.
func (ls *Lines) ResetLines(ctx context.Context, class string) (ClassLines, error) {
	if ls.l.err != nil {
		return ClassLines{}, ls.l.err
	}
	fail := func(err error) (ClassLines, error) {
		return ClassLines{}, fmt.Errorf("throttle: reset the lines of %s: %w", class, err)
	}
	group := ls.group()
	for range resetTries {
		f, err := ls.findClass(ctx, class)
		if err != nil {
			return fail(err)
		}
		reply, err := lua.ResetLines.Run(ctx, ls.l.rdb, f.scriptKeys(), f.scriptArgs()...).Slice()
		if err != nil {
			return fail(err)
		}
		if done, _ := reply[0].(int64); done == 0 {
			continue // a flow joined: find the keys again
		}
		if places, ok := reply[5].(int64); ok {
			f.Places = int(places)
		}
		for _, r := range reply[6:] {
			s, _ := r.(string)
			f.Refused = append(f.Refused, s)
		}
		if err := ls.publishWake(ctx, group); err != nil {
			return f.ClassLines, fmt.Errorf("throttle: reset the lines of %s: %w", class, err)
		}
		return f.ClassLines, nil
	}
	return fail(ErrLinesBusy)
}

// foundClass is a class's lines as findClass found them, with what
// resetlines.lua needs.
type foundClass struct {
	ClassLines
	base, class string          // the lines' base, the class key-encoded
	flows       map[string]bool // "<level>:<tenant>"
	ids         []string        // task ids in qt
	entries     []string        // entrance entries, as read
	places      map[string][]string
}

// findClass finds the keys, tasks and places of class's lines.
func (ls *Lines) findClass(ctx context.Context, class string) (*foundClass, error) {
	group := ls.group()
	f := &foundClass{ClassLines: ClassLines{Class: class}, base: ls.base(group), class: encodeKeyPart(class),
		flows: map[string]bool{}, places: map[string][]string{}}
	rdb := ls.l.rdb
	damaged := false
	refused := func(err error) bool {
		var rerr redis.Error
		if errors.Is(err, errUnreadTask) || errors.As(err, &rerr) && err != redis.Nil {
			f.Refused = append(f.Refused, err.Error())
			damaged = true
			return true
		}
		return false
	}
	// The flows that wait: ready, blocked.
	for l := MostUrgent; l <= LeastUrgent; l++ {
		tenants, err := rdb.ZRange(ctx, f.key("qr:", strconv.Itoa(l)), 0, -1).Result()
		if err != nil && !refused(err) {
			return nil, err
		}
		for _, tn := range tenants {
			f.flows[strconv.Itoa(l)+":"+tn] = true
		}
	}
	blocked, err := rdb.ZRange(ctx, f.key("qb:"), 0, -1).Result()
	if err != nil && !refused(err) {
		return nil, err
	}
	for _, m := range blocked {
		f.flows[m] = true
	}
	granted, flowOf, err := f.readTasks(ctx, rdb, refused)
	if err != nil {
		return nil, err
	}
	// The entrance.
	raw, err := rdb.LRange(ctx, f.base+"qe", 0, -1).Result()
	if err != nil && !refused(err) {
		return nil, err
	}
	for _, r := range raw {
		var e Entry
		if json.Unmarshal([]byte(r), &e) == nil && e.Class == class {
			f.entries = append(f.entries, r)
			f.Entering = append(f.Entering, Grant{Queue: e.Queue, ID: e.ID})
		}
	}
	if damaged {
		if err := ls.scanClass(ctx, f); err != nil {
			return nil, err
		}
	}
	if err := f.existing(ctx, rdb); err != nil {
		return nil, err
	}
	f.placesOf(ctx, rdb, granted, flowOf)
	for _, members := range f.places {
		f.Places += len(members)
	}
	return f, nil
}

// readTasks adds the class's tasks in qt to f, and returns the granted
// ones with their flows; refused says whether an error is a damaged key's.
func (f *foundClass) readTasks(ctx context.Context, rdb redis.UniversalClient, refused func(error) bool) (granted []string, flowOf map[string]string, err error) {
	type task struct {
		State string          `json:"s"` // 'W' waiting, 'G' granted
		Start json.RawMessage `json:"S"` // read, so that "S" is not taken for "s"
		C     string          `json:"c"`
		L     int             `json:"l"`
		T     string          `json:"t"`
		Q     string          `json:"q"`
	}
	flowOf = map[string]string{}
	it := rdb.HScan(ctx, f.base+"qt", 0, "", 1000).Iterator()
	for it.Next(ctx) {
		id := it.Val()
		if !it.Next(ctx) {
			break
		}
		var t task
		if json.Unmarshal([]byte(it.Val()), &t) != nil {
			refused(errUnreadTask) // whose it is cannot be told
			continue
		}
		if t.C != f.class {
			continue
		}
		fl := strconv.Itoa(t.L) + ":" + t.T
		f.flows[fl] = true
		f.ids = append(f.ids, id)
		if t.State == "G" {
			f.Granted = append(f.Granted, Grant{Queue: t.Q, ID: id})
			granted = append(granted, id)
			flowOf[id] = fl
		} else {
			f.Waiting = append(f.Waiting, Grant{Queue: t.Q, ID: id})
		}
	}
	if err := it.Err(); err != nil && !refused(err) {
		return nil, nil, err
	}
	return granted, flowOf, nil
}

// existing sets f.Keys to the class's own keys that exist: the fixed
// ones (lua/lines_head.lua), and its flows' own keys of 0.1.0's layout
// (ql:, qf:), which the scripts no longer read.
func (f *foundClass) existing(ctx context.Context, rdb redis.UniversalClient) error {
	candidates := []string{f.key("q:"), f.key("qF:"), f.key("qn:", "0"), f.key("qn:", "1")}
	for l := MostUrgent; l <= LeastUrgent; l++ {
		level := strconv.Itoa(l)
		candidates = append(candidates, f.key("qr:", level), f.key("qL:", level), f.key("qi:", level))
	}
	candidates = append(candidates, f.key("qb:"))
	for _, fl := range slices.Sorted(maps.Keys(f.flows)) {
		l, tn, _ := strings.Cut(fl, ":")
		candidates = append(candidates, f.key("ql:", l, tn), f.key("qf:", l, tn))
	}
	seen := map[string]bool{}
	for _, k := range candidates {
		if seen[k] {
			continue
		}
		seen[k] = true
		n, err := rdb.Exists(ctx, k).Result()
		if err != nil {
			return err
		}
		if n == 1 {
			f.Keys = append(f.Keys, k)
		}
	}
	return nil
}

// placesOf notes the places of the granted tasks in the logs their flows'
// rules name; a flow whose rules cannot be read is skipped.
func (f *foundClass) placesOf(ctx context.Context, rdb redis.UniversalClient, granted []string, flowOf map[string]string) {
	for _, id := range granted {
		l, tn, _ := strings.Cut(flowOf[id], ":")
		r, err := rdb.HGet(ctx, f.key("qF:"), "r"+l+":"+tn).Result()
		if err != nil {
			continue // no rules, or a damaged record: its places leave with the window
		}
		var flat []string // six values a rule: lua/lines_head.lua
		if json.Unmarshal([]byte(r), &flat) != nil {
			continue
		}
		for i := 0; i+5 < len(flat); i += 6 {
			cost, err := strconv.Atoi(flat[i+3])
			if flat[i+4] != SlidingLog.String() || err != nil {
				continue
			}
			for j := 1; j <= cost; j++ {
				f.places[flat[i]] = append(f.places[flat[i]], "@"+id+"#"+strconv.Itoa(j))
			}
		}
	}
}

// scanClass adds to f the flows whose keys of 0.1.0's layout SCAN
// finds, so that they go too. On a Redis Cluster it scans the master of
// the lines' slot.
func (ls *Lines) scanClass(ctx context.Context, f *foundClass) error {
	f.Scanned = true
	node, err := ls.l.masterOf(ctx, f.base)
	if err != nil {
		return err
	}
	for _, kind := range []string{"ql:", "qf:"} {
		head := f.key(kind) + ":"
		it := node.Scan(ctx, 0, globEscaper.Replace(head)+"*", 1000).Iterator()
		for it.Next(ctx) {
			l, tn, ok := strings.Cut(strings.TrimPrefix(it.Val(), head), ":")
			if ok {
				f.flows[l+":"+tn] = true
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	return nil
}

// key returns the key of kind of the class, with parts after it: kind
// "qr:" and "1" give <base>qr:<c>:1.
func (f *foundClass) key(kind string, parts ...string) string {
	return f.base + kind + f.class + strings.Join(append([]string{""}, parts...), ":")
}

// scriptKeys returns resetlines.lua's KEYS.
func (f *foundClass) scriptKeys() []string {
	keys := []string{f.base + "qw", f.base + "qt", f.base + "qg", f.base + "qe"}
	for l := MostUrgent; l <= LeastUrgent; l++ {
		keys = append(keys, f.key("qr:", strconv.Itoa(l)))
	}
	keys = append(keys, f.key("qb:"))
	for _, k := range f.Keys {
		if !strings.HasPrefix(k, f.base+"qr:") && !strings.HasPrefix(k, f.base+"qb:") {
			keys = append(keys, k)
		}
	}
	for _, log := range f.logs() {
		keys = append(keys, log, frontierOf(log))
	}
	return keys
}

// scriptArgs returns resetlines.lua's ARGV.
func (f *foundClass) scriptArgs() []any {
	own := 0
	for _, k := range f.Keys {
		if !strings.HasPrefix(k, f.base+"qr:") && !strings.HasPrefix(k, f.base+"qb:") {
			own++
		}
	}
	places := [][]string{}
	for _, log := range f.logs() {
		places = append(places, f.places[log])
	}
	flows, _ := json.Marshal(f.flows)
	ids, _ := json.Marshal(append([]string{}, f.ids...))
	entries, _ := json.Marshal(append([]string{}, f.entries...))
	enc, _ := json.Marshal(places)
	return []any{f.class, own, string(flows), string(ids), string(entries), string(enc)}
}

// logs returns the logs that hold places of the class's grants, sorted.
func (f *foundClass) logs() []string {
	logs := make([]string, 0, len(f.places))
	for k := range f.places {
		logs = append(logs, k)
	}
	slices.Sort(logs)
	return logs
}
