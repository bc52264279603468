//go:build !unix

package format

import "time"

// processCPU is not available here; benchmarks then report no CPU metrics.
func processCPU() time.Duration { return 0 }
