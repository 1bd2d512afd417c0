package policies

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/producer"
)

// DefaultWeight is the weight of a tenant that the file's weights: does
// not list: tenants of equal weight share a shared rule equally.
const DefaultWeight = 1.0

// MaxWeight is the largest weight; the smallest is 1/MaxWeight.
const MaxWeight = 1000.0

// parseWeights checks the file's weights: a tenant id (as producers
// check it) to a number from 1/MaxWeight to MaxWeight. Weights are
// relative: 2 and 1 share a rule two to one.
func parseWeights(w map[string]float64) (map[string]float64, error) {
	tenants := make([]string, 0, len(w))
	for t := range w {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		if err := producer.ValidateTenant(t); err != nil {
			return nil, fmt.Errorf("tenant %q: %v", t, err)
		}
		if v := w[t]; math.IsNaN(v) || v < 1/MaxWeight || v > MaxWeight {
			return nil, fmt.Errorf("%s: %s is not a number from %g to %g", t, strconv.FormatFloat(v, 'g', -1, 64), 1/MaxWeight, MaxWeight)
		}
	}
	return w, nil
}
