package throttle

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/lua"
)

// dispatchAgain is dispatch.lua's outcome when it needed keys it was not
// given: its reply names them (Turn.wanted), and the next call declares
// them (docs/SCRIPTS.md, "Where each script's keys come from").
const dispatchAgain Outcome = 4

// mostDispatchCalls is the most calls of dispatch.lua one Dispatch makes:
// a class new to the look costs two agains (its keys, then its flows').
const mostDispatchCalls = 4

// dispatchLook is what a process's Dispatch declares to dispatch.lua: the
// classes it has seen and, per class, the logs of the flows the script
// last asked for. A reply that asks again replaces a class's logs, so the
// look stays the size of one ask.
type dispatchLook struct {
	mu   sync.Mutex
	logs map[string][]string // class -> its flows' logs, each with the keys beside it
}

// keys returns dispatch.lua's own KEYS: the entrance, each known class's
// keys and logs, and extra (the keys of the tasks taken in), without
// repeats.
func (d *dispatchLook) keys(s lua.LinesSettings, extra []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	keys := []string{}
	add := func(ks ...string) {
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	add(s.Base + "qe")
	for _, class := range slices.Sorted(maps.Keys(d.logs)) {
		add(s.ClassKeys(class)...)
		add(d.logs[class]...)
	}
	add(extra...)
	return keys
}

// learn takes in a reply's wanted keys: "<class>" for a class to declare,
// "<class>\x00<log>" for a log of its flows.
func (d *dispatchLook) learn(wanted []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.logs == nil {
		d.logs = map[string][]string{}
	}
	fresh := map[string][]string{}
	for _, w := range wanted {
		class, log, isLog := strings.Cut(w, "\x00")
		if _, ok := d.logs[class]; !ok {
			d.logs[class] = nil
		}
		if isLog {
			fresh[class] = append(fresh[class], beside(log)...)
		}
	}
	for class, logs := range fresh {
		d.logs[class] = logs
	}
}
