package demo

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

// demoProvider is the demo's SMS provider: it sends nothing, takes every
// message, and records when it received each. It is safe for concurrent
// use.
type demoProvider struct {
	mu       sync.Mutex
	got      []receipt
	received chan struct{} // signalled, without blocking, after each message
}

var _ provider.SMSProvider = (*demoProvider)(nil)

func newDemoProvider() *demoProvider { return &demoProvider{received: make(chan struct{}, 1)} }

// SendSMS records m.
func (p *demoProvider) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
	p.mu.Lock()
	p.got = append(p.got, receipt{ID: m.ID, Tenant: m.Tenant, At: time.Now()})
	p.mu.Unlock()
	select {
	case p.received <- struct{}{}:
	default:
	}
	return nil
}

// receipts returns what the provider received so far, in order.
func (p *demoProvider) receipts() []receipt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}
