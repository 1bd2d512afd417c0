package policies_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// usagePolicies has a margin for the file and one for a rule, an override
// with its own window, and each algorithm.
const usagePolicies = `
margin: 100ms
tasks:
  sms:send:
    - {name: per-second, scope: tenant, limit: 4, window: 1s, tenants: {big: {limit: 8, window: 2s}}}
    - {name: provider, scope: global, limit: 10, window: 1s, margin: 0s}
    - {name: new-quota, scope: tenant, mode: shadow, limit: 2, window: 1s}
  email:send:
    - {name: hourly, scope: tenant, algorithm: sliding-window, limit: 100, window: 1h}
    - {name: daily, scope: tenant, algorithm: fixed-window, limit: 1000, window: 1d, margin: 0s}
    - {name: burst, scope: global, algorithm: gcra, limit: 50, window: 1m}
`

func parsePolicies(t *testing.T, yaml string) *policies.Policies {
	t.Helper()
	p, err := policies.Parse(t.Name(), []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// TestWindowsMatchFor: the windows that usage and reset read are the ones
// the Throttle middleware checks: the keys and policies of Policies.For.
func TestWindowsMatchFor(t *testing.T) {
	t.Parallel()
	p := parsePolicies(t, usagePolicies)
	for _, tenant := range []string{"acme", "big"} {
		ws, err := policies.Windows(p, "", "", tenant)
		if err != nil {
			t.Fatalf("Windows(%s): %v", tenant, err)
		}
		var got, want []throttle.Check
		for _, w := range ws {
			got = append(got, w.Check())
		}
		for _, typ := range []string{"email:send", "sms:send"} { // name order
			for _, a := range p.For(typ, tenant) {
				want = append(want, a.Check)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("checks of %s (-For +Windows):\n%s", tenant, diff)
		}
	}

	ws, err := policies.Windows(p, "sms:send", "", "big")
	if err != nil {
		t.Fatal(err)
	}
	want := []policies.RuleWindow{
		{TaskType: "sms:send", Rule: "per-second", Scope: "tenant", Tenant: "big", Key: "rule/sms:send/per-second/big",
			Limit: 8, Window: 2 * time.Second, Margin: 100 * time.Millisecond},
		{TaskType: "sms:send", Rule: "provider", Scope: "global", Key: "rule/sms:send/provider", Limit: 10, Window: time.Second},
		{TaskType: "sms:send", Rule: "new-quota", Scope: "tenant", Tenant: "big", Key: "rule/sms:send/new-quota/big",
			Limit: 2, Window: time.Second, Margin: 100 * time.Millisecond, Shadow: true},
	}
	if diff := cmp.Diff(want, ws); diff != "" {
		t.Errorf("windows of big (-want +got):\n%s", diff)
	}
}

// TestWindowsErrors: what does not exist is named, matches ErrSelection,
// and no Redis is needed to find it.
func TestWindowsErrors(t *testing.T) {
	t.Parallel()
	p := parsePolicies(t, usagePolicies)
	src := t.Name()
	cases := []struct {
		name                   string
		taskType, rule, tenant string
		want                   string
	}{
		{"empty tenant", "", "", "", `tenant "": is empty`},
		{"tenant with a slash", "", "", "acme/x", `tenant "acme/x": has '/' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"tenant with braces", "", "", "{limits}", `tenant "{limits}": does not start with a letter or digit`},
		{"unknown type", "fax:send", "", "acme", `task type "fax:send" has no rules in ` + src + " (it runs unthrottled); it has rules for email:send, sms:send"},
		{"unknown rule", "", "per-minute", "acme", `rule "per-minute" is not a rule of any task type in ` + src +
			"; its rules: email:send hourly, email:send daily, email:send burst, sms:send per-second, sms:send provider, sms:send new-quota"},
		{"rule of another type", "sms:send", "daily", "acme", `rule "daily" is not a rule of task type sms:send in ` + src +
			"; its rules: sms:send per-second, sms:send provider, sms:send new-quota"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := policies.Windows(p, tc.taskType, tc.rule, tc.tenant)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, policies.ErrSelection) {
				t.Errorf("error %q does not match ErrSelection", err)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n got %q\nwant %q", got, tc.want)
			}
		})
	}

	_, _, err := policies.ResetPlan(p, "email:send", "burst", "acme")
	if want := `rule "burst" of email:send is global: its window is shared by every tenant, and a tenant's reset never empties it`; err == nil || err.Error() != want || !errors.Is(err, policies.ErrSelection) {
		t.Errorf("ResetPlan of a global rule: %v, want %q matching ErrSelection", err, want)
	}
}

// TestUsageAlgorithms: a counter algorithm's count, no places in line;
// and Usage, a read, writes no key.
func TestUsageAlgorithms(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	p := parsePolicies(t, usagePolicies)
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	ctx := context.Background()
	var checks []throttle.Check
	for _, a := range p.For("email:send", "acme") {
		checks = append(checks, a.Check)
	}
	for i := range 3 {
		if md, err := l.AllowInLine(ctx, fmt.Sprint("task-", i), checks); err != nil || !md.Allowed {
			t.Fatalf("AllowInLine: %+v, %v", md, err)
		}
	}
	keys := len(redistest.Keys(t, rdb, prefix))

	for _, tenant := range []string{"acme", "globex"} {
		got, err := policies.Usage(ctx, rdb, prefix, p, "email:send", tenant)
		if err != nil {
			t.Fatalf("Usage(%s): %v", tenant, err)
		}
		var used []string
		for _, u := range got {
			used = append(used, fmt.Sprintf("%s %d+%d of %d", u.Rule, u.Used, u.InLine, u.Limit))
			if u.NextFree != 0 {
				t.Errorf("%s: NextFree %v, want 0", u.Rule, u.NextFree)
			}
		}
		want := []string{"hourly 3+0 of 100", "daily 3+0 of 1000", "burst 3+0 of 50"}
		if tenant == "globex" {
			want = []string{"hourly 0+0 of 100", "daily 0+0 of 1000", "burst 3+0 of 50"}
		}
		if diff := cmp.Diff(want, used); diff != "" {
			t.Errorf("usage of %s (-want +got):\n%s", tenant, diff)
		}
	}
	if got := len(redistest.Keys(t, rdb, prefix)); got != keys {
		t.Errorf("%d keys after Usage, %d before", got, keys)
	}
}

// TestUsagePlacesAhead: places in line a window or two ahead count in
// InLine, and Remaining agrees with NextFree: a window whose places lie
// ahead still has room now.
func TestUsagePlacesAhead(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	p := parsePolicies(t, `
margin: 0s
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 1, window: 1h}
    - {name: provider, scope: global, limit: 2, window: 1h}
`)
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	ctx := context.Background()
	var checks []throttle.Check
	for _, a := range p.For("sms:send", "acme") {
		checks = append(checks, a.Check)
	}
	// acme's first task is admitted, the next two placed an hour and two
	// hours ahead, in both windows.
	for i := range 3 {
		if md, err := l.AllowInLine(ctx, fmt.Sprint("task-", i), checks); err != nil || md.Allowed != (i == 0) {
			t.Fatalf("task %d: %+v, %v", i, md, err)
		}
	}
	got, err := policies.Usage(ctx, rdb, prefix, p, "sms:send", "acme")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Rule                    string
		Used, InLine, Remaining int
		Full                    bool // NextFree > 0
	}
	var rows []row
	for _, u := range got {
		rows = append(rows, row{u.Rule, u.Used, u.InLine, u.Remaining, u.NextFree > 0})
	}
	want := []row{
		{"per-hour", 1, 2, 0, true},
		{"provider", 1, 2, 1, false}, // 3 units for a limit of 2, yet room now
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if next := got[0].NextFree; next < 3*time.Hour-time.Minute || next > 3*time.Hour {
		t.Errorf("per-hour: next free in %v, want three hours: a window after the second place", next)
	}
	// What Usage said fits does: globex's task is admitted now.
	var globex []throttle.Check
	for _, a := range p.For("sms:send", "globex") {
		globex = append(globex, a.Check)
	}
	if md, err := l.AllowInLine(ctx, "globex-1", globex); err != nil || !md.Allowed {
		t.Errorf("globex's task: %+v, %v; want it admitted", md, err)
	}
}

// TestUsageAfterABurst holds RuleUsage's example to what Usage says: a rule
// of 4 a second with a margin of 100 ms, after a burst of 20 tasks, has 4
// used, 16 in line and the next free in about 5.5 s, after the 16.
func TestUsageAfterABurst(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	p := parsePolicies(t, `
margin: 100ms
tasks:
  sms:send:
    - {name: per-second, scope: tenant, limit: 4, window: 1s}
`)
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	ctx := context.Background()
	var checks []throttle.Check
	for _, a := range p.For("sms:send", "acme") {
		checks = append(checks, a.Check)
	}
	start := time.Now()
	for i := range 20 {
		if md, err := l.AllowInLine(ctx, fmt.Sprint("task-", i), checks); err != nil || md.Allowed != (i < 4) {
			t.Fatalf("task %d: %+v, %v", i, md, err)
		}
	}
	got, err := policies.Usage(ctx, rdb, prefix, p, "sms:send", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Usage: %d windows, want 1", len(got))
	}
	u := got[0]
	if u.Used != 4 || u.InLine != 16 || u.Remaining != 0 {
		t.Errorf("Usage after a burst of 20: used %d, in line %d, remaining %d; want 4, 16, 0", u.Used, u.InLine, u.Remaining)
	}
	// The first task was admitted after start: its fifth window ends at
	// most 5.5 s from start, and at least 5.5 s from it less the time
	// taken since.
	if hi, lo := 5500*time.Millisecond, 5500*time.Millisecond-time.Since(start); u.NextFree > hi || u.NextFree < lo {
		t.Errorf("NextFree %v, want %v to %v", u.NextFree, lo, hi)
	}
}

// ExampleUsage is what a status page does: how much of its windows a
// tenant has used. It needs a Redis at localhost:6379, so it is compiled
// but not run by go test.
func ExampleUsage() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	p, err := policies.Load("examples/policies.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	usage, err := policies.Usage(ctx, rdb, throttle.DefaultPrefix, p, "sms:send", "acme")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	for _, u := range usage {
		fmt.Printf("%s %s: %d of %d used, %d in line, next free in %v\n", u.TaskType, u.Rule, u.Used, u.Limit, u.InLine, u.NextFree)
	}
}
