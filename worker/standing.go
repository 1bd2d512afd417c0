package worker

import "sync"

// standing are the tasks of one shard's lines that wait at this worker
// for a slot of a concurrency rule, each until its grant comes or its
// stand ends: a freed slot then reaches a task in one message, not at the
// next fetch of a parked one (docs/INFLIGHT.md, "In the fair lines").
type standing struct {
	mu    sync.Mutex
	tasks map[string]chan struct{}
}

func newStanding() *standing { return &standing{tasks: map[string]chan struct{}{}} }

// granted tells task id, if it stands here, that it holds a grant, and
// reports whether it stands here.
func (s *standing) granted(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.tasks[id]
	if ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return ok
}

// enter makes task id stand here: it returns the channel its grant is
// told on, and leave, which ends its stand (once; later calls do nothing).
func (s *standing) enter(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.tasks[id] = ch
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			if s.tasks[id] == ch {
				delete(s.tasks, id)
			}
			s.mu.Unlock()
		})
	}
}

// has reports whether task id stands here.
func (s *standing) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tasks[id]
	return ok
}
