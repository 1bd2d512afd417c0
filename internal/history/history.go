// Package history checks the workers' record of admissions
// (docs/SCALING.md, "The history checker"): at debug level a worker logs
// every admission the fair lines give, with the Redis time its entries
// stand at and the sliding logs they count in, and every late send it
// restamps. History rebuilds each log from those lines, a rule's key in
// every shard summed, and checks every window.
package history

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/sluicehq/sluice/worker"
)

// admission is one admission: its task, the Redis time its entries stand
// at, µs, and its logs.
type admission struct {
	task string
	at   int64
	logs []worker.RecordedLog
}

// History is the admissions read so far. Its zero value is empty.
type History struct {
	admissions []admission
	latest     map[string]int // task -> its latest admission's index
}

// line is what History reads of a worker's JSON log line.
type line struct {
	Msg  string               `json:"msg"`
	Task string               `json:"task"`
	At   *int64               `json:"at_us"`
	Logs []worker.RecordedLog `json:"logs"`
}

// Read reads a worker's JSON log lines from r and keeps the record's: an
// admission adds entries, a restamp moves the task's latest admission.
// Other lines are skipped; a record line that does not parse is an error.
func (h *History) Read(r io.Reader) error {
	scan := bufio.NewScanner(r)
	scan.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; scan.Scan(); n++ {
		text := scan.Bytes()
		if !bytes.Contains(text, []byte(worker.RecordAdmitted)) && !bytes.Contains(text, []byte(worker.RecordRestamped)) {
			continue
		}
		var l line
		if err := json.Unmarshal(text, &l); err != nil {
			continue // not a JSON line: another writer's
		}
		if err := h.add(l); err != nil {
			return fmt.Errorf("history: line %d: %w", n, err)
		}
	}
	return scan.Err()
}

// add keeps one record line.
func (h *History) add(l line) error {
	if h.latest == nil {
		h.latest = map[string]int{}
	}
	switch l.Msg {
	case worker.RecordAdmitted:
		if l.At == nil || l.Task == "" {
			return fmt.Errorf("an admission without its task or time: %+v", l)
		}
		for i := range l.Logs {
			l.Logs[i].Cost = max(l.Logs[i].Cost, 1)
		}
		h.latest[l.Task] = len(h.admissions)
		h.admissions = append(h.admissions, admission{task: l.Task, at: *l.At, logs: l.Logs})
	case worker.RecordRestamped:
		if l.At == nil {
			return nil // in no sliding log
		}
		i, ok := h.latest[l.Task]
		if !ok {
			return fmt.Errorf("task %s restamped, never admitted", l.Task)
		}
		h.admissions[i].at = *l.At
	}
	return nil
}

// Admissions is how many admissions were read.
func (h *History) Admissions() int { return len(h.admissions) }

// Over is a window that held more than its limit.
type Over struct {
	Key      string
	From, To int64 // the window (From, To], µs of the Redis clock
	Held     int
	Limit    int
	Tasks    []string
}

// Check checks every window of every log: for each entry at t, the
// entries in (t − window, t] are at most the limit. It returns the
// windows over, at most most of them, and the fullest window of each
// key as held/limit.
func (h *History) Check(most int) (overs []Over, fullest map[string]string) {
	byKey := map[string][]entry{}
	for _, a := range h.admissions {
		for _, l := range a.logs {
			byKey[l.Key] = append(byKey[l.Key], entry{at: a.at, task: a.task, log: l})
		}
	}
	fullest = map[string]string{}
	for key, es := range byKey {
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.at, b.at) })
		peak, limit := 0, 0
		held := 0
		for i, j := 0, 0; j < len(es); j++ {
			held += es[j].log.Cost
			for es[i].at <= es[j].at-es[j].log.Window {
				held -= es[i].log.Cost
				i++
			}
			if held > peak {
				peak, limit = held, es[j].log.Limit
			}
			if held > es[j].log.Limit && len(overs) < most {
				o := Over{Key: key, From: es[j].at - es[j].log.Window, To: es[j].at, Held: held, Limit: es[j].log.Limit}
				for _, e := range es[i : j+1] {
					o.Tasks = append(o.Tasks, e.task)
				}
				overs = append(overs, o)
			}
		}
		fullest[key] = fmt.Sprintf("%d/%d", peak, limit)
	}
	return overs, fullest
}

// entry is one admission in one log.
type entry struct {
	at   int64
	task string
	log  worker.RecordedLog
}
