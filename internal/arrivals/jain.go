package arrivals

// Jain returns Jain's fairness index of xs, (Σx)² ÷ (n·Σx²): 1 when all are
// equal (or all zero), 1/n when one holds everything. The drain benchmark
// and the fair lines' tests judge shares of arrivals with it.
func Jain(xs ...float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
