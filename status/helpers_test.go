package status_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// waitFor is how long a test waits for something to happen before it fails.
// It is generous: asynq polls Redis, and the race detector on a loaded
// machine slows everything; a passing test waits only as long as it must.
const waitFor = 30 * time.Second

// serverCheckInterval is the DelayedTaskCheckInterval of the test servers.
const serverCheckInterval = 100 * time.Millisecond

var goodSMS = producer.SMS{To: "+15551234567", Body: "Your code is 123456"}

// smsRecorder is an SMSProvider that passes each message to a channel.
type smsRecorder chan provider.Message[producer.SMS]

func (r smsRecorder) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
	r <- m
	return nil
}

// receive returns the next value of ch, or fails t after waitFor.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("no %s within %v", what, waitFor)
		panic("unreachable")
	}
}

// runServer runs srv until stop is called, and returns the context it
// runs with (for the test's own calls) and stop, which ends Run and fails
// t unless it returns cleanly.
func runServer(t *testing.T, srv *worker.Server) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	return ctx, func() {
		t.Helper()
		cancel()
		if err := receive(t, done, "end of Run"); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// eventually polls cond every 20 ms until it holds, or fails t after
// waitFor with what cond last said.
func eventually(t *testing.T, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after %v", state, waitFor)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
