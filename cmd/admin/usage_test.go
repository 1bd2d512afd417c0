package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/redistest"
)

// usageRow is one object of "admin usage --json".
type usageRow struct {
	TaskType  string  `json:"task_type"`
	Rule      string  `json:"rule"`
	Scope     string  `json:"scope"`
	Tenant    string  `json:"tenant"`
	Key       string  `json:"key"`
	Limit     int     `json:"limit"`
	Window    float64 `json:"window_seconds"`
	Margin    float64 `json:"margin_seconds"`
	Algorithm string  `json:"algorithm"`
	Shadow    bool    `json:"shadow"`
	Used      int     `json:"used"`
	InLine    int     `json:"in_line"`
	Remaining int     `json:"remaining"`
	NextFree  float64 `json:"next_free_seconds"`
	EmptyIn   float64 `json:"empty_in_seconds"`
}

// TestUsage: after admissions and denials, usage shows for each window of
// the tenant what it holds: admitted, places in line, what remains and
// when the next slot frees; and reading it changes nothing in Redis.
func TestUsage(t *testing.T) {
	t.Parallel()
	w := newWindows(t)
	// acme: 5 SMS admitted, 2 denied (their places reserved in both SMS
	// windows), 3 email; globex: 2 SMS; big: 1 SMS.
	if got, want := w.send(t, "sms:send", "acme", 7), 5; got != want {
		t.Fatalf("%d SMS of acme admitted, want %d", got, want)
	}
	w.send(t, "sms:send", "globex", 2)
	w.send(t, "sms:send", "big", 1)
	w.send(t, "email:send", "acme", 3)
	before := w.snapshot(t)
	args := []string{"usage", "--redis", redistest.URL(t), "--policies", w.path, "--prefix", w.prefix}

	r := admin(t, "", append(args, "--tenant", "acme", "--json")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit status %d, stderr %q", r.code, r.stderr)
	}
	var got []usageRow
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not a JSON array of windows: %v\n%s", err, r.stdout)
	}
	const hour, day, margin = 3600.0, 86400.0, 0.05
	want := []usageRow{
		{"email:send", "daily", "tenant", "acme", "rule/email:send/daily/acme", 10, day, margin, "gcra", false, 3, 0, 7, 0, 0},
		{"sms:send", "per-hour", "tenant", "acme", "rule/sms:send/per-hour/acme", 5, hour, margin, "sliding-log", false, 5, 2, 0, 0, 0},
		{"sms:send", "provider", "global", "", "rule/sms:send/provider", 100, hour, margin, "sliding-log", false, 8, 2, 90, 0, 0},
	}
	// The times run on while the test does: within a minute of what the
	// windows say.
	near := func(got *float64, want float64) {
		if *got > want-60 && *got <= want {
			*got = want
		}
	}
	near(&got[0].EmptyIn, 3*(day+margin)/10) // GCRA: three emission intervals ahead
	want[0].EmptyIn = 3 * (day + margin) / 10
	near(&got[1].NextFree, hour+margin) // behind the two places, at the third admission's exit
	want[1].NextFree = hour + margin
	near(&got[1].EmptyIn, 2*(hour+margin)) // the places leave a window after their time
	want[1].EmptyIn = 2 * (hour + margin)
	near(&got[2].EmptyIn, 2*(hour+margin))
	want[2].EmptyIn = 2 * (hour + margin)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage of acme (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, w.snapshot(t)); diff != "" {
		t.Errorf("usage changed Redis (-before +after):\n%s", diff)
	}

	// The table: big's override, one type.
	r = admin(t, "", append(args, "--tenant", "big", "--type", "sms:send")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit status %d, stderr %q", r.code, r.stderr)
	}
	wantTable := []string{
		"TYPE RULE SCOPE TENANT USED IN LINE LIMIT WINDOW NEXT FREE",
		"sms:send per-hour tenant big 1 0 8 1h +50ms now",
		"sms:send provider global (all) 8 2 100 1h +50ms now",
	}
	if diff := cmp.Diff(wantTable, lines(r.stdout)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	// A tenant that sent nothing: empty windows of its own, and none made.
	r = admin(t, "", append(args, "--tenant", "initech")...)
	wantTable = []string{
		"TYPE RULE SCOPE TENANT USED IN LINE LIMIT WINDOW NEXT FREE",
		"email:send daily tenant initech 0 0 10 24h +50ms gcra now",
		"sms:send per-hour tenant initech 0 0 5 1h +50ms now",
		"sms:send provider global (all) 8 2 100 1h +50ms now",
	}
	if diff := cmp.Diff(wantTable, lines(r.stdout)); diff != "" {
		t.Errorf("table of a tenant without windows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, w.snapshot(t)); diff != "" {
		t.Errorf("usage changed Redis (-before +after):\n%s", diff)
	}
}

// TestUsageFull: a full window says when its next slot frees, in the
// table too.
func TestUsageFull(t *testing.T) {
	t.Parallel()
	w := newWindows(t)
	w.send(t, "sms:send", "acme", 5)
	r := admin(t, "", "usage", "--redis", redistest.URL(t), "--policies", w.path, "--prefix", w.prefix, "--tenant", "acme", "--type", "sms:send")
	got := lines(r.stdout)
	if len(got) != 3 {
		t.Fatalf("stdout has %d lines, want 3:\n%s", len(got), r.stdout)
	}
	// "sms:send per-hour tenant acme 5 0 5 1h +50ms in 59m59.987s"
	var typ, rule, scope, tenant, window, margin, in, next string
	var used, inLine, limit int
	if _, err := fmt.Sscan(got[1], &typ, &rule, &scope, &tenant, &used, &inLine, &limit, &window, &margin, &in, &next); err != nil {
		t.Fatalf("row %q: %v", got[1], err)
	}
	if used != 5 || inLine != 0 || limit != 5 || in != "in" {
		t.Errorf("row %q: want 5 used, 0 in line, limit 5, next free in ...", got[1])
	}
	if d, err := time.ParseDuration(next); err != nil || d < 59*time.Minute || d > time.Hour+50*time.Millisecond {
		t.Errorf("row %q: next free in %q, want about an hour", got[1], next)
	}
}

// TestUsageShadow: a rule in shadow mode says so in the table.
func TestUsageShadow(t *testing.T) {
	t.Parallel()
	w := newWindows(t)
	path := writeFile(t, "tasks:\n  sms:send:\n    - {name: trial, scope: tenant, mode: shadow, limit: 2, window: 1h}\n")
	r := admin(t, "", "usage", "--redis", redistest.URL(t), "--policies", path, "--prefix", w.prefix, "--tenant", "acme")
	want := []string{
		"TYPE RULE SCOPE TENANT USED IN LINE LIMIT WINDOW NEXT FREE",
		"sms:send trial (shadow) tenant acme 0 0 2 1h +50ms now",
	}
	if diff := cmp.Diff(want, lines(r.stdout)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
