package status_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/status"
	"github.com/sluicehq/sluice/throttle"
)

// TestState: a scrape says whether the worker is ready, and how many
// provider holds are in force in Redis and the longest time one has left;
// when the holds cannot be read it reports none, never a stale count.
func TestState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := throttle.NewLimiter(redistest.Client(t), throttle.WithPrefix(redistest.Prefix(t)))
	var down error
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(status.NewState(status.StateConfig{
		Ready: func(context.Context) error { return down },
		Holds: l.Holds,
	}))
	gauge := func(name string) (float64, bool) {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				return f.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	if n, _ := gauge("sluice_provider_holds"); n != 0 {
		t.Errorf("no hold: sluice_provider_holds %v, want 0", n)
	}
	if err := l.Hold(ctx, "provider/sms:send", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Hold(ctx, "provider/email:send", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, _ := gauge("sluice_provider_holds"); n != 2 {
		t.Errorf("two holds: sluice_provider_holds %v, want 2", n)
	}
	if left, _ := gauge("sluice_provider_hold_remaining_seconds"); left <= 290 || left > 300 {
		t.Errorf("the longest hold left %v s, want a little under 300", left)
	}
	if r, _ := gauge("sluice_ready"); r != 1 {
		t.Errorf("ready: sluice_ready %v, want 1", r)
	}
	down = errors.New("redis: down")
	if r, _ := gauge("sluice_ready"); r != 0 {
		t.Errorf("not ready: sluice_ready %v, want 0", r)
	}

	failing := prometheus.NewPedanticRegistry()
	failing.MustRegister(status.NewState(status.StateConfig{
		Holds: func(context.Context, int) ([]throttle.HeldKey, error) { return nil, errors.New("redis: down") },
	}))
	if n, err := testutil.GatherAndCount(failing, "sluice_provider_holds", "sluice_provider_hold_remaining_seconds"); err != nil || n != 0 {
		t.Errorf("holds unreadable: %d series, %v; want none", n, err)
	}
}

// TestStateWaiting: a scrape counts the tasks waiting in the fair lines by
// task type, and by tenant too with TenantLabel.
func TestStateWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := throttle.NewLimiter(redistest.Client(t), throttle.WithPrefix(redistest.Prefix(t)))
	lines := l.Lines(throttle.LinesConfig{})
	rule := throttle.LineCheck{Check: throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}
	for i, tenant := range []string{"acme", "acme", "acme", "globex", "globex"} {
		if _, err := lines.Arrive(ctx, throttle.Arrival{Class: "sms:send", Tenant: tenant, Queue: "q", ID: fmt.Sprint(i),
			Checks: []throttle.LineCheck{rule}}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(status.NewState(status.StateConfig{Lines: []*throttle.Lines{lines}, TenantLabel: true}))
	want := `
# HELP sluice_tenant_waiting_tasks sluice_waiting_tasks by tenant too; only with --metrics-tenants.
# TYPE sluice_tenant_waiting_tasks gauge
sluice_tenant_waiting_tasks{task_type="sms:send",tenant="acme"} 2
sluice_tenant_waiting_tasks{task_type="sms:send",tenant="globex"} 2
# HELP sluice_waiting_tasks Tasks waiting in the fair lines for their turn, by task type.
# TYPE sluice_waiting_tasks gauge
sluice_waiting_tasks{task_type="sms:send"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_waiting_tasks", "sluice_tenant_waiting_tasks"); err != nil {
		t.Error(err)
	}
}
