package throttle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

func TestHoldOnlyGrows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		const key = "provider/sms:send"
		held := func() time.Duration {
			t.Helper()
			d, err := l.HeldFor(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		if got := held(); got != 0 {
			t.Fatalf("HeldFor before any hold = %v, want 0", got)
		}
		if err := l.Hold(ctx, key, 0); err != nil {
			t.Fatal(err)
		}
		if got := held(); got != 0 {
			t.Fatalf("HeldFor after Hold(0) = %v, want 0", got)
		}

		if err := l.Hold(ctx, key, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := held(); got <= 29*time.Second || got > 30*time.Second {
			t.Fatalf("HeldFor after Hold(30s) = %v, want just under 30s", got)
		}
		// A shorter hold does not cut a longer one short.
		if err := l.Hold(ctx, key, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := held(); got <= 29*time.Second {
			t.Fatalf("HeldFor after Hold(30s) then Hold(5s) = %v, want just under 30s", got)
		}
		// A longer one extends it.
		if err := l.Hold(ctx, key, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := held(); got <= 59*time.Second || got > time.Minute {
			t.Fatalf("HeldFor after Hold(1m) = %v, want just under 1m", got)
		}

		// The hold lives beside the window, in the key's group, and Reset
		// lifts it.
		keys := rdbKeys(t, rdb, prefix)
		if len(keys) != 1 || !strings.HasPrefix(keys[0], prefix+"{limits}hold:") {
			t.Fatalf("keys after Hold = %q, want one hold key in group limits", keys)
		}
		if err := l.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		if got := held(); got != 0 {
			t.Fatalf("HeldFor after Reset = %v, want 0", got)
		}
	})
}

func TestHoldExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		if err := l.Hold(ctx, "k", 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if d, err := l.HeldFor(ctx, "k"); err != nil || d <= 0 {
			t.Fatalf("HeldFor just after Hold(200ms) = %v, %v; want held", d, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			d, err := l.HeldFor(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if d == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a 200ms hold still held after 5s: %v", d)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if waited := time.Since(start); waited < 150*time.Millisecond {
			t.Errorf("a 200ms hold ended after %v", waited)
		}
	})
}

func TestHoldRejectsBadKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		if err := l.Hold(ctx, "", time.Second); !errors.Is(err, throttle.ErrInvalidKey) {
			t.Errorf("Hold of an empty key: %v, want ErrInvalidKey", err)
		}
		if _, err := l.HeldFor(ctx, ""); !errors.Is(err, throttle.ErrInvalidKey) {
			t.Errorf("HeldFor of an empty key: %v, want ErrInvalidKey", err)
		}
	})
}
