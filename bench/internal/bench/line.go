package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// DefaultLineWaiting are the numbers of tasks waiting ahead at which the
// line section measures a denial.
var DefaultLineWaiting = []int{10, 100, 1_000, 10_000}

// TargetLineDenyOverAdmit is the most Redis time a denial in line mode may
// cost, over an admission's, whatever the number waiting (the issue "The
// cost of a decision").
const TargetLineDenyOverAdmit = 2.0

const (
	// lineSamples is how many denials, and as many admissions, the line
	// section measures at each depth, one call at a time.
	lineSamples = 50

	// lineTenants is how many tenants the waiting tasks spread over, at
	// most: fewer when fewer tasks wait, so that every one waits.
	lineTenants = 50
)

// The rules of the line section: a tenant's own and a shared provider
// rule, a minute long so that no place passes during the measurement. The
// admissions run on rules of their own that never fill.
var (
	lineTenantPolicy   = throttle.Policy{Limit: 20, Window: time.Minute}
	lineProviderPolicy = throttle.Policy{Limit: 100, Window: time.Minute}
	lineRoomyPolicy    = throttle.Policy{Limit: 100_000, Window: time.Minute}
)

// LineResult is the line section: the Redis time of a denial with many
// tasks waiting ahead, against an admission's, in both lines.
type LineResult struct {
	Samples int    `json:"samples"` // denials, and admissions, measured at each depth
	Tenants int    `json:"tenants"` // the waiting tasks spread over
	Rules   string `json:"rules"`   // the rules of a task, described

	Rows []LineRow `json:"rows"`

	// Target is TargetLineDenyOverAdmit; TargetMet says whether every
	// row's ratios of a waiting tenant's denial, in both lines, are within
	// it. A newcomer's denial, once a tenant and backlog, is reported
	// beside them.
	Target    float64 `json:"target"`
	TargetMet bool    `json:"target_met"`
}

// LineRow is one depth: the median Redis time of one call, µs (INFO
// commandstats around each call), in the fair lines (throttle.Lines.Arrive:
// a denied task is parked) and in the limiter's own line, first come first
// served (throttle.Limiter.AllowInLine: a denied task is given a place).
type LineRow struct {
	Waiting int `json:"waiting"` // tasks waiting ahead of the first denial measured; each denial adds one

	FairDenyUs      float64 `json:"fair_deny_us"`
	FairAdmitUs     float64 `json:"fair_admit_us"`
	FairDenyOverAdm float64 `json:"fair_deny_over_admit"`

	// FairNewcomerUs is a denial in the fair lines of a task whose tenant
	// did not wait: its flow starts waiting, and the step runs.
	FairNewcomerUs      float64 `json:"fair_newcomer_us"`
	FairNewcomerOverAdm float64 `json:"fair_newcomer_over_admit"`

	FCFSDenyUs      float64 `json:"fcfs_deny_us"`
	FCFSAdmitUs     float64 `json:"fcfs_admit_us"`
	FCFSDenyOverAdm float64 `json:"fcfs_deny_over_admit"`

	// The part of each call's Redis time spent in the commands its script
	// ran (INFO commandstats of every command but EVALSHA and INFO), µs,
	// the median; and for the first come, first served line the rest too
	// (the script's own: its Lua, its arguments and replies made Lua
	// values and back), the median of each call's total less its
	// commands.
	FairDenyCmdUs  float64 `json:"fair_deny_commands_us"`
	FairAdmitCmdUs float64 `json:"fair_admit_commands_us"`
	FCFSDenyCmdUs  float64 `json:"fcfs_deny_commands_us"`
	FCFSAdmitCmdUs float64 `json:"fcfs_admit_commands_us"`
	FCFSDenyLuaUs  float64 `json:"fcfs_deny_script_us"`
	FCFSAdmitLuaUs float64 `json:"fcfs_admit_script_us"`

	// The commands each call's script ran (INFO commandstats' calls of
	// every command but EVALSHA and INFO), the median.
	FairDenyCalls  float64 `json:"fair_deny_commands"`
	FairAdmitCalls float64 `json:"fair_admit_commands"`
	FCFSDenyCalls  float64 `json:"fcfs_deny_commands"`
	FCFSAdmitCalls float64 `json:"fcfs_admit_commands"`
}

// lineSetup is one depth's limiters and the checks of a task.
type lineSetup struct {
	limiter *throttle.Limiter
	lines   *throttle.Lines
	class   string
}

// checks are the rules of a task of tenant: its own rule and the provider's,
// full ones when roomy is false.
func (s lineSetup) checks(tenant string, roomy bool) []throttle.LineCheck {
	own, shared, keys := lineTenantPolicy, lineProviderPolicy, ""
	if roomy {
		own, shared, keys = lineRoomyPolicy, lineRoomyPolicy, "roomy/"
	}
	return []throttle.LineCheck{
		{Check: throttle.Check{Key: keys + "tenant/" + tenant, Policy: own, Cost: 1}},
		{Check: throttle.Check{Key: keys + "provider", Policy: shared, Cost: 1}, Shared: true},
	}
}

// runLine measures, at each depth of cfg.LineWaiting, a denial against an
// admission in the fair lines and in the limiter's own line.
func runLine(ctx context.Context, r *runner, res *Results) error {
	lr := &LineResult{Samples: lineSamples, Tenants: lineTenants, Target: TargetLineDenyOverAdmit, TargetMet: true,
		Rules: fmt.Sprintf("the tenant's own %s and a shared provider rule of %s", lineTenantPolicy, lineProviderPolicy)}
	for _, waiting := range r.cfg.LineWaiting {
		row, err := lineDepth(ctx, r, waiting)
		if err != nil {
			return fmt.Errorf("line at %d waiting: %w", waiting, err)
		}
		r.logf("line %6d waiting: fair denial %6.1f µs, a newcomer's %6.1f µs, admission %5.1f µs (%.2f×, %.2f×); first come first served denial %6.1f µs, admission %5.1f µs (%.2f×)",
			waiting, row.FairDenyUs, row.FairNewcomerUs, row.FairAdmitUs, row.FairDenyOverAdm, row.FairNewcomerOverAdm, row.FCFSDenyUs, row.FCFSAdmitUs, row.FCFSDenyOverAdm)
		lr.TargetMet = lr.TargetMet && row.FairDenyOverAdm <= lr.Target && row.FCFSDenyOverAdm <= lr.Target
		lr.Rows = append(lr.Rows, row)
	}
	res.Line = lr
	return nil
}

// lineDepth fills both lines with waiting tasks, then measures denials and
// admissions one call at a time, taking turns. Its keys go at the end.
func lineDepth(ctx context.Context, r *runner, waiting int) (LineRow, error) {
	prefix := r.prefix + "line" + strconv.Itoa(waiting) + ":"
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = unlinkMatching(dctx, r.rdb, prefix+"*")
	}()
	l := throttle.NewLimiter(r.rdb, throttle.WithPrefix(prefix))
	s := lineSetup{limiter: l, lines: l.Lines(throttle.LinesConfig{}), class: "sms:send"}
	if err := s.fill(ctx, waiting); err != nil {
		return LineRow{}, err
	}
	var fairDeny, fairNew, fairAdmit, fcfsDeny, fcfsAdmit callTimes
	for i := range lineSamples {
		tenant, newcomer := "tenant-"+strconv.Itoa(i%min(lineTenants, waiting)), "new-"+strconv.Itoa(i)
		for _, m := range []struct {
			into *callTimes
			call func() error
		}{
			{&fairDeny, func() error { return s.arrive(ctx, "deny-"+strconv.Itoa(i), tenant, false, throttle.Parked) }},
			{&fairNew, func() error { return s.arrive(ctx, "new-"+strconv.Itoa(i), newcomer, false, throttle.Parked) }},
			{&fairAdmit, func() error { return s.arrive(ctx, "admit-"+strconv.Itoa(i), tenant, true, throttle.Admitted) }},
			{&fcfsDeny, func() error { return s.inLine(ctx, "deny-"+strconv.Itoa(i), tenant, false, false) }},
			{&fcfsAdmit, func() error { return s.inLine(ctx, "admit-"+strconv.Itoa(i), tenant, true, true) }},
		} {
			t, err := redisTimeOf(ctx, r, m.call)
			if err != nil {
				return LineRow{}, err
			}
			m.into.add(t)
		}
	}
	row := LineRow{Waiting: waiting, FairDenyUs: median(fairDeny.total), FairNewcomerUs: median(fairNew.total),
		FairAdmitUs: median(fairAdmit.total), FCFSDenyUs: median(fcfsDeny.total), FCFSAdmitUs: median(fcfsAdmit.total),
		FairDenyCmdUs: median(fairDeny.commands), FairAdmitCmdUs: median(fairAdmit.commands),
		FCFSDenyCmdUs: median(fcfsDeny.commands), FCFSAdmitCmdUs: median(fcfsAdmit.commands),
		FCFSDenyLuaUs: median(fcfsDeny.script), FCFSAdmitLuaUs: median(fcfsAdmit.script),
		FairDenyCalls: median(fairDeny.calls), FairAdmitCalls: median(fairAdmit.calls),
		FCFSDenyCalls: median(fcfsDeny.calls), FCFSAdmitCalls: median(fcfsAdmit.calls)}
	if row.FairAdmitUs > 0 {
		row.FairDenyOverAdm = row.FairDenyUs / row.FairAdmitUs
		row.FairNewcomerOverAdm = row.FairNewcomerUs / row.FairAdmitUs
	}
	if row.FCFSAdmitUs > 0 {
		row.FCFSDenyOverAdm = row.FCFSDenyUs / row.FCFSAdmitUs
	}
	return row, nil
}

// fill makes waiting tasks wait in each line: parked in the fair lines,
// placed in the limiter's own, after those the rules admit at once.
func (s lineSetup) fill(ctx context.Context, waiting int) error {
	tenants := min(lineTenants, waiting)
	for i, parked := 0, 0; parked < waiting; i++ {
		tenant := "tenant-" + strconv.Itoa(i%tenants)
		id := "fill-" + strconv.Itoa(i)
		turn, err := s.lines.Arrive(ctx, throttle.Arrival{Class: s.class, Tenant: tenant, Queue: "q", ID: id,
			Checks: s.checks(tenant, false)})
		if err != nil {
			return err
		}
		if turn.Outcome == throttle.Parked {
			parked++
		}
	}
	for i, placed := 0, 0; placed < waiting; i++ {
		tenant := "tenant-" + strconv.Itoa(i%tenants)
		md, err := s.limiter.AllowInLine(ctx, "fcfs-fill-"+strconv.Itoa(i), lineChecks(s.checks(tenant, false), "fcfs/"))
		if err != nil {
			return err
		}
		if !md.Allowed {
			placed++
		}
	}
	return nil
}

// arrive runs one arrival in the fair lines and checks its outcome.
func (s lineSetup) arrive(ctx context.Context, id, tenant string, roomy bool, want throttle.Outcome) error {
	class := s.class
	if roomy {
		class = "roomy"
	}
	turn, err := s.lines.Arrive(ctx, throttle.Arrival{Class: class, Tenant: tenant, Queue: "q", ID: id, Checks: s.checks(tenant, roomy)})
	if err == nil && turn.Outcome != want {
		err = fmt.Errorf("arrival %s: %v, want %v", id, turn.Outcome, want)
	}
	return err
}

// inLine runs one call of the limiter's own line and checks its decision.
func (s lineSetup) inLine(ctx context.Context, id, tenant string, roomy, want bool) error {
	md, err := s.limiter.AllowInLine(ctx, id, lineChecks(s.checks(tenant, roomy), "fcfs/"))
	if err == nil && md.Allowed != want {
		err = fmt.Errorf("in line %s: allowed %v, want %v", id, md.Allowed, want)
	}
	return err
}

// lineChecks are the checks of lc, their keys under prefix: the limiter's
// own line keeps keys apart from the fair lines'.
func lineChecks(lc []throttle.LineCheck, prefix string) []throttle.Check {
	out := make([]throttle.Check, len(lc))
	for i, c := range lc {
		out[i] = c.Check
		out[i].Key = prefix + c.Key
	}
	return out
}

// redisTime is the time Redis spent in one call's scripts, µs: in all,
// and in the commands they ran; and how many commands those were.
type redisTime struct{ total, commands, calls float64 }

// callTimes are one kind of call's samples: its time in all, in the
// commands, and the rest, the script's own; and its commands.
type callTimes struct{ total, commands, script, calls []float64 }

func (s *callTimes) add(t redisTime) {
	s.total = append(s.total, t.total)
	s.commands = append(s.commands, t.commands)
	s.script = append(s.script, t.total-t.commands)
	s.calls = append(s.calls, t.calls)
}

// redisTimeOf runs call and returns the time Redis spent in the script calls
// it made, µs, and in the commands those ran, and their number: every
// command of INFO commandstats but EVALSHA and INFO, before and after.
// Nothing else may use the Redis meanwhile.
func redisTimeOf(ctx context.Context, r *runner, call func() error) (redisTime, error) {
	before, err := redisCommands(ctx, r.rdb)
	if err != nil {
		return redisTime{}, err
	}
	if err := call(); err != nil {
		return redisTime{}, err
	}
	after, err := redisCommands(ctx, r.rdb)
	if err != nil {
		return redisTime{}, err
	}
	if after["evalsha"].calls == before["evalsha"].calls {
		return redisTime{}, fmt.Errorf("no script call counted")
	}
	t := redisTime{total: float64(after["evalsha"].usec - before["evalsha"].usec)}
	for name, a := range after {
		if name != "evalsha" && name != "info" {
			t.commands += float64(a.usec - before[name].usec)
			t.calls += float64(a.calls - before[name].calls)
		}
	}
	return t, nil
}
