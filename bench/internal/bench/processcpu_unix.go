//go:build unix

package bench

import "syscall"

// processCPU returns the CPU time this process has used, user and system,
// in µs; 0 when the system does not say.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}
