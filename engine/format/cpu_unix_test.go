//go:build unix

package format

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the test process has used so far. On a
// shared, loaded machine it measures the work done, where wall time also counts the waiting.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
