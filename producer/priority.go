package producer

import (
	"fmt"
	"strconv"

	"github.com/hibiken/asynq"
)

// The priorities of a task, from the most urgent to the least, and the
// priority of a task without one: the middle.
const (
	MostUrgent      = 1
	LeastUrgent     = 5
	DefaultPriority = 3
)

// HeaderPriority is the task header that holds the task's priority, in
// decimal: MostUrgent (1) to LeastUrgent (5). A task without it has
// DefaultPriority (3). Among the tasks waiting for
// the same shared limit, a more urgent task is given the next free slot,
// and each less urgent priority keeps a reserved share (docs/FAIRNESS.md).
// It is not asynq's queue priority, which chooses the queue a worker
// fetches from next.
const HeaderPriority = "sluice-priority"

// priorityOption is the asynq.Option that Priority returns. asynq ignores
// options of types it does not know; NewSMSTask and NewEmailTask read it
// into HeaderPriority.
type priorityOption int

// priorityOpt is priorityOption's asynq.OptionType, outside asynq's own.
const priorityOpt asynq.OptionType = 1000

func (p priorityOption) String() string         { return fmt.Sprintf("Priority(%d)", int(p)) }
func (p priorityOption) Type() asynq.OptionType { return priorityOpt }
func (p priorityOption) Value() any             { return int(p) }

// Priority is an option of NewSMSTask, NewEmailTask, EnqueueSMS and
// EnqueueEmail that sets the task's priority (HeaderPriority): 1, the most
// urgent, to 5; 3 is the default. Another value is an error of the call.
func Priority(p int) asynq.Option { return priorityOption(p) }

// priority returns the priority set by the last Priority in opts (0: none)
// and the other options, in order.
func priority(opts []asynq.Option) (int, []asynq.Option, error) {
	p, rest := 0, make([]asynq.Option, 0, len(opts)+1)
	for _, opt := range opts {
		o, ok := opt.(priorityOption)
		if !ok {
			rest = append(rest, opt)
			continue
		}
		if err := checkPriority(int(o)); err != nil {
			return 0, nil, err
		}
		p = int(o)
	}
	return p, rest, nil
}

// checkPriority refuses a priority out of range, naming the header.
func checkPriority(p int) error {
	if p < MostUrgent || p > LeastUrgent {
		return fieldError(HeaderPriority, strconv.Itoa(p), "is not from %d (most urgent) to %d (least urgent)",
			MostUrgent, LeastUrgent)
	}
	return nil
}

// TaskPriority returns the priority of task, from HeaderPriority:
// DefaultPriority without it, and an error (matching ErrInvalid)
// when the header is not a number from 1 to 5.
func TaskPriority(task *asynq.Task) (int, error) {
	s, ok := task.Headers()[HeaderPriority]
	if !ok {
		return DefaultPriority, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(p) != s {
		return 0, fieldError(HeaderPriority, s, "is not a whole number from %d to %d", MostUrgent, LeastUrgent)
	}
	if err := checkPriority(p); err != nil {
		return 0, err
	}
	return p, nil
}
