package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/internal/bench"
	"github.com/sluicehq/sluice/internal/testneed"
)

func TestUsage(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	out := t.TempDir()
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"help", []string{"--help"}, 0, ""},
		{"no --out", []string{"--duration", "1s"}, 2, "--out is required"},
		{"unknown section", []string{"--out", t.TempDir(), "--only", "limiter,plots"}, 2, `unknown section "plots"`},
		{"zero duration", []string{"--out", t.TempDir(), "--duration", "0s"}, 2, "must be positive"},
		{"zero worker tasks", []string{"--out", t.TempDir(), "--worker-tasks", "0"}, 2, "must be positive"},
		{"negative worker concurrency", []string{"--out", t.TempDir(), "--worker-concurrency", "-1"}, 2, "must be positive"},
		{"zero drain concurrency", []string{"--out", t.TempDir(), "--drain-concurrency", "0"}, 2, "must be positive"},
		{"drain-short takes no value", []string{"--out", t.TempDir(), "--drain-short=maybe"}, 2, "invalid boolean value"},
		{"bad duration", []string{"--out", t.TempDir(), "--duration", "fast"}, 2, "invalid value"},
		{"extra argument", []string{"--duration", "1s", "now"}, 2, `bench: unexpected argument "now": only flags are taken (see --help)` + "\n"},
		{"flag after an argument", []string{"--only", "memory", "now", "--out", out}, 2,
			`bench: unexpected argument "now" (then "--out", "` + out + `"): flags go before arguments, and a value with spaces needs quotes: --only "memory now"` + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(t.Context(), c.args, &stderr); code != c.wantCode {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", c.args, code, c.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.wantErr) {
				t.Errorf("run(%q) stderr %q lacks %q", c.args, stderr.String(), c.wantErr)
			}
		})
	}
}

// TestHelpExitStatus: --help gives the exit statuses, usage errors' 2
// among them.
func TestHelpExitStatus(t *testing.T) {
	if want := "Exit status: 0 on success; 1 when the run fails; 2 for a usage error"; !strings.Contains(synopsis, want) {
		t.Errorf("the help does not say %q:\n%s", want, synopsis)
	}
}

// TestOwnRedis runs the command as `go run ./cmd/bench --out DIR --only
// memory` would, with no Redis given: it starts its own and writes both
// files.
func TestOwnRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testneed.Missing(t, "no redis-server on PATH")
	}
	t.Setenv("REDIS_URL", "")
	dir := filepath.Join(t.TempDir(), "out")
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"--out", dir, "--only", "memory"}, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "started redis-server on 127.0.0.1:") {
		t.Errorf("stderr does not say it started Redis:\n%s", stderr.String())
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Results
	if err := json.Unmarshal(js, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Meta.OwnRedis || res.Memory == nil || res.Limiter != nil || res.Worker != nil || len(res.Memory.Rows) != len(bench.DefaultMemoryUnits) {
		t.Errorf("results: own Redis %v, memory %+v, limiter %v", res.Meta.OwnRedis, res.Memory, res.Limiter)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "--only memory") || strings.Contains(string(md), "--redis") {
		t.Errorf("REPORT.md's command does not rerun this run:\n%s", md)
	}
}
