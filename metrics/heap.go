package metrics

import (
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// heap exports, at each scrape, the live heap (what the last GC marked: the signal of a
// leak, and of the stores filling) and the heap goal the next GC starts at (which RSS
// follows), from runtime/metrics. They are compactord_ series because the go_ ones belong to
// the Go collector, which may already be registered with other settings.
type heap struct {
	live, goal *prometheus.Desc
}

func newHeap() *heap {
	return &heap{
		live: prometheus.NewDesc("compactord_heap_live_bytes", "Heap bytes the last garbage collection marked live (runtime/metrics /gc/heap/live:bytes).", nil, nil),
		goal: prometheus.NewDesc("compactord_heap_goal_bytes", "Heap size at which the next garbage collection starts (runtime/metrics /gc/heap/goal:bytes).", nil, nil),
	}
}

func (h *heap) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.live
	ch <- h.goal
}

func (h *heap) Collect(ch chan<- prometheus.Metric) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	for i, d := range []*prometheus.Desc{h.live, h.goal} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(s[i].Value.Uint64()))
		}
	}
}
