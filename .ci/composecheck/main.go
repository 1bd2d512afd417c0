// Command composecheck is the verdict of .ci/compose-check.sh: it waits
// until the sink of the Compose stack has received every SMS of the burst
// file, then checks, from the sink's GET /report, that each arrived once,
// for the right tenant, and that no rule of the policies file was exceeded
// as the provider saw it: for every sms:send rule, the most messages in any
// span of the rule's plain window (without the workers' margin, which only
// makes the check stricter) is at most the rule's limit, per tenant for a
// tenant rule (with its override), in all for a global rule.
//
//	go run ./.ci/composecheck --report http://127.0.0.1:PORT/report \
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
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

func main() {
	reportURL := flag.String("report", "", "`URL` of the sink's GET /report")
	policiesPath := flag.String("policies", "examples/policies.yaml", "the workers' policies `file`")
	burstPath := flag.String("burst", "examples/burst.jsonl", "the bulk `file` the producer enqueued")
	timeout := flag.Duration("timeout", 90*time.Second, "how long to wait for every message")
	settle := flag.Duration("settle", 2*time.Second, "how long to wait, once every message arrived, for duplicates")
	flag.Parse()
	if *reportURL == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "composecheck: usage: composecheck --report URL [--policies FILE] [--burst FILE] [--timeout D]")
		os.Exit(2)
	}
	want, err := burst(*burstPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(2)
	}
	p, err := policies.Load(*policiesPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(2)
	}
	rules := p.Rules(producer.TypeSMS)
	if len(rules) == 0 {
		fmt.Fprintf(os.Stderr, "composecheck: %s has no %s rules: nothing to check\n", *policiesPath, producer.TypeSMS)
		os.Exit(2)
	}
	total := 0
	for _, n := range want {
		total += n
	}

	ctx := context.Background()
	start := time.Now()
	for {
		r, err := get(ctx, *reportURL, "")
		if err == nil && r.Unique >= total {
			fmt.Printf("composecheck: the sink has all %d messages after %v\n", total, time.Since(start).Round(100*time.Millisecond))
			break
		}
		if time.Since(start) > *timeout {
			if err != nil {
				fail("after %v the sink's report is unreadable: %v", *timeout, err)
			}
			fail("after %v the sink has %d of the %d messages of %s", *timeout, r.Unique, total, *burstPath)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(*settle)

	var failures []string
	failf := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	// The report for each window the rules have, from the same receipts:
	// nothing more arrives once every message has.
	reports := map[time.Duration]sink.Report{}
	for _, rule := range rules {
		w := rule.Policy.Window
		if _, ok := reports[w]; ok {
			continue
		}
		r, err := get(ctx, *reportURL, w.String())
		if err != nil {
			fail("%v", err)
		}
		reports[w] = r
	}
	r := reports[rules[0].Policy.Window]

	if r.Received != total || r.Unique != total || r.Duplicates != 0 {
		failf("received %d messages, %d distinct, %d duplicates %v; want each of the %d once", r.Received, r.Unique, r.Duplicates, r.DuplicateIDs, total)
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
			failf("tenant %s: received %d (%d duplicates), want %d once each", t, got.Received, got.Duplicates, want[t])
		}
	}

	fmt.Printf("%-10s %8s %10s  %s\n", "tenant", "received", "duplicates", "most in one window / limit, per rule")
	line := func(name string, c sink.Counts, scope string, limitOf func(policies.Rule) int) {
		fmt.Printf("%-10s %8d %10d ", name, c.Received, c.Duplicates)
		for _, rule := range rules {
			if rule.Scope != scope {
				continue
			}
			most := reports[rule.Policy.Window].Counts
			if scope == policies.ScopeTenant {
				most = reports[rule.Policy.Window].Tenants[name]
			}
			limit := limitOf(rule)
			fmt.Printf(" %s %d/%d in %v", rule.Name, most.MaxInWindow, limit, rule.Policy.Window)
			if most.MaxInWindow > limit {
				failf("%s: rule %s: %d messages in one span of %v, limit %d", name, rule.Name, most.MaxInWindow, rule.Policy.Window, limit)
			}
		}
		fmt.Println()
	}
	for _, t := range tenants {
		line(t, r.Tenants[t], policies.ScopeTenant, func(rule policies.Rule) int {
			if o, ok := rule.Tenants[t]; ok {
				return o.Limit
			}
			return rule.Policy.Limit
		})
	}
	line("(all)", r.Counts, policies.ScopeGlobal, func(rule policies.Rule) int { return rule.Policy.Limit })
	if r.Received > 0 {
		fmt.Printf("first to last arrival: %v\n", r.Last.Sub(r.First).Round(time.Millisecond))
	}

	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, "composecheck: FAIL:", f)
		}
		os.Exit(1)
	}
	fmt.Println("composecheck: ok: every message once, no limit exceeded as the sink saw it")
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

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "composecheck: FAIL: "+format+"\n", args...)
	os.Exit(1)
}
