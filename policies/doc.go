// Package policies reads Sluice's policies file: the rules that hold each
// task type to its quotas, per tenant or shared by all tenants, and what
// they mean for a tenant now.
//
//	f, err := policies.Open("policies.yaml") // reloaded with f.Reload, on SIGHUP
//	for _, a := range f.Current().For("sms:send", "acme") {
//		// a.Check is the limiter check of one rule for acme's SMS
//	}
//
// The workers' middleware (package worker), the HTTP middleware (package
// throttle/httplimit, through HTTPRules), the admin command and the status
// page all read the rules from here, so that a rule means the same limiter
// key and policy to each of them.
//
// The pieces, one file each:
//
//   - rule.go: a rule (Rule, its scopes, DefaultMargin).
//   - policies.go: the rules of each task type (Policies), and the limiter
//     checks of a task (Policies.For, Applied).
//   - parse.go, fields.go: the file's format and its checks (Parse, Load,
//     ErrInvalid); errors name the line, the rule and the field.
//   - tasktypes.go: the task types a file may name (WithTaskTypes).
//   - file.go: a file reloaded while workers run (File, Open, Static).
//   - httprules.go: a task type's rules for the HTTP middleware
//     (HTTPRules).
//   - windows.go, usage.go, reset.go: a tenant's windows (Windows), how
//     full they are now (Usage), and emptying them (ResetPlan,
//     ResetTenant). They read and reset windows only through the limiter's
//     API (throttle.Limiter.Usage and Reset), never its keys.
//
// A Policies value is never changed once built, and a File may be read and
// reloaded from any goroutine: everything is safe for concurrent use.
package policies
