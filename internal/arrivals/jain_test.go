package arrivals

import (
	"math"
	"testing"
)

func TestJain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5, 5, 5}, 1},
		{[]float64{1, 3}, 0.8},
		{[]float64{4, 0, 0, 0}, 0.25},
		{[]float64{0, 0}, 1},
	}
	for _, tc := range cases {
		if got := Jain(tc.xs...); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Jain(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
