// Package testneed is how a test says that something it needs (a Redis,
// redis-server, Chromium) is missing: it skips with the reason, or fails
// when the environment variable CI is "true", as `make test` sets it, so
// that a suite never passes by skipping what it was meant to test.
package testneed

import (
	"fmt"
	"os"
	"testing"
)

// Missing skips tb with the reason, or fails it when CI is "true".
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s (CI=true: tests must not skip)", msg)
	}
	tb.Skip(msg)
}
