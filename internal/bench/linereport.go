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
}
