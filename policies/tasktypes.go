package policies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/producer"
)

// Option changes how Parse, Load and Open read a policies file. The last
// option of a kind wins.
type Option interface{ apply(*options) }

// options is what the options set.
type options struct {
	taskTypes []string // the task types the reader handles
}

// readOptions returns the options opts set, over the defaults: the task
// types of producer.TaskTypes, those Sluice's workers handle.
func readOptions(opts []Option) options {
	o := options{taskTypes: producer.TaskTypes()}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return o
}

// taskTypesOption is the Option of WithTaskTypes.
type taskTypesOption []string

func (t taskTypesOption) apply(o *options) { o.taskTypes = slices.Clone(t) }

// WithTaskTypes sets the task types that the program reading the file
// handles, in place of producer.TaskTypes() (Sluice's own, sms:send and
// email:send), for a program that runs the middleware (worker.Throttle) on
// task types of its own. A policies file may name only these and the types
// it lists under extra_task_types: a rule for any other type would never
// apply, so a misspelled type (sms:sned) would leave its tasks unthrottled
// in silence. The file is refused instead.
func WithTaskTypes(types ...string) Option { return taskTypesOption(types) }

// unknownTaskType returns the error for a task type of the file that no one
// handles: known are the types handled, extra the file's extra_task_types.
func unknownTaskType(taskType string, known, extra []string) error {
	all := slices.Concat(known, extra)
	slices.Sort(all)
	all = slices.Compact(all)
	hint := ""
	if s := closest(taskType, all); s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fmt.Errorf("task type %q%s: no worker handles it, so its rules would never apply; "+
		"the known types are %s: list a type of your own under extra_task_types", taskType, hint, strings.Join(all, ", "))
}

// closest returns the word of words nearest to w, when it is near enough
// to be a slip of the keyboard (two edits, or a difference of case); ""
// otherwise.
func closest(w string, words []string) string {
	best, bestDist := "", 3
	for _, c := range words {
		if strings.EqualFold(c, w) {
			return c
		}
		if d := editDistance(w, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes; the
// names it compares are short and ASCII.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
