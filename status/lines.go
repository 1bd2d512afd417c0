package status

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/throttle"
)

// linesViews groups the waiting flows by task type: each tenant's tasks
// in line, its weight and its share of the grants, and the tasks in line
// at each priority.
func linesViews(flows []throttle.WaitingFlow) []linesView {
	byType := map[string]*linesView{}
	var order []string
	total := map[string]int{} // grants by task type, each tenant once
	counted := map[[2]string]bool{}
	inLine := map[string]map[int]int{}
	for _, f := range flows {
		v := byType[f.Class]
		if v == nil {
			v = &linesView{TaskType: f.Class}
			byType[f.Class] = v
			order = append(order, f.Class)
			inLine[f.Class] = map[int]int{}
		}
		// A tenant's grants count at every priority it waits at: once.
		if k := [2]string{f.Class, f.Tenant}; !counted[k] {
			counted[k] = true
			total[f.Class] += f.Grants
		}
		inLine[f.Class][f.Priority] += f.InLine
		v.Flows = append(v.Flows, flowView{Tenant: f.Tenant, Priority: f.Priority, InLine: f.InLine, Grants: f.Grants,
			Weight: strconv.FormatFloat(f.Weight, 'g', -1, 64)})
	}
	slices.Sort(order)
	out := make([]linesView, 0, len(order))
	for _, c := range order {
		v := byType[c]
		for i := range v.Flows {
			if total[c] > 0 {
				v.Flows[i].SharePct = v.Flows[i].Grants * 100 / total[c]
			}
		}
		slices.SortFunc(v.Flows, func(x, y flowView) int {
			return cmp.Or(x.Priority-y.Priority, strings.Compare(x.Tenant, y.Tenant))
		})
		for p := throttle.MostUrgent; p <= throttle.LeastUrgent; p++ {
			if n := inLine[c][p]; n > 0 {
				v.ByPriority = append(v.ByPriority, byCount{By: strconv.Itoa(p), Count: n})
			}
		}
		out = append(out, *v)
	}
	return out
}
