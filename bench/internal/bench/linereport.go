package bench

import (
	"fmt"
	"io"
)

// reportLine writes the line section.
func reportLine(w io.Writer, res *Results) {
	lr := res.Line
	if lr == nil {
		return
	}
	fmt.Fprintf(w, "\n## Line: a denial with tasks waiting ahead\n\n")
	fmt.Fprintf(w, "The Redis time of one decision (INFO commandstats around each call, the median of %d), for a task "+
		"denied while others wait ahead, against one admitted, in the two lines a worker may use:\n\n", lr.Samples)
	fmt.Fprintf(w, "- **fair**, the default: `throttle.Lines.Arrive` for a task whose tenant already waits, which is parked, "+
		"against one admitted at once (another class, with room); and beside them a **newcomer**'s denial, a task of a tenant "+
		"that did not wait, whose flow starts waiting and for which the lines look for a slot to give (once a tenant and backlog);\n")
	fmt.Fprintf(w, "- **first come, first served** (`worker --fairness off`): `throttle.Limiter.AllowInLine` for a new "+
		"task, which is given a place after every place given, against one admitted (other keys, with room).\n\n")
	fmt.Fprintf(w, "A task's rules are %s. The waiting tasks spread over up to %d tenants (as many as wait, when fewer); each "+
		"denial measured adds one more, and the calls take turns. Target of the issue \"The cost of a decision\": a "+
		"waiting tenant's denial costs at most %.1f× an admission, however many wait: **%s**\n\n",
		lr.Rules, lr.Tenants, lr.Target, verdict(lr.TargetMet))
	fmt.Fprintf(w, "| waiting | fair: denial µs | admission µs | denial/admission | newcomer µs | newcomer/admission | "+
		"fcfs: denial µs | admission µs | denial/admission |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range lr.Rows {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", thousands(float64(r.Waiting)),
			r.FairDenyUs, r.FairAdmitUs, r.FairDenyOverAdm, r.FairNewcomerUs, r.FairNewcomerOverAdm,
			r.FCFSDenyUs, r.FCFSAdmitUs, r.FCFSDenyOverAdm)
	}
	fmt.Fprintf(w, "\nThe same calls' Redis time in the commands their scripts ran (INFO commandstats of every command but "+
		"EVALSHA and INFO, the median): what the data structures cost, whatever the Lua around them; and, in the first come, "+
		"first served line, the rest of each call's time, the script's own (its Lua, and its arguments and replies made Lua "+
		"values and back):\n\n")
	fmt.Fprintf(w, "| waiting | fair: denial's commands µs | admission's µs | ratio | fcfs: denial's commands µs | admission's µs | ratio | "+
		"fcfs: denial's script µs | admission's µs | ratio |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range lr.Rows {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %.0f | %.0f | %s |\n", thousands(float64(r.Waiting)),
			r.FairDenyCmdUs, r.FairAdmitCmdUs, ratioOf(r.FairDenyCmdUs, r.FairAdmitCmdUs),
			r.FCFSDenyCmdUs, r.FCFSAdmitCmdUs, ratioOf(r.FCFSDenyCmdUs, r.FCFSAdmitCmdUs),
			r.FCFSDenyLuaUs, r.FCFSAdmitLuaUs, ratioOf(r.FCFSDenyLuaUs, r.FCFSAdmitLuaUs))
	}
	fmt.Fprintf(w, "\nThe commands each call's script ran (INFO commandstats' calls, the median):\n\n")
	fmt.Fprintf(w, "| waiting | fair: denial | admission | fcfs: denial | admission |\n|---:|---:|---:|---:|---:|\n")
	for _, r := range lr.Rows {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f |\n", thousands(float64(r.Waiting)),
			r.FairDenyCalls, r.FairAdmitCalls, r.FCFSDenyCalls, r.FCFSAdmitCalls)
	}
}

// ratioOf is a over b with two decimals, or "–" when b is 0.
func ratioOf(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}
