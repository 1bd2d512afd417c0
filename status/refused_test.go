package status_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/status"
)

// TestPageRefused: what Redis refused the worker lately (PageConfig.Refused)
// is an alert at the top of the page, escaped; without it, no alert.
func TestPageRefused(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse(t.Name(), []byte(perHourAndAccount))
	if err != nil {
		t.Fatal(err)
	}
	for _, refused := range []error{nil, errors.New("redis refuses Sluice's calls: key <b>k</b> is a string, not a zset")} {
		h, err := status.Page(redistest.Client(t), status.PageConfig{Policies: policies.Static(p), Activity: status.NewActivity(nil),
			Refused: func() error { return refused }})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		body := rec.Body.String()
		alert := strings.Contains(body, `<p class="alert" id="refused">`)
		switch {
		case refused == nil && alert:
			t.Errorf("an alert of refusals where there were none:\n%s", body)
		case refused != nil && !strings.Contains(body, `<p class="alert" id="refused">redis refuses Sluice&#39;s calls: key &lt;b&gt;k&lt;/b&gt; is a string`):
			t.Errorf("no alert naming the refusal, escaped:\n%s", body)
		}
	}
}
