package worker

import (
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// The policies file, its rules, a tenant's usage and the HTTP rules moved
// to package policies. These names stay for one release so that existing
// callers compile unchanged; CHANGELOG.md lists what moved where.

// ScopeTenant is the scope of a rule with a window per tenant.
//
// Deprecated: use policies.ScopeTenant.
const ScopeTenant = policies.ScopeTenant

// ScopeGlobal is the scope of a rule with one window shared by all tenants.
//
// Deprecated: use policies.ScopeGlobal.
const ScopeGlobal = policies.ScopeGlobal

// DefaultMargin is the margin of windows when the policies file sets none.
//
// Deprecated: use policies.DefaultMargin.
const DefaultMargin = policies.DefaultMargin

// ErrPolicies is matched (errors.Is) by every error about a policies file.
//
// Deprecated: use policies.ErrInvalid.
var ErrPolicies = policies.ErrInvalid

// ErrSelection is matched by the errors of Windows, Usage, ResetPlan and
// ResetTenant about what they were asked for.
//
// Deprecated: use policies.ErrSelection.
var ErrSelection = policies.ErrSelection

// Rule is one limit of a task type, read from the policies file.
//
// Deprecated: use policies.Rule.
type Rule = policies.Rule

// Policies are the rules of each task type.
//
// Deprecated: use policies.Policies.
type Policies = policies.Policies

// Applied is one rule as it applies to a task.
//
// Deprecated: use policies.Applied.
type Applied = policies.Applied

// PolicyFile is a policies file that can be reloaded while workers run.
//
// Deprecated: use policies.File.
type PolicyFile = policies.File

// PolicyOption changes how a policies file is read.
//
// Deprecated: use policies.Option.
type PolicyOption = policies.Option

// RuleWindow is one rule of the policies as it applies to one tenant.
//
// Deprecated: use policies.RuleWindow.
type RuleWindow = policies.RuleWindow

// RuleUsage is how much of one window is used now.
//
// Deprecated: use policies.RuleUsage.
type RuleUsage = policies.RuleUsage

// ParsePolicies parses and validates a policies file.
//
// Deprecated: use policies.Parse.
var ParsePolicies = policies.Parse

// LoadPolicies reads and validates the policies file at a path.
//
// Deprecated: use policies.Load.
var LoadPolicies = policies.Load

// OpenPolicyFile loads a policies file that can be reloaded.
//
// Deprecated: use policies.Open.
var OpenPolicyFile = policies.Open

// StaticPolicies returns a PolicyFile that always holds the policies given.
//
// Deprecated: use policies.Static.
var StaticPolicies = policies.Static

// WithTaskTypes sets the task types that the program reading a policies
// file handles.
//
// Deprecated: use policies.WithTaskTypes.
var WithTaskTypes = policies.WithTaskTypes

// TaskTypes returns the task types that Handler sends and NewServer's
// workers handle: producer.TypeEmail and producer.TypeSMS.
//
// Deprecated: use producer.TaskTypes.
var TaskTypes = producer.TaskTypes

// HTTPRules returns the rules of a task type in a policies file as rules
// for package httplimit's HTTP middleware.
//
// Deprecated: use policies.HTTPRules.
var HTTPRules = policies.HTTPRules

// Windows returns the windows of the rules that apply to a tenant's tasks.
//
// Deprecated: use policies.Windows.
var Windows = policies.Windows

// Usage returns how much of each window of a tenant is used now.
//
// Deprecated: use policies.Usage.
var Usage = policies.Usage

// ResetPlan returns what ResetTenant would do, without doing it.
//
// Deprecated: use policies.ResetPlan.
var ResetPlan = policies.ResetPlan

// ResetTenant empties a tenant's windows.
//
// Deprecated: use policies.ResetTenant.
var ResetTenant = policies.ResetTenant
