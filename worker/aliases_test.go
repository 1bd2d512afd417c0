package worker_test

import (
	"testing"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestDeprecatedAliases: the names that moved to packages policies,
// provider and throttle still compile in worker for one release, and name
// the same things (CHANGELOG.md, Deprecated).
//
//nolint:staticcheck // the deprecated names are what this test is about
func TestDeprecatedAliases(t *testing.T) {
	t.Parallel()
	var (
		_ *worker.PolicyFile     = (*policies.File)(nil)
		_ *worker.Policies       = (*policies.Policies)(nil)
		_ worker.Rule            = policies.Rule{}
		_ worker.Applied         = policies.Applied{}
		_ worker.PolicyOption    = policies.WithTaskTypes()
		_ worker.SMSProvider     = (*provider.Webhook)(nil)
		_ worker.EmailProvider   = (*provider.SMTP)(nil)
		_ *worker.Webhook        = (*provider.Webhook)(nil)
		_ *worker.SMTP           = (*provider.SMTP)(nil)
		_ worker.LogProvider     = provider.LogProvider{}
		_ *worker.ThrottledError = (*provider.ThrottledError)(nil)
		_ worker.FailureMode     = throttle.FailOpen
	)
	if worker.FailOpen != throttle.FailOpen || worker.FailClosed != throttle.FailClosed {
		t.Error("worker's FailureMode constants differ from throttle's")
	}
	if worker.ScopeTenant != policies.ScopeTenant || worker.ScopeGlobal != policies.ScopeGlobal {
		t.Error("worker's scopes differ from policies'")
	}
	p, err := worker.ParsePolicies("aliases", []byte("tasks: {}\n"))
	if err != nil || p.Summary() != "no rules: every task type runs unthrottled" {
		t.Errorf("worker.ParsePolicies = %v, %v", p, err)
	}
	if f := worker.StaticPolicies(p); f.Current() != p {
		t.Error("worker.StaticPolicies does not hold the policies given")
	}
	if !worker.IsThrottled(&provider.ThrottledError{}) || worker.Permanent(nil) != nil {
		t.Error("worker.IsThrottled or worker.Permanent differ from provider's")
	}
}
