// Package testwait holds what the tests of several packages wait with: a
// value from a channel, a condition, a worker server's end. It is for
// tests only; no program imports it.
package testwait

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/worker"
)

// For is how long a test waits for what should happen in well under a
// second: long enough for a loaded CI machine, short enough to fail.
const For = 30 * time.Second

// Receive returns the next value of ch, or fails t after For, naming what
// it waited for.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(For):
		t.Fatalf("no %s within %v", what, For)
		panic("unreachable")
	}
}

// Drain returns what ch holds now, without waiting.
func Drain[T any](ch <-chan T) []T {
	var out []T
	for {
		select {
		case v := <-ch:
			out = append(out, v)
		default:
			return out
		}
	}
}

// Eventually polls cond every 20 ms until it holds, or fails t after For
// with what cond last said.
func Eventually(t testing.TB, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(For)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after %v", state, For)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RunServer runs srv until stop is called, and returns the context it runs
// with (for the test's own calls) and stop, which ends Run and fails t
// unless it returns cleanly.
func RunServer(t testing.TB, srv *worker.Server) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	return ctx, func() {
		t.Helper()
		cancel()
		if err := Receive(t, done, "end of Run"); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}
