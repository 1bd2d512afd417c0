package integration_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/redistest"
)

// capSink is an SMS provider that takes `hold` to answer a request and
// answers 429 to a request that finds `most` requests open already: a
// provider of a concurrency limit. It counts what it saw open at once.
type capSink struct {
	mu       sync.Mutex
	got      []receipt
	open     int
	peak     int
	most     int
	hold     time.Duration
	srv      *httptest.Server
	notified chan struct{}
}

func newCapSink(t testing.TB, most int, hold time.Duration) *capSink {
	s := &capSink{most: most, hold: hold, notified: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, tenant, ok := smsBody(w, r)
		if !ok {
			return
		}
		rec := receipt{ID: id, Tenant: tenant, Worker: strings.TrimPrefix(r.URL.Path, "/"), At: time.Now(), Status: http.StatusOK}
		s.mu.Lock()
		s.open++
		s.peak = max(s.peak, s.open)
		if s.open > s.most {
			rec.Status = http.StatusTooManyRequests
		}
		s.got = append(s.got, rec)
		i := len(s.got) - 1
		s.mu.Unlock()
		select {
		case s.notified <- struct{}{}:
		default:
		}
		select {
		case <-time.After(s.hold):
		case <-r.Context().Done(): // the worker went away
			s.mu.Lock()
			s.got[i].Cut = true
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.open--
		s.mu.Unlock()
		if rec.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many open requests", rec.Status)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *capSink) receipts() []receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// TestCapThroughCLIs is the cap and a killed worker, through the
// commands, everywhere it runs: see capThrough and everywhere.
func TestCapThroughCLIs(t *testing.T) { everywhere(t, capThrough) }

// backend is where a trial runs: its Redis, and how its tasks are laid
// out there.
type backend struct {
	url    string
	rdb    redis.UniversalClient
	prefix string
	queue  string // the trial's own queue, on one shard; "" under shards
	shards int
}

// workerArgs are the arguments that point a worker at b.
func (b backend) workerArgs() []string {
	if b.shards > 1 {
		return []string{"--redis", b.url, "--prefix", b.prefix, "--shards", fmt.Sprint(b.shards)}
	}
	return []string{"--redis", b.url, "--prefix", b.prefix, "--queues", b.queue + "=1"}
}

// enqueueSMS enqueues n SMS of tenant with cmd/enqueue (bin) in b: on
// the trial's queue, or, under shards, where the layout puts them.
func (b backend) enqueueSMS(t *testing.T, bin, tenant, id string, n int) {
	t.Helper()
	enqueueSMS(t, bin, b.url, b.queue, tenant, id, n, "--prefix", b.prefix)
}

// everywhere runs f in parallel on a single Redis and on a three-master
// cluster, each on one shard with a queue of its own, and on a
// three-master cluster (a replica each) of the test's own, in the layout
// of three shards that a cluster's workers choose: `admin layout
// --shards 3` writes it before the tasks are enqueued, as a deployment
// does with its workers stopped.
func everywhere(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Client(t)
		f(t, backend{url: redistest.URL(t), rdb: rdb, prefix: redistest.Prefix(t), queue: redistest.Queue(t, rdb)})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Cluster(t)
		f(t, backend{url: "redis+cluster://" + redistest.ClusterAddrs(t)[0], rdb: rdb, prefix: redistest.Prefix(t), queue: redistest.Queue(t, rdb)})
	})
	t.Run("cluster, three shards", func(t *testing.T) {
		t.Parallel()
		c := redistest.StartReplicatedClusterOf(t, 3)
		f(t, backend{url: c.URL(), rdb: c.Client(t), prefix: redistest.Prefix(t), shards: 3})
	})
}

// layOut writes b's layout with `admin layout`, no worker running, under
// policies (a file): nothing to do on one shard.
func (b backend) layOut(t *testing.T, policies string) {
	t.Helper()
	if b.shards <= 1 {
		return
	}
	adminBin, err := buildAdmin()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(adminBin, "layout", "--redis", b.url, "--prefix", b.prefix, "--policies", policies,
		"--shards", fmt.Sprint(b.shards), "--yes").CombinedOutput()
	if err != nil {
		t.Fatalf("admin layout --shards %d: %v\n%s", b.shards, err, out)
	}
}

// buildCLIs builds cmd/worker and cmd/enqueue, and returns the latter.
func buildCLIs(t *testing.T) string {
	t.Helper()
	if _, err := buildWorker(); err != nil {
		t.Fatal(err)
	}
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	return enqueueBin
}

// smsBody reads the SMS a webhook request carries, answering 400 to one
// it cannot read.
func smsBody(w http.ResponseWriter, r *http.Request) (id, tenant string, ok bool) {
	var body struct{ ID, Tenant string }
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil || body.ID == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return "", "", false
	}
	return body.ID, body.Tenant, true
}

// capThrough sends 300 SMS of 10 tenants, enqueued by cmd/enqueue, through
// 3 workers at --concurrency 20 to a provider that takes 200 ms a request
// and answers 429 past 4 open, under a rule of concurrency 4; 3 s after
// the first send one worker is SIGKILLed and started again. The provider
// never sees more than 4 open and answers no 429, every SMS arrives, and
// the first 280 arrive at 0.80 or more of 4 at a time.
func capThrough(t *testing.T, b backend) {
	const (
		cap     = 4
		hold    = 200 * time.Millisecond
		tenants = 10
		each    = 30
		first   = 280
	)
	enqueueBin := buildCLIs(t)
	sink := newCapSink(t, cap, hold)
	policies := writePolicies(t, fmt.Sprintf(`
tasks:
  sms:send:
    - { name: provider, scope: global, concurrency: %d }
`, cap))
	b.layOut(t, policies)
	for i := range tenants {
		tenant := fmt.Sprintf("t%02d", i)
		b.enqueueSMS(t, enqueueBin, tenant, tenant, each)
	}
	args := func(name string) []string {
		return append(b.workerArgs(), "--policies", policies, "--sms-webhook", sink.srv.URL+"/"+name,
			"--concurrency", "20", "--log-level", "warn")
	}
	procs := startWorkers(t, 1, args("victim")...)
	procs = append(procs, startWorkers(t, 2, args("other")...)...)
	waitFor(t, 30*time.Second, "the first send", sink.notified, func() bool { return len(sink.receipts()) > 0 })
	start := sink.receipts()[0].At
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	if err := procs[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[0].done
	killed := time.Now()
	procs = append(procs, startWorkers(t, 1, args("restarted")...)...)
	// The killed worker's tasks come back when asynq recovers them: 1 to
	// 2 minutes after the kill.
	delivered := func() int {
		ok := map[string]bool{}
		for _, r := range sink.receipts() {
			if r.Status == http.StatusOK && !r.Cut {
				ok[r.ID] = true
			}
		}
		return len(ok)
	}
	waitFor(t, 150*time.Second, "every SMS delivered", sink.notified, func() bool { return delivered() == tenants*each })
	stopWorkers(t, procs[1:]...)

	checkCapRun(t, sink, cap, first, killed)
}

// checkCapRun checks what sink saw of capThrough's run: never more than
// cap open, no 429, and the first `first` at 0.80 or more of cap at a time.
func checkCapRun(t *testing.T, sink *capSink, cap, first int, killed time.Time) {
	t.Helper()
	rs := sink.receipts()
	sink.mu.Lock()
	peak := sink.peak
	sink.mu.Unlock()
	if peak > cap {
		t.Errorf("the provider saw %d requests open at once, cap %d", peak, cap)
	}
	said429 := 0
	for _, r := range rs {
		if r.Status == http.StatusTooManyRequests {
			said429++
		}
	}
	if said429 > 0 {
		t.Errorf("the provider answered 429 to %d of %d requests, want none", said429, len(rs))
	}
	slices.SortFunc(rs, func(a, b receipt) int { return a.At.Compare(b.At) })
	if len(rs) < first {
		t.Fatalf("%d requests at the provider, want at least %d", len(rs), first)
	}
	took := rs[first-1].At.Add(sink.hold).Sub(rs[0].At)
	ideal := time.Duration(first/cap) * sink.hold
	used := float64(ideal) / float64(took)
	if used < 0.80 {
		t.Errorf("the first %d arrived in %v, %.3f of the ideal %v of %d at a time; want 0.80 or more", first, took.Round(time.Millisecond), used, ideal, cap)
	}
	cut := 0
	for _, r := range rs {
		if r.Cut {
			cut++
		}
	}
	t.Logf("%d requests, %d cut by the kill, peak %d open; the first %d in %v: %.3f of %d at a time; all delivered %v after the kill",
		len(rs), cut, peak, first, took.Round(time.Millisecond), used, cap, time.Since(killed).Round(100*time.Millisecond))
}

// rateSink is an SMS provider of a hidden rate: it accepts `rate`
// requests in any second and answers 429 (Retry-After: 1) beyond,
// counting only those it accepted.
type rateSink struct {
	mu       sync.Mutex
	got      []receipt
	accepted []time.Time
	rate     int
	srv      *httptest.Server
	notified chan struct{}
}

func newRateSink(t testing.TB, rate int) *rateSink {
	s := &rateSink{rate: rate, notified: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, tenant, ok := smsBody(w, r)
		if !ok {
			return
		}
		now := time.Now()
		rec := receipt{ID: id, Tenant: tenant, At: now, Status: http.StatusOK}
		s.mu.Lock()
		recent := 0
		for i := len(s.accepted) - 1; i >= 0 && now.Sub(s.accepted[i]) < time.Second; i-- {
			recent++
		}
		if recent >= s.rate {
			rec.Status = http.StatusTooManyRequests
		} else {
			s.accepted = append(s.accepted, now)
		}
		s.got = append(s.got, rec)
		s.mu.Unlock()
		select {
		case s.notified <- struct{}{}:
		default:
		}
		if rec.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "rate exceeded", rec.Status)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestAdaptiveThroughCLIs is the adaptive limit, through the
// commands, everywhere: see adaptiveThrough and everywhere.
func TestAdaptiveThroughCLIs(t *testing.T) { everywhere(t, adaptiveThrough) }

// adaptiveThrough sends 900 SMS of 10 tenants through 2 workers to a
// provider of a hidden 50 a second, under a rule of limit 200 a second,
// adaptive: at most 2% of the requests are answered 429, and once the
// limit has adapted (after its last fall, and the last hold a 429 asked
// for) the drain runs at 0.90 or more of the hidden rate. Over the whole
// drain, each hold costs its second: that figure is logged.
func adaptiveThrough(t *testing.T, b backend) {
	const (
		tenants = 10
		each    = 90
	)
	enqueueBin := buildCLIs(t)
	sink := newRateSink(t, 50)
	policies := writePolicies(t, `
tasks:
  sms:send:
    - { name: provider, scope: global, limit: 200, window: 1s, adaptive: true }
`)
	b.layOut(t, policies)
	for i := range tenants {
		tenant := fmt.Sprintf("t%02d", i)
		b.enqueueSMS(t, enqueueBin, tenant, tenant, each)
	}
	procs := startWorkers(t, 2, append(b.workerArgs(), "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--concurrency", "10", "--log-level", "info")...)
	accepted := func() int {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.accepted)
	}
	waitFor(t, 120*time.Second, "every SMS accepted", sink.notified, func() bool { return accepted() >= tenants*each })
	stopWorkers(t, procs...)

	// Over shards the limit in force is one, the pool's: no shard's group
	// keeps a state of its own.
	var states []string
	for _, k := range redistest.Keys(t, b.rdb, b.prefix) {
		if strings.Contains(k, "}a:") {
			states = append(states, k)
		}
	}
	if len(states) != 1 || !strings.Contains(states[0], "{limits}a:") {
		t.Errorf("the adaptive rule's states in Redis: %q, want one, the pool's ({limits})", states)
	}
	// Once adapted, at least a third of the drain (300 sends, 6 s at the
	// hidden rate): the last 429 may come late, its hold ending at +11.4 s
	// of 21 s on one shard and +12.9 s of 22 s on three in runs seen.
	checkAdaptiveRun(t, sink, procs, 3)
}

// checkAdaptiveRun checks what sink saw of adaptiveThrough's run through
// procs, the stretch once adapted at least 1/least of the drain.
func checkAdaptiveRun(t *testing.T, sink *rateSink, procs []*workerProc, least int) {
	t.Helper()
	hidden := sink.rate
	sink.mu.Lock()
	rs, ok := slices.Clone(sink.got), slices.Clone(sink.accepted)
	sink.mu.Unlock()
	said429 := 0
	for _, r := range rs {
		if r.Status == http.StatusTooManyRequests {
			said429++
		}
	}
	share := float64(said429) / float64(len(rs))
	if share > 0.02 {
		t.Errorf("%d of %d requests (%.3f) answered 429, want at most 0.02", said429, len(rs), share)
	}
	// The drain's rate once adapted: from the end of the last hold a 429
	// asked for (Retry-After: 1) and the last fall of the limit in force,
	// to the last send (its rises after are its climb back to the level
	// below the one that failed); and over all of it.
	from := rs[0].At
	for _, r := range rs {
		if r.Status == http.StatusTooManyRequests && r.At.Add(time.Second).After(from) {
			from = r.At.Add(time.Second)
		}
	}
	var moves []string
	for _, p := range procs {
		for _, l := range logLines(t, p.logs.String(), "an adaptive rule's limit in force moved") {
			moves = append(moves, fmt.Sprintf("%v→%v", l["from"], l["to"]))
			to, _ := l["to"].(float64)
			was, _ := l["from"].(float64)
			fell := to < was
			if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"])); err == nil && fell && at.After(from) {
				from = at
			}
		}
	}
	after := 0
	for _, at := range ok {
		if !at.Before(from) {
			after++
		}
	}
	end := ok[len(ok)-1]
	adapted := float64(after-1) / end.Sub(from).Seconds() / float64(hidden)
	whole := float64(len(ok)-1) / end.Sub(rs[0].At).Seconds() / float64(hidden)
	if after < len(ok)/least || adapted < 0.90 {
		t.Errorf("once adapted, %d accepted in %v: %.3f of the hidden rate, want 0.90 or more over at least 1/%d of the drain",
			after, end.Sub(from).Round(time.Millisecond), adapted, least)
	}
	perSecond := make([]int, int(end.Sub(rs[0].At)/time.Second)+1)
	for _, at := range ok {
		perSecond[int(at.Sub(rs[0].At)/time.Second)]++
	}
	t.Logf("%d requests, %d answered 429 (%.3f); %d accepted in %v, %.3f of the hidden %d a second; once adapted %.3f (from +%v); limit moves %v; accepted by second %v",
		len(rs), said429, share, len(ok), end.Sub(rs[0].At).Round(time.Millisecond), whole, hidden, adapted, from.Sub(rs[0].At).Round(time.Millisecond), moves, perSecond)
}

// TestRateAndCapThroughCLIs: a rate rule and a concurrency rule on one
// task type hold together, and the fair lines share them by weight:
// acme (weight 3) and globex (1) send 120 and 60 SMS through a global
// 30 a second and a cap of 3, to a provider that takes 100 ms and
// answers 429 past 3 open. The provider never sees more than 3 open nor
// more than 30 in a second, and while both wait acme gets about 3 in 4
// (2 in 3 over shards, where the cap's slots are whole).
func TestRateAndCapThroughCLIs(t *testing.T) {
	// Beside the other parallel tests: its bounds are shares and peaks,
	// which load does not move; the cap's and the adaptive trial's rates
	// run alone.
	t.Parallel()
	everywhere(t, rateAndCapThrough)
}

// rateAndCapThrough is TestRateAndCapThroughCLIs in b.
func rateAndCapThrough(t *testing.T, b backend) {
	enqueueBin := buildCLIs(t)
	sink := newCapSink(t, 3, 100*time.Millisecond)
	policies := writePolicies(t, `
weights: { acme: 3 }
tasks:
  sms:send:
    - { name: provider, scope: global, limit: 30, window: 1s }
    - { name: relay, scope: global, concurrency: 3 }
`)
	// Interleaved, so that neither flow runs dry in the lines while the
	// other's tasks arrive.
	b.layOut(t, policies)
	for i := range 4 {
		b.enqueueSMS(t, enqueueBin, "acme", fmt.Sprintf("acme-%d", i), 30)
		b.enqueueSMS(t, enqueueBin, "globex", fmt.Sprintf("globex-%d", i), 15)
	}
	procs := startWorkers(t, 2, append(b.workerArgs(), "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--concurrency", "10", "--log-level", "warn")...)
	waitFor(t, 60*time.Second, "every SMS at the provider", sink.notified, func() bool { return len(sink.receipts()) >= 180 })
	stopWorkers(t, procs...)

	rs := sink.receipts()
	slices.SortFunc(rs, func(a, b receipt) int { return a.At.Compare(b.At) })
	sink.mu.Lock()
	peak := sink.peak
	sink.mu.Unlock()
	var at []time.Time
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Status != http.StatusOK || seen[r.ID] {
			t.Errorf("send %s: status %d, again %v", r.ID, r.Status, seen[r.ID])
		}
		seen[r.ID] = true
		at = append(at, r.At)
	}
	if peak > 3 {
		t.Errorf("the provider saw %d open at once, cap 3", peak)
	}
	if n := arrivals.MaxInWindow(at, time.Second); n > 30 {
		t.Errorf("the provider saw %d in one second, limit 30", n)
	}
	acme := 0
	for _, r := range rs[60:140] {
		if r.Tenant == "acme" {
			acme++
		}
	}
	// acme's share while both wait: 3 in 4 by the weights; over shards
	// (acme and globex in two), the cap's 3 slots are leased whole, 2 and
	// 1 (docs/INFLIGHT.md, "Across shards"): 2 in 3.
	want := 0.75
	if b.shards > 1 {
		want = 2.0 / 3
	}
	if share := float64(acme) / 80; share < want-0.1 || share > want+0.1 {
		var order []byte
		for _, r := range rs {
			order = append(order, r.Tenant[0])
		}
		t.Errorf("sends 61 to 140: acme %d of 80 (%.2f), want %.2f ± 0.1; the sends' tenants in order: %s", acme, share, want, order)
	}
	t.Logf("%d sends, peak %d open, at most %d in a second; sends 61 to 140: acme %d of 80",
		len(rs), peak, arrivals.MaxInWindow(at, time.Second), acme)
}
