package status_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/status"
	"github.com/sluicehq/sluice/worker"
)

// TestOpsHandler: the endpoints and what they answer.
func TestOpsHandler(t *testing.T) {
	t.Parallel()
	if _, err := status.OpsHandler(status.OpsConfig{}); err == nil {
		t.Errorf("OpsHandler without a Gatherer: no error")
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := status.NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveProvider(worker.ProviderEvent{Provider: "sms"})
	var down error
	h, err := status.OpsHandler(status.OpsConfig{Gatherer: reg, Ready: func(ctx context.Context) error { return down }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	cases := []struct {
		path     string
		down     error
		wantCode int
		wantBody string
	}{
		{"/healthz", nil, 200, "ok\n"},
		{"/readyz", nil, 200, "ready\n"},
		{"/readyz", errors.New("redis: dial tcp: connection refused"), 503, "not ready: redis: dial tcp: connection refused\n"},
		{"/healthz", errors.New("redis down"), 200, "ok\n"},
		{"/nope", nil, 404, "404 page not found\n"},
	}
	for _, tc := range cases {
		down = tc.down
		if code, body := get(tc.path); code != tc.wantCode || body != tc.wantBody {
			t.Errorf("GET %s (ready: %v) = %d %q, want %d %q", tc.path, tc.down, code, body, tc.wantCode, tc.wantBody)
		}
	}
	code, body := get("/metrics")
	if code != 200 || !strings.Contains(body, `sluice_provider_responses_total{class="2xx",provider="sms"} 1`) {
		t.Errorf("GET /metrics = %d, without the provider's count:\n%s", code, body)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_provider_responses_total Providers' answers by provider (sms, email) and class: 2xx, 429, 4xx, 5xx (SMTP reply codes too), or error when none came.
# TYPE sluice_provider_responses_total counter
sluice_provider_responses_total{class="2xx",provider="sms"} 1
`), "sluice_provider_responses_total"); err != nil {
		t.Error(err)
	}
}
