package status

import "time"

// backlog counts the throttled tasks waiting in the retry sets, and the
// soonest back, by what they are grouped under.
type backlog map[backlogKey]*waiting

// backlogKey groups tasks: by task type, tenant ("" for all) and rule (""
// for any).
type backlogKey struct{ taskType, tenant, rule string }

type waiting struct {
	n    int
	next time.Time
}

func (b backlog) add(k backlogKey, at time.Time) {
	w := b[k]
	if w == nil {
		w = &waiting{next: at}
		b[k] = w
	}
	w.n++
	if at.Before(w.next) {
		w.next = at
	}
}

// get returns the count under k and when the soonest returns.
func (b backlog) get(k backlogKey, now time.Time) (int, string) {
	w := b[k]
	if w == nil {
		return 0, ""
	}
	return w.n, backIn(w.next, now)
}
