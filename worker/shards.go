package worker

import (
	"maps"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/policies"
)

// shards are a Throttle's fair lines, one per limiter group of its layout
// (docs/SCALING.md): one on a single shard; one per task type and shard on
// more. Each runs its own dispatch loop while RunLines runs.
type shards struct {
	layout layout.Layout
	open   func(group string) *fairLines // makes a group's lines

	mu    sync.Mutex
	lines map[string]*fairLines
	start func(*fairLines) // RunLines's: runs a group's loop; nil outside it
}

// newShards returns the lines of every group of the task types p has
// rules for: a worker that starts serves the tasks already parked there.
func newShards(l layout.Layout, p *policies.Policies, open func(string) *fairLines) *shards {
	s := &shards{layout: l, open: open, lines: map[string]*fairLines{}}
	s.ensure(p)
	return s
}

// ensure makes the lines of every group of the task types p has rules
// for, and starts their loops while RunLines runs: after a reload, so that
// a type it adds is served in every shard, not only in those a task of it
// reached this worker in.
func (s *shards) ensure(p *policies.Policies) {
	for _, typ := range p.TaskTypes() {
		for _, g := range s.layout.Groups(typ) {
			s.group(g)
		}
	}
}

// of returns the lines of a task of taskType for tenant.
func (s *shards) of(taskType, tenant string) *fairLines {
	return s.group(s.layout.Group(taskType, tenant))
}

// group returns group g's lines, made, and their loop started, at first
// need (a type the policies gained by a reload).
func (s *shards) group(g string) *fairLines {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.lines[g]
	if !ok {
		f = s.open(g)
		s.lines[g] = f
		if s.start != nil {
			s.start(f)
		}
	}
	return f
}

// all returns the lines of every group made so far, by group name.
func (s *shards) all() []*fairLines {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*fairLines, 0, len(s.lines))
	for _, g := range slices.Sorted(maps.Keys(s.lines)) {
		out = append(out, s.lines[g])
	}
	return out
}

// serve calls start with every group's lines, now and as they are made,
// until called with nil.
func (s *shards) serve(start func(*fairLines)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = start
	if start == nil {
		return
	}
	for _, g := range slices.Sorted(maps.Keys(s.lines)) {
		start(s.lines[g])
	}
}
