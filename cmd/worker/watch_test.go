package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestReloadOnFileChange: a worker whose policies file is mounted as
// Kubernetes mounts a ConfigMap (policies.yaml -> ..data/policies.yaml,
// ..data -> a version directory) reloads when a new version is swapped
// in, with no signal; a bad version is refused once, naming what is
// wrong, and the policies in force stay.
func TestReloadOnFileChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	version := 0
	publish := func(limit string) {
		t.Helper()
		version++
		v := fmt.Sprintf("..version_%d", version)
		content := "tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, " + limit + ", window: 1s}\n"
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "policies.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(v, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	publish("limit: 4")
	policies := filepath.Join(dir, "policies.yaml")
	if err := os.Symlink(filepath.Join("..data", "policies.yaml"), policies); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, nil, "--redis", redistest.URL(t), "--policies", policies, "--sms-log", "--email-log",
		"--queues", redistest.Queue(t, redistest.Client(t))+"=1")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []string // the reloads' lines: level, message, what set them off, and what they say
	scan := bufio.NewScanner(pipe)
	for len(got) < 2 && scan.Scan() {
		var l struct {
			Level, Msg, On, Enforces, Err string
		}
		if err := json.Unmarshal(scan.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", scan.Text(), err)
		}
		switch {
		case l.Msg == "worker started":
			publish("limit: 7")
		case strings.HasPrefix(l.Msg, "policies"):
			got = append(got, strings.Join([]string{l.Level, l.Msg, l.On, l.Enforces, l.Err}, " | "))
			if len(got) == 1 {
				publish("limt: 9")
			}
		}
	}
	// The bad version is not tried again: 3 s more, 3 looks, no line.
	time.Sleep(3 * time.Second)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(pipe)
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker: %v", err)
	}
	if n := strings.Count(string(rest), `"policies`); n != 0 {
		t.Errorf("%d more reload lines after the bad version's refusal, want none:\n%s", n, rest)
	}
	want := []string{
		"INFO | policies reloaded | a change of the file | sms:send: per-second 7/1s per tenant | ",
		"ERROR | policies not reloaded; the previous ones stay in force | a change of the file |  | ",
	}
	if len(got) != 2 || got[0] != want[0] || !strings.HasPrefix(got[1], want[1]) || !strings.Contains(got[1], "limt") {
		t.Errorf("the reloads' lines:\n%q\nwant\n%q\nthe second naming limt", got, want)
	}
}
