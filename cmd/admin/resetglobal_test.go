package main

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestResetGlobal: reset-global empties the one global window named, even
// a damaged one (a string where the log was), and nothing else; without
// --yes it only says what it would do; a tenant rule, an unknown rule and
// a missing --type are usage errors that change nothing.
func TestResetGlobal(t *testing.T) {
	t.Parallel()
	const provider = "rule/sms:send/provider"
	cases := []struct {
		name    string
		args    []string
		damaged bool
		code    int
		stdout  []string
		stderr  string
		gone    []string
	}{
		{name: "without --yes", args: []string{"--type", "sms:send", "--rule", "provider"}, code: 2,
			stdout: []string{"would reset sms:send provider, global: every tenant's sends in its window are forgotten (key " + provider + ")"},
			stderr: "admin reset-global: nothing reset: give --yes to empty the window listed\n"},
		{name: "reset", args: []string{"--type", "sms:send", "--rule", "provider", "--yes"},
			stdout: []string{"reset sms:send provider, global: every tenant's sends in its window are forgotten (key " + provider + ")"},
			gone:   []string{provider}},
		{name: "damaged", args: []string{"--type", "sms:send", "--rule", "provider", "--yes"}, damaged: true,
			stdout: []string{"reset sms:send provider, global: every tenant's sends in its window are forgotten (key " + provider + ")"},
			gone:   []string{provider}},
		{name: "a tenant rule", args: []string{"--type", "sms:send", "--rule", "per-hour", "--yes"}, code: 2,
			stderr: "admin reset-global: rule \"per-hour\" of sms:send is of scope tenant: reset a tenant's window with admin reset --tenant\n"},
		{name: "an unknown rule", args: []string{"--type", "sms:send", "--rule", "nope", "--yes"}, code: 2,
			stderr: "admin reset-global: task type sms:send has no rule \"nope\"\n"},
		{name: "no type", args: []string{"--rule", "provider", "--yes"}, code: 2,
			stderr: "admin reset-global: give --type and --rule: the global window to empty\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWindows(t)
			w.send(t, "sms:send", "acme", 7)
			w.send(t, "sms:send", "globex", 3)
			if tc.damaged {
				key, err := throttle.NewLimiter(w.rdb, throttle.WithPrefix(w.prefix)).RedisKey(provider)
				if err != nil {
					t.Fatal(err)
				}
				w.rdb.Del(context.Background(), key)
				w.rdb.Set(context.Background(), key, "garbage", 0)
			}
			before := w.snapshot(t)
			r := admin(t, "", append([]string{"reset-global", "--redis", redistest.URL(t), "--policies", w.path, "--prefix", w.prefix}, tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit status = %d, want %d", r.code, tc.code)
			}
			if diff := cmp.Diff(tc.stdout, lines(r.stdout)); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if r.stderr != tc.stderr {
				t.Errorf("stderr\n got %q\nwant %q", r.stderr, tc.stderr)
			}
			if diff := cmp.Diff(without(before, tc.gone...), w.snapshot(t)); diff != "" {
				t.Errorf("limiter keys after (-want +got):\n%s", diff)
			}
		})
	}
}
