package worker_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// TestRetryDelay: a throttled task comes back at the first whole second at
// or after its RetryAfter (asynq truncates retry times to whole seconds);
// other errors get the fallback.
func TestRetryDelay(t *testing.T) {
	t.Parallel()
	fallback := func(n int, err error, task *asynq.Task) time.Duration { return time.Duration(n) * time.Hour }
	delay := worker.RetryDelay(fallback)
	task := asynq.NewTask("sms:send", nil)
	for _, after := range []time.Duration{0, time.Millisecond, 400 * time.Millisecond, time.Second, 2500 * time.Millisecond, time.Hour} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			t.Parallel()
			before := time.Now()
			d := delay(3, fmt.Errorf("wrapped: %w", &provider.ThrottledError{RetryAfter: after, By: "rule r"}), task)
			after2 := time.Now()
			if d < after {
				t.Errorf("delay %v is shorter than RetryAfter %v", d, after)
			}
			if d > after+time.Second+after2.Sub(before) {
				t.Errorf("delay %v is over a second longer than RetryAfter %v", d, after)
			}
			// The delay was computed between before and after2: from that
			// moment it ends on a whole second.
			lo, hi := before.Add(d), after2.Add(d)
			if lo.Truncate(time.Second).Equal(hi.Truncate(time.Second)) && !lo.Truncate(time.Second).Equal(lo) {
				t.Errorf("now+%v falls inside second %v, not on its start", d, lo.Truncate(time.Second).Unix())
			}
		})
	}
	if got, want := delay(3, errors.New("provider down"), task), 3*time.Hour; got != want {
		t.Errorf("delay of a failure = %v, want the fallback's %v", got, want)
	}
	if got := worker.RetryDelay(nil)(0, errors.New("x"), task); got <= 0 {
		t.Errorf("delay of a failure with asynq's default = %v, want > 0", got)
	}
}
