package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestReset: reset empties the tenant's own windows it is asked to, and
// nothing else: not another tenant's, not a global one; without --yes it
// only says what it would do.
func TestReset(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
		gone   []string // limiter keys emptied
	}{
		{
			name: "without --yes",
			code: 2,
			stdout: []string{
				"would reset email:send daily for tenant acme (key rule/email:send/daily/acme)",
				"would reset sms:send per-hour for tenant acme (key rule/sms:send/per-hour/acme)",
				"would not reset sms:send provider: global, shared by every tenant",
			},
			stderr: "admin reset: nothing reset: give --yes to empty the 2 windows of tenant acme listed\n",
		},
		{
			name: "every type",
			args: []string{"--yes"},
			stdout: []string{
				"reset email:send daily for tenant acme (key rule/email:send/daily/acme)",
				"reset sms:send per-hour for tenant acme (key rule/sms:send/per-hour/acme)",
				"not reset sms:send provider: global, shared by every tenant",
			},
			gone: []string{"rule/email:send/daily/acme", "rule/sms:send/per-hour/acme"},
		},
		{
			name: "one type",
			args: []string{"--type", "email:send", "--yes"},
			stdout: []string{
				"reset email:send daily for tenant acme (key rule/email:send/daily/acme)",
			},
			gone: []string{"rule/email:send/daily/acme"},
		},
		{
			name: "one rule",
			args: []string{"--rule", "per-hour", "--yes"},
			stdout: []string{
				"reset sms:send per-hour for tenant acme (key rule/sms:send/per-hour/acme)",
			},
			gone: []string{"rule/sms:send/per-hour/acme"},
		},
		{
			name:   "one rule without --yes",
			args:   []string{"--type", "sms:send", "--rule", "per-hour"},
			code:   2,
			stdout: []string{"would reset sms:send per-hour for tenant acme (key rule/sms:send/per-hour/acme)"},
			stderr: "admin reset: nothing reset: give --yes to empty the 1 window of tenant acme listed\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWindows(t)
			before := fillWindows(t, w)
			args := append([]string{"reset", "--redis", redistest.URL(t), "--policies", w.path, "--prefix", w.prefix, "--tenant", "acme"}, tc.args...)
			r := admin(t, "", args...)
			if got, want := r.code, tc.code; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			if diff := cmp.Diff(tc.stdout, lines(r.stdout)); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if got, want := r.stderr, tc.stderr; got != want {
				t.Errorf("stderr\n got %q\nwant %q", got, want)
			}
			if diff := cmp.Diff(without(before, tc.gone...), w.snapshot(t)); diff != "" {
				t.Errorf("limiter keys after the reset (-want +got):\n%s", diff)
			}
		})
	}
}

// fillWindows sends tasks of acme and globex of both types, and returns
// the limiter keys they leave: five windows and hashes, and the frontier
// note of acme's per-hour log, which gave places in line.
func fillWindows(t *testing.T, w *windows) map[string]string {
	t.Helper()
	w.send(t, "sms:send", "acme", 7) // 5 admitted, 2 places in line
	w.send(t, "sms:send", "globex", 3)
	w.send(t, "email:send", "acme", 2)
	w.send(t, "email:send", "globex", 1)
	before := w.snapshot(t)
	if got, want := len(before), 6; got != want {
		t.Fatalf("%d limiter keys before the reset, want %d: %v", got, want, before)
	}
	return before
}

// TestResetNothingToReset: a selection of global rules only resets
// nothing, says so, and succeeds.
func TestResetNothingToReset(t *testing.T) {
	t.Parallel()
	w := newWindows(t)
	path := writeFile(t, "tasks:\n  sms:send:\n    - {name: provider, scope: global, limit: 10, window: 1h}\n")
	w.send(t, "sms:send", "acme", 1)
	before := w.snapshot(t)
	r := admin(t, "", "reset", "--redis", redistest.URL(t), "--policies", path, "--prefix", w.prefix, "--tenant", "acme", "--yes")
	if r.code != 0 || r.stderr != "" {
		t.Errorf("exit status %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	want := []string{
		"not reset sms:send provider: global, shared by every tenant",
		"nothing to reset: no rule of scope tenant selected for tenant acme",
	}
	if diff := cmp.Diff(want, lines(r.stdout)); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, w.snapshot(t)); diff != "" {
		t.Errorf("limiter keys changed (-before +after):\n%s", diff)
	}
}
