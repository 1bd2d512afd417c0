// Command composecheck is the verdict of .ci/compose-check.sh: it waits
// until the sink of the Compose stack has received every SMS of the burst
// file, then checks, from the sink's GET /report, that each arrived once,
// for the right tenant, and that no rule of the policies file was exceeded
// as the provider saw it: for every sms:send rule, the most messages in any
// span of the rule's plain window (without the workers' margin, which only
// makes the check stricter) is at most the rule's limit, per tenant for a
// tenant rule (with its override), in all for a global rule. Given the
// workers' operations addresses (--ops, once each), it also checks that
// each worker is ready and that its metrics counted the burst's decisions.
//
//	go run ./internal/composecheck --report http://127.0.0.1:PORT/report \
//	  --policies examples/policies.yaml --burst examples/burst.jsonl
//
// Exit status 0 when every check passes, 1 when one fails, 2 for bad flags
// or files.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// flags are the command line of composecheck.
type flags struct {
	reportURL, policiesPath, burstPath string
	timeout, settle                    time.Duration
	ops                                []string // the workers' operations addresses, host:port
}

func main() {
	f := parseFlags()
	want, rules, err := load(f.policiesPath, f.burstPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(2)
	}
	total := 0
	for _, n := range want {
		total += n
	}
	ctx := context.Background()
	waitForAll(ctx, f, total)
	time.Sleep(f.settle)

	c := &checker{rules: rules, reports: windowReports(ctx, f.reportURL, rules)}
	c.check(want, total)
	for _, addr := range f.ops {
		c.checkOps(ctx, addr)
	}
	if len(c.failures) > 0 {
		for _, msg := range c.failures {
			fmt.Fprintln(os.Stderr, "composecheck: FAIL:", msg)
		}
		os.Exit(1)
	}
	fmt.Println("composecheck: ok: every message once, no limit exceeded as the sink saw it")
}

// parseFlags returns the command line's flags, and exits with status 2
// when the report URL is missing or arguments are left over.
func parseFlags() flags {
	var f flags
	flag.StringVar(&f.reportURL, "report", "", "`URL` of the sink's GET /report")
	flag.StringVar(&f.policiesPath, "policies", "examples/policies.yaml", "the workers' policies `file`")
	flag.StringVar(&f.burstPath, "burst", "examples/burst.jsonl", "the bulk `file` the producer enqueued")
	flag.DurationVar(&f.timeout, "timeout", 90*time.Second, "how long to wait for every message")
	flag.DurationVar(&f.settle, "settle", 2*time.Second, "how long to wait, once every message arrived, for duplicates")
	flag.Func("ops", "a worker's operations `address` (host:port), once per worker", func(s string) error {
		f.ops = append(f.ops, s)
		return nil
	})
	flag.Parse()
	if f.reportURL == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "composecheck: usage: composecheck --report URL [--policies FILE] [--burst FILE] [--timeout D]")
		os.Exit(2)
	}
	return f
}

// load returns how many SMS of the bulk file at burstPath each tenant
// has, and the sms:send rules of the policies file at policiesPath; it
// fails when there are none.
func load(policiesPath, burstPath string) (map[string]int, []policies.Rule, error) {
	want, err := burst(burstPath)
	if err != nil {
		return nil, nil, err
	}
	p, err := policies.Load(policiesPath)
	if err != nil {
		return nil, nil, err
	}
	rules := p.Rules(producer.TypeSMS)
	if len(rules) == 0 {
		return nil, nil, fmt.Errorf("%s has no %s rules: nothing to check", policiesPath, producer.TypeSMS)
	}
	return want, rules, nil
}

// waitForAll polls the sink's report until it has total distinct
// messages, and fails the check when f.timeout passes first.
func waitForAll(ctx context.Context, f flags, total int) {
	start := time.Now()
	for {
		r, err := get(ctx, f.reportURL, "")
		if err == nil && r.Unique >= total {
			fmt.Printf("composecheck: the sink has all %d messages after %v\n", total, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > f.timeout {
			if err != nil {
				fail("after %v the sink's report is unreadable: %v", f.timeout, err)
			}
			fail("after %v the sink has %d of the %d messages of %s", f.timeout, r.Unique, total, f.burstPath)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// windowReports returns the sink's report for each window the rules
// have, from the same receipts: nothing more arrives once every message
// has. It fails the check when one is unreadable.
func windowReports(ctx context.Context, url string, rules []policies.Rule) map[time.Duration]sink.Report {
	reports := map[time.Duration]sink.Report{}
	for _, rule := range rules {
		w := rule.Policy.Window
		if _, ok := reports[w]; ok {
			continue
		}
		r, err := get(ctx, url, w.String())
		if err != nil {
			fail("%v", err)
		}
		reports[w] = r
	}
	return reports
}

// checker compares the sink's reports with the burst and the rules, and
// collects what fails.
type checker struct {
	rules    []policies.Rule
	reports  map[time.Duration]sink.Report // by the rules' windows
	failures []string
}

// failf records a failed check.
func (c *checker) failf(format string, args ...any) {
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// check checks that each of the total messages of want arrived once, for
// the right tenant, and prints a line a tenant and one for all with the
// most messages in one window of each rule, checked against its limit.
func (c *checker) check(want map[string]int, total int) {
	r := c.reports[c.rules[0].Policy.Window]
	if r.Received != total || r.Unique != total || r.Duplicates != 0 {
		c.failf("received %d messages, %d distinct, %d duplicates %v; want each of the %d once", r.Received, r.Unique, r.Duplicates, r.DuplicateIDs, total)
	}
	names := map[string]bool{}
	for t := range want {
		names[t] = true
	}
	for t := range r.Tenants {
		names[t] = true
	}
	tenants := slices.Sorted(maps.Keys(names))
	for _, t := range tenants {
		if got := r.Tenants[t]; got.Received != want[t] || got.Duplicates != 0 {
			c.failf("tenant %s: received %d (%d duplicates), want %d once each", t, got.Received, got.Duplicates, want[t])
		}
	}

	fmt.Printf("%-10s %8s %10s  %s\n", "tenant", "received", "duplicates", "most in one window / limit, per rule")
	for _, t := range tenants {
		c.line(t, r.Tenants[t], policies.ScopeTenant, func(rule policies.Rule) int {
			if o, ok := rule.Tenants[t]; ok {
				return o.Limit
			}
			return rule.Policy.Limit
		})
	}
	c.line("(all)", r.Counts, policies.ScopeGlobal, func(rule policies.Rule) int { return rule.Policy.Limit })
	if r.Received > 0 {
		fmt.Printf("first to last arrival: %v\n", r.Last.Sub(r.First).Round(time.Millisecond))
	}
}

// line prints the counts of name, a tenant or "(all)", and for each rule
// of scope the most messages in one of its windows against its limit,
// limitOf(rule), recording a failure where the most is over it.
func (c *checker) line(name string, counts sink.Counts, scope string, limitOf func(policies.Rule) int) {
	fmt.Printf("%-10s %8d %10d ", name, counts.Received, counts.Duplicates)
	for _, rule := range c.rules {
		if rule.Scope != scope {
			continue
		}
		most := c.reports[rule.Policy.Window].Counts
		if scope == policies.ScopeTenant {
			most = c.reports[rule.Policy.Window].Tenants[name]
		}
		limit := limitOf(rule)
		fmt.Printf(" %s %d/%d in %v", rule.Name, most.MaxInWindow, limit, rule.Policy.Window)
		if most.MaxInWindow > limit {
			c.failf("%s: rule %s: %d messages in one span of %v, limit %d", name, rule.Name, most.MaxInWindow, rule.Policy.Window, limit)
		}
	}
	fmt.Println()
}

// burst returns how many SMS of the bulk file at path each tenant has.
func burst(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]int{}
	err = producer.ReadBulk(f, func(line int, task *asynq.Task, _ []asynq.Option, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if task.Type() == producer.TypeSMS {
			want[task.Headers()[producer.HeaderTenant]]++
		}
		return nil
	})
	if err == nil && len(want) == 0 {
		err = fmt.Errorf("%s: no SMS", path)
	}
	return want, err
}

// get returns the sink's report for window ("" for the sink's own).
func get(ctx context.Context, url, window string) (sink.Report, error) {
	var r sink.Report
	if window != "" {
		url += "?window=" + window
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("GET %s: %v", url, err)
	}
	return r, nil
}

// fail reports a failed check that stops the others, and exits with
// status 1.
func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "composecheck: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// checkOps checks the worker whose operations server is at addr: /readyz
// answers ready, and /metrics says so and has counted decisions.
func (c *checker) checkOps(ctx context.Context, addr string) {
	body := func(path string) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return ""
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			c.failures = append(c.failures, fmt.Sprintf("worker at %s: GET %s: %v", addr, path, err))
			return ""
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return string(data)
	}
	if got := body("/readyz"); got != "ready\n" {
		c.failures = append(c.failures, fmt.Sprintf("worker at %s: /readyz answered %q, want ready", addr, got))
	}
	metrics := body("/metrics")
	for _, want := range []string{"\nsluice_ready 1\n", "\nsluice_decisions_total{"} {
		if !strings.Contains(metrics, want) {
			c.failures = append(c.failures, fmt.Sprintf("worker at %s: /metrics lacks %q", addr, strings.TrimSpace(want)))
		}
	}
}
