// Command admin answers an operator's questions about a running Sluice:
// how much of each window a tenant has used, which tasks wait throttled in
// asynq's retry sets, whether a policies file is valid; and it resets a
// tenant's windows, or a global one.
//
//	admin usage     --redis URL --policies FILE --tenant T [--type sms:send] [--prefix P] [--json]
//	admin reset     --redis URL --policies FILE --tenant T [--type X] [--rule R] [--prefix P] [--yes]
//	admin reset-global --redis URL --policies FILE --type X --rule R [--prefix P] [--yes]
//	admin reset-lines --redis URL --type X [--prefix P] [--yes]
//	admin validate  FILE
//	admin throttled --redis URL [--queue Q ...] [--limit N] [--json]
//	admin holds     --redis URL [--prefix P]
//	admin unhold    --redis URL --key provider/TYPE[/TENANT] [--prefix P]
//	admin layout    --redis URL [--shards N --policies FILE [--yes]] [--forget-drained] [--prefix P]
//
// --redis names one server (redis://), a Redis Cluster (redis+cluster://)
// or a master through Sentinel (redis+sentinel://); see redisconn.Client.
// The logic is in packages policies (Usage, ResetTenant, ResetGlobal, Parse) and worker
// (RetrySet), which a status page calls too; this command parses flags and
// prints.
//
// Exit status: 0 on success; 1 when Redis or a file could not be used, or
// a policies file is invalid; 2 for a usage error: a bad flag or --redis
// URL, an argument the command does not take (see cli.Parse), a tenant id
// that is not valid, a task type, rule or queue that does not exist, a
// reset without --yes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/policies"
)

const synopsis = `
usage: admin usage     --redis URL --policies FILE --tenant T [--type TYPE] [--prefix P] [--json]
       admin reset     --redis URL --policies FILE --tenant T [--type TYPE] [--rule R] [--prefix P] [--yes]
       admin reset-global --redis URL --policies FILE --type TYPE --rule R [--prefix P] [--yes]
       admin reset-lines --redis URL --type TYPE [--prefix P] [--yes]
       admin validate  FILE
       admin throttled --redis URL [--queue Q ...] [--limit N] [--json]
       admin holds     --redis URL [--prefix P]
       admin unhold    --redis URL --key provider/TYPE[/TENANT] [--prefix P]
       admin layout    --redis URL [--shards N --policies FILE [--yes]] [--forget-drained] [--prefix P]

usage      how much of each window tenant T has used: every rule of each task
           type (or TYPE) that applies to T, its own windows and the global
           ones, read without changing them.
reset      empties T's own windows (rules of scope tenant; never a global
           window, shared by every tenant). Without --yes it only says what
           it would reset, and exits 2.
reset-global
           empties the window of global rule R of TYPE (every shard's log,
           never their leases), whatever its key holds (a damaged key):
           every tenant's sends in it are forgotten, so up to a window's
           worth more may go at once. Without --yes it only says what it
           would reset, and exits 2.
reset-lines
           empties the fair lines of TYPE (every shard's), whatever their
           keys hold (a damaged key), and moves its parked tasks to their
           queues' pending lists. The tenants' order, the learned lead and
           the unclaimed grants are lost. Without --yes it only says what it
           would reset, and exits 2.
validate   checks a policies file ("-" for standard input) and prints what
           it enforces; no Redis needed.
throttled  lists the tasks that wait throttled in asynq's retry sets, and
           counts them and the failed ones, per queue.
holds      lists the providers' holds in force (a 429's Retry-After, cut to
           the workers' --max-provider-hold) and the time each has left.
unhold     ends a hold at once; the workers send again within 250 ms. A
           hold that does not exist is not an error.
layout     shows the layout (the shards of each task type's queue and
           windows) and the old layouts still served. With --shards N,
           and every worker stopped, changes it: each tenant's windows
           move to its new shard, the global windows to the pool, the old
           lines' tasks are run; workers started after it serve the old
           queues too. Without --yes it only says what it would do, and
           exits 2. --forget-drained stops serving the old layouts whose
           queues are empty.

Give --policies and --prefix as the workers have them: usage and reset
read the windows the workers write. "admin COMMAND --help" lists a
command's flags; every flag with a variable shown can also be set from the
environment.

Exit status: 0 on success; 1 when Redis or a file could not be used, or a
policies file is invalid; 2 for a usage error (a bad flag or --redis URL,
an argument where none is taken, an invalid tenant id, a task type, rule
or queue that does not exist, reset without --yes).`

var env = map[string]string{
	"redis":    "REDIS_URL",
	"policies": "SLUICE_POLICIES",
	"prefix":   "SLUICE_PREFIX",
}

func main() {
	cli.Main(func(ctx context.Context, args []string) int { return run(ctx, args, os.Stdin, os.Stdout, os.Stderr) })
}

// run runs the command with args, without the program name, and returns
// its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Subcommands{
		Program:  "admin",
		Noun:     "command",
		Synopsis: synopsis,
		Commands: []cli.Subcommand{
			{Name: "usage", Run: func(args []string) int { return runUsage(ctx, args, stdout, stderr) }},
			{Name: "reset", Run: func(args []string) int { return runReset(ctx, args, stdout, stderr) }},
			{Name: "reset-global", Run: func(args []string) int { return runResetGlobal(ctx, args, stdout, stderr) }},
			{Name: "reset-lines", Run: func(args []string) int { return runResetLines(ctx, args, stdout, stderr) }},
			{Name: "validate", Run: func(args []string) int { return runValidate(ctx, args, stdin, stdout, stderr) }},
			{Name: "throttled", Run: func(args []string) int { return runThrottled(ctx, args, stdout, stderr) }},
			{Name: "holds", Run: func(args []string) int { return runHolds(ctx, args, stdout, stderr) }},
			{Name: "unhold", Run: func(args []string) int { return runUnhold(ctx, args, stdout, stderr) }},
			{Name: "layout", Run: func(args []string) int { return runLayout(ctx, args, stdout, stderr) }},
		},
	}.Run(args, stdout, stderr)
}

// parseFlags parses the flags of an admin command (see cli.ParseFlags),
// with the variables of env and the help of synopsis.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, names ...string) (code int, ok bool) {
	return cli.ParseFlags(fs, args, env, synopsis, stdout, stderr, names...)
}

// failf prints a one-line error of command name on stderr and returns
// code.
func failf(stderr io.Writer, code int, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", name, fmt.Sprintf(format, args...))
	return code
}

// printJSON writes v to stdout as indented JSON and returns 0, or names
// the error on stderr and returns 1.
func printJSON(stdout, stderr io.Writer, name string, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	return 0
}

// selectionCode is the exit status for an error of package policies'
// selection functions: 2 when it is about what was asked for
// (policies.ErrSelection), 1 when Redis failed.
func selectionCode(err error) int {
	if errors.Is(err, policies.ErrSelection) {
		return 2
	}
	return 1
}

// windowFlags are the flags of the commands that read or reset a tenant's
// windows.
type windowFlags struct {
	redisFlags
	policies, tenant, taskType *string
}

// addWindowFlags defines the flags of windowFlags on fs.
func addWindowFlags(fs *flag.FlagSet) windowFlags {
	return windowFlags{
		redisFlags: addRedisFlags(fs),
		policies:   fs.String("policies", "", "the workers' policies `file` (YAML)"),
		tenant:     fs.String("tenant", "", "tenant id (required)"),
		taskType:   fs.String("type", "", "task `type`, such as sms:send; default every type of the policies file"),
	}
}

// load checks the flags that name what to read, and loads the policies
// file. ok is false when the command should return code, the error
// printed.
func (f windowFlags) load(name string, stderr io.Writer) (p *policies.Policies, code int, ok bool) {
	switch {
	case *f.tenant == "":
		return nil, failf(stderr, 2, name, "no tenant: set --tenant"), false
	case *f.policies == "":
		return nil, failf(stderr, 2, name, "no policies: set --policies or SLUICE_POLICIES to the workers' file"), false
	}
	if code, ok := f.checkPrefix(name, stderr); !ok {
		return nil, code, false
	}
	p, err := policies.Load(*f.policies)
	if err != nil {
		return nil, failf(stderr, 1, name, "%v", err), false
	}
	return p, 0, true
}

// formatDuration writes d as Go does, without the zero units at its end:
// "1s", "1m30s", "24h", "150ms".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
