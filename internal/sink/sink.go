package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
)

// maxBody is the largest request body the sink reads: an SMS body is at
// most 1600 characters.
const maxBody = 64 << 10

// message is the body of an SMS webhook request (provider.Webhook).
type message struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	To     string `json:"to"`
	Body   string `json:"body"`
}

// Sink is the demo SMS provider: it accepts every well-formed message,
// keeps a receipt of each in memory, and reports on them. It is safe for
// concurrent use.
type Sink struct {
	window time.Duration    // of /report by default, and of each log line's counts
	logger *slog.Logger     // one line a message
	now    func() time.Time // the clock of arrivals

	mu       sync.Mutex
	receipts []Receipt              // in order of arrival
	times    map[string][]time.Time // tenant's arrivals, in order
	ids      map[string]int         // receipts of each id
}

// New returns a Sink whose reports and log lines count spans of length
// window (positive), logging one line a message to logger.
func New(window time.Duration, logger *slog.Logger) *Sink {
	return &Sink{window: window, logger: logger, now: time.Now, times: map[string][]time.Time{}, ids: map[string]int{}}
}

// Handler serves
//
//	POST /sms      the webhook: 200 and {"id": ...} for a well-formed message, 400 otherwise
//	GET  /report   the Report; ?window=500ms sets the length of its spans
func (s *Sink) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sms", s.receive)
	mux.HandleFunc("GET /report", s.report)
	return mux
}

// receive is the webhook: a JSON message with the Idempotency-Key header set
// to its id.
func (s *Sink) receive(w http.ResponseWriter, r *http.Request) {
	var m message
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&m)
	switch key := r.Header.Get("Idempotency-Key"); {
	case err != nil:
		err = fmt.Errorf("body: %v", err)
	case m.ID == "":
		err = errors.New("no id")
	case m.Tenant == "":
		err = errors.New("no tenant")
	case key != m.ID:
		err = fmt.Errorf("Idempotency-Key %q is not the id %q", key, m.ID)
	}
	if err != nil {
		s.logger.Warn("sms refused", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}

	s.mu.Lock()
	at := s.now() // under the lock, so receipts are in order of arrival
	s.receipts = append(s.receipts, Receipt{ID: m.ID, Tenant: m.Tenant, At: at})
	s.times[m.Tenant] = append(s.times[m.Tenant], at)
	s.ids[m.ID]++
	times := s.ids[m.ID]
	tenantInWindow := inLastWindow(s.times[m.Tenant], at, s.window)
	inWindow := 0
	for _, ts := range s.times {
		inWindow += inLastWindow(ts, at, s.window)
	}
	s.mu.Unlock()

	attrs := []any{"id", m.ID, "tenant", m.Tenant, "window", s.window.String(),
		"tenant_in_window", tenantInWindow, "in_window", inWindow}
	if times > 1 {
		s.logger.Warn("sms received again", append(attrs, "times", times)...)
	} else {
		s.logger.Info("sms received", attrs...)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"id": m.ID})
}

// Receipts returns a copy of every receipt so far, in order of arrival:
// for a caller that runs the sink in its own process and counts on the
// arrival times itself (the benchmark harness).
func (s *Sink) Receipts() []Receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.receipts)
}

// Unique returns how many distinct message ids have arrived so far.
func (s *Sink) Unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// report serves the Report of every receipt so far.
func (s *Sink) report(w http.ResponseWriter, r *http.Request) {
	window := s.window
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			http.Error(w, fmt.Sprintf("window %q: want a positive Go duration such as 1s or 500ms", v), http.StatusBadRequest)
			return
		}
		window = d
	}
	s.mu.Lock()
	receipts := slices.Clone(s.receipts)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(summarize(receipts, window))
}
