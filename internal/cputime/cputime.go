// Package cputime measures the CPU time of the test process, for benchmarks that report it
// per operation: on a shared machine, wall time mostly measures waiting for a CPU.
package cputime

import (
	"testing"
)

// Loop runs f once per benchmark iteration (b.Loop), reporting allocations and, where the
// platform measures it, "cpu-ns/op": the process's user and system CPU time (all threads,
// garbage collection included) per iteration.
func Loop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := Process()
	for b.Loop() {
		f()
	}
	if cpu := Process() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// LoopN is Loop for benchmarks that prepare b.N inputs first: it resets the timer, runs
// f(0), …, f(b.N-1), and stops the timer before reporting.
func LoopN(b *testing.B, f func(i int)) {
	b.ReportAllocs()
	b.ResetTimer()
	start := Process()
	for i := 0; i < b.N; i++ {
		f(i)
	}
	b.StopTimer()
	if cpu := Process() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
