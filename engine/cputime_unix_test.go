//go:build unix

package engine

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time the test process has used (all threads,
// garbage collection included). Benchmarks report it per operation because on a shared,
// oversubscribed machine wall time mostly measures waiting for a CPU.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
