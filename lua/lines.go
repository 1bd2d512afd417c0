package lua

import (
	"embed"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// includeMark starts a line of a script that package lua replaces with the
// named file's text: how the scripts share their helpers.
const includeMark = "-- #include "

// keyCheckEnv, set to 1, makes package lua put keycheck.lua in front of
// every script at load: tests run so.
const keyCheckEnv = "SLUICE_LUA_KEYCHECK"

// WithKeyCheck returns src with keycheck.lua in front: a command of the
// script whose key is not in KEYS then fails.
func WithKeyCheck(src string) string { return compose("keycheck.lua") + "\n" + src }

// load returns the text Redis runs for script file name: composed, and with
// the key check in front when keyCheckEnv is 1.
func load(name string) string {
	src := compose(name)
	if os.Getenv(keyCheckEnv) == "1" {
		src = WithKeyCheck(src)
	}
	return src
}

// compose returns the text of script file name, each include line replaced
// by the included file's text, composed likewise.
func compose(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("lua: " + err.Error())
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, line := range lines {
		if inc, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), includeMark); ok {
			lines[i] = compose(inc) + "\n"
		}
	}
	return strings.Join(lines, "")
}

// LineScripts are the scripts of the fair lines, one per operation: see
// each file's header for its ARGV and reply, lines_head.lua for what they
// share, and docs/FAIRNESS.md for the design.
type LineScripts struct {
	Arrive   *redis.Script // arrive.lua: a task at a worker asks to be sent
	Dispatch *redis.Script // dispatch.lua: give the slots due to parked tasks
	Drop     *redis.Script // drop.lua: a task that no longer exists leaves
	Granted  *redis.Script // granted.lua: whether a task holds a grant
	Refresh  *redis.Script // refresh.lua: new rules for waiting flows
	Wake     *redis.Script // wake.lua: a class is due now
	Waiting  *redis.Script // waiting.lua: the waiting flows, read only
	Demand   *redis.Script // demand.lua: one class's waiting weight by level, read only
	Upcoming *redis.Script // upcoming.lua: the tasks a class serves next, read only
}

// Lines are the fair lines' scripts as Redis runs them.
var Lines = NewLineScripts(nil)

// NewLineScripts returns the lines' scripts, each text first passed through
// edit (with the script's file name) when edit is not nil: tests fix the
// clock with it.
func NewLineScripts(edit func(name, text string) string) LineScripts {
	script := func(name string) *redis.Script {
		text := load(name)
		if edit != nil {
			text = edit(name, text)
		}
		return redis.NewScript(text)
	}
	return LineScripts{
		Arrive: script("arrive.lua"), Dispatch: script("dispatch.lua"), Drop: script("drop.lua"),
		Granted: script("granted.lua"), Refresh: script("refresh.lua"), Wake: script("wake.lua"),
		Waiting: script("waiting.lua"), Demand: script("demand.lua"), Upcoming: script("upcoming.lua"),
	}
}

// LinesSettings are what every script of the lines is given first
// (lines_head.lua): its KEYS and ARGV[1..6].
type LinesSettings struct {
	Base       string        // the start of every key: the limiter's prefix and hash tag
	Lead       time.Duration // how far ahead a parked task is first given a place
	Tolerance  time.Duration // how late after its place a granted task may come
	MostGrants int           // the most grants per class in one call
	Reserve    int           // percent of grants owed to each less urgent level
	Late       time.Duration // how late after its place a grant may be claimed
}

// Keys returns the KEYS of a call of a lines script: the fixed keys, then
// the operation's own.
func (s LinesSettings) Keys(own ...string) []string {
	return append([]string{s.Base + "qw", s.Base + "qt", s.Base + "qg"}, own...)
}

// ClassKeys returns the keys of class's lines (lines_head.lua), the ones
// an operation on the class declares: its hash, its flows' records, its
// blocked flows, and per level its ready flows, its lines and its idle
// flows; then its share counts.
func (s LinesSettings) ClassKeys(class string) []string {
	c := s.Base + "q"
	keys := []string{c + ":" + class, c + "F:" + class, c + "b:" + class}
	for _, kind := range []string{"r:", "L:", "i:"} {
		for level := 1; level <= 5; level++ {
			keys = append(keys, c+kind+class+":"+strconv.Itoa(level))
		}
	}
	return append(keys, c+"n:"+class+":0", c+"n:"+class+":1")
}

// Args returns ARGV of a call of a lines script: the settings, then the
// operation's own arguments.
func (s LinesSettings) Args(own ...any) []any {
	return append([]any{s.Base, s.Lead.Microseconds(), s.Tolerance.Microseconds(), s.MostGrants, s.Reserve,
		s.Late.Microseconds()}, own...)
}

// Arrival is arrive.lua's own ARGV: a task at a worker.
type Arrival struct {
	Class  string
	Level  int // 1, most urgent, to 5
	Tenant string
	Weight float64
	Queue  string
	ID     string
	Rules  []string // the rules, six values each (lines_head.lua)
}

// Args returns the arrival's ARGV from ARGV[7].
func (a Arrival) Args() []any {
	args := []any{a.Class, a.Level, a.Tenant, strconv.FormatFloat(a.Weight, 'g', -1, 64), a.Queue, a.ID}
	for _, v := range a.Rules {
		args = append(args, v)
	}
	return args
}
