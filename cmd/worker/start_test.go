package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestStartLines: the first log line says what the worker enforces, with
// durations written as Go writes them, whether or not the operations server
// runs; a warning for each task type left unthrottled follows it, once; the
// operations server's line comes after.
func TestStartLines(t *testing.T) {
	t.Parallel()
	policies := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(policies, []byte("tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, limit: 4, window: 1s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := redistest.URL(t)
	cases := []struct {
		name string
		args []string
		last string // the message of the last line to read
	}{
		{"plain", nil, "task type runs unthrottled: the policies enforce no rule for it"},
		{"with the operations server", []string{"--metrics-addr", "127.0.0.1:0"}, "operations server listening"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--redis", url, "--policies", policies, "--sms-log", "--email-log",
				"--queues", redistest.Queue(t, redistest.Client(t)) + "=1", "--max-hold", "1500ms"}, tc.args...)
			lines := parseStartLines(t, startLines(t, args, tc.last))
			var msgs []string
			for _, l := range lines {
				msgs = append(msgs, l.Msg)
			}
			want := []string{"worker started", "task type runs unthrottled: the policies enforce no rule for it"}
			if tc.last != want[1] {
				want = append(want, tc.last)
			}
			if !slices.Equal(msgs, want) {
				t.Fatalf("log messages %q, want %q", msgs, want)
			}
			first := lines[0]
			if first.Enforces != "sms:send: per-second 4/1s per tenant" || first.MaxHold != "1.5s" || first.DecisionTimeout != "1s" {
				t.Errorf("first line %s: want enforces %q, max_hold \"1.5s\", decision_timeout \"1s\"", first.raw, "sms:send: per-second 4/1s per tenant")
			}
			if lines[1].TaskType != "email:send" {
				t.Errorf("warning %s: want task_type email:send", lines[1].raw)
			}
			if strings.Contains(first.raw, "unthrottled") {
				t.Errorf("first line %s still says that types without rules run unthrottled; the warning says which", first.raw)
			}
		})
	}
}

// startLogLine is what TestStartLines reads of a log line.
type startLogLine struct {
	Msg, Enforces, TaskType, MaxHold, DecisionTimeout string
	raw                                               string
}

// parseStartLines decodes the worker's JSON log lines; a max_hold or
// decision_timeout that is not a string reads as "".
func parseStartLines(t *testing.T, raw []string) []startLogLine {
	t.Helper()
	var lines []startLogLine
	for _, text := range raw {
		var l struct {
			Msg             string `json:"msg"`
			Enforces        string `json:"enforces"`
			TaskType        string `json:"task_type"`
			MaxHold         any    `json:"max_hold"`
			DecisionTimeout any    `json:"decision_timeout"`
		}
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			t.Fatalf("log line %q: %v", text, err)
		}
		hold, _ := l.MaxHold.(string)
		timeout, _ := l.DecisionTimeout.(string)
		lines = append(lines, startLogLine{l.Msg, l.Enforces, l.TaskType, hold, timeout, text})
	}
	return lines
}

// TestReloadWarnsUnthrottled: a reload that leaves a task type without an
// enforced rule warns for it, as the start does.
func TestReloadWarnsUnthrottled(t *testing.T) {
	t.Parallel()
	policies := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(policies, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, limit: 4, window: 1s}\n" +
		"  email:send:\n    - {name: per-second, scope: tenant, limit: 4, window: 1s}\n")
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
	// The line after "policies reloaded" comes from the same goroutine at
	// once: with the fix it is the warning, without it a line of the stop.
	var after string
	scan := bufio.NewScanner(pipe)
	reloaded := false
	for after == "" && scan.Scan() {
		var l struct {
			Level, Msg string
			TaskType   string `json:"task_type"`
		}
		if err := json.Unmarshal(scan.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", scan.Text(), err)
		}
		switch {
		case l.Msg == "worker started":
			write("tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, limit: 4, window: 1s}\n")
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		case l.Msg == "policies reloaded":
			reloaded = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case reloaded:
			after = l.Level + " " + l.Msg + " " + l.TaskType
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	go func() { _, _ = io.Copy(io.Discard, pipe) }()
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker: %v", err)
	}
	if want := "WARN task type runs unthrottled: the policies enforce no rule for it email:send"; after != want {
		t.Errorf("the line after the reload is %q, want %q", after, want)
	}
}
