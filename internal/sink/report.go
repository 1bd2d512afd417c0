package sink

import (
	"github.com/sluicehq/sluice/internal/arrivals"
	"slices"
	"time"
)

// Report is the body of GET /report: what the sink received, overall and
// per tenant. The overall figures are inlined at the top level.
//
// A provider counts arrivals, duplicates included, so MaxInWindow counts
// every receipt: a limit of 10 a second holds, as the provider saw it, when
// MaxInWindow with a Window of 1s is at most 10.
type Report struct {
	// Window is the length of the spans MaxInWindow looks at, as a Go
	// duration ("1s").
	Window string `json:"window"`

	Counts

	// Tenants holds the figures of each tenant that sent anything.
	Tenants map[string]Counts `json:"tenants"`
}

// Counts are the figures of a set of receipts: one tenant's, or all.
type Counts struct {
	// Received counts every accepted message, duplicates included.
	Received int `json:"received"`

	// Unique counts distinct message ids.
	Unique int `json:"unique"`

	// Duplicates is Received - Unique: messages whose id arrived before.
	Duplicates int `json:"duplicates"`

	// DuplicateIDs lists, sorted, the ids that arrived more than once.
	DuplicateIDs []string `json:"duplicate_ids,omitempty"`

	// MaxInWindow is the most receipts in any span of the report's Window:
	// in any half-open interval [t, t+Window). Receipts exactly Window apart
	// are never in the same span, as in the limiter, where an entry leaves
	// the window exactly Window after it entered.
	MaxInWindow int `json:"max_in_window"`

	// First and Last are the first and the last arrival; absent when
	// nothing arrived.
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
}

// Receipt is one message the sink accepted.
type Receipt struct {
	ID, Tenant string
	At         time.Time // arrival, as the sink's clock read it once the body was read
}

// summarize returns the report of receipts for spans of length window.
func summarize(receipts []Receipt, window time.Duration) Report {
	byTenant := map[string][]Receipt{}
	for _, r := range receipts {
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r)
	}
	rep := Report{Window: window.String(), Counts: count(receipts, window), Tenants: map[string]Counts{}}
	for tenant, rs := range byTenant {
		rep.Tenants[tenant] = count(rs, window)
	}
	return rep
}

// count returns the figures of receipts for spans of length w.
func count(receipts []Receipt, w time.Duration) Counts {
	var c Counts
	seen := map[string]int{}
	times := make([]time.Time, len(receipts))
	for i, r := range receipts {
		seen[r.ID]++
		if seen[r.ID] == 2 {
			c.DuplicateIDs = append(c.DuplicateIDs, r.ID)
		}
		times[i] = r.At
	}
	slices.Sort(c.DuplicateIDs)
	c.Received = len(receipts)
	c.Unique = len(seen)
	c.Duplicates = c.Received - c.Unique
	c.MaxInWindow = arrivals.MaxInWindow(times, w)
	if len(times) > 0 {
		c.First, c.Last = slices.MinFunc(times, time.Time.Compare), slices.MaxFunc(times, time.Time.Compare)
	}
	return c
}

// inLastWindow returns how many of times, sorted, fall in the span of
// length window that ends with at: (at-window, at].
func inLastWindow(times []time.Time, at time.Time, window time.Duration) int {
	i, _ := slices.BinarySearchFunc(times, at, func(t, at time.Time) int {
		if at.Sub(t) < window {
			return 1
		}
		return -1
	})
	return len(times) - i
}
