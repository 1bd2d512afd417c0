package producer_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testneed"
)

// TestImportsNoLimiter: an app that only enqueues builds neither the
// limiter (throttle) nor its scripts (lua): producer parks tasks through
// internal/entrance alone.
func TestImportsNoLimiter(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		testneed.Missing(t, "the go command, to list producer's imports: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/sluicehq/sluice/throttle" || pkg == "github.com/sluicehq/sluice/lua" {
			t.Errorf("producer imports %s", pkg)
		}
	}
}
