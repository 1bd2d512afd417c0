// Package prometheus_test checks the alerts of alerts.yml with Prometheus's
// own promtool: the rules load, and their unit tests (alerts_test.yml) show
// each alert firing, and not firing, where it should.
package prometheus_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// promtool returns the path of promtool, failing t in CI when it is
// missing (.ci/test-deps.sh installs Debian's prometheus) and skipping
// elsewhere.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing: apt-get install prometheus (.ci/test-deps.sh)")
		}
		t.Skip("promtool is missing: apt-get install prometheus")
	}
	return path
}

// TestAlertRules: promtool check rules finds the five alerts, and
// promtool test rules passes alerts_test.yml.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	out, err := exec.Command(bin, "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 5 rules found") {
		t.Errorf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "test", "rules", "alerts_test.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules alerts_test.yml: %v\n%s", err, out)
	}
}
