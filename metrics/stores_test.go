package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Store gauges are read from the store at each scrape, one series per tracked store.
func TestTrackStoreReadsSizesAtScrape(t *testing.T) {
	m, reg := newTest(t)
	var n atomic.Int64
	m.TrackStore("summary-cache", 64<<20, func() (int, int64) { return int(n.Load()), 1000 * n.Load() })
	m.TrackStore("token-memo", 32<<20, func() (int, int64) { return 7, 4096 })
	names := []string{"compactord_store_entries", "compactord_store_bytes", "compactord_store_max_bytes"}
	for _, tt := range []struct {
		set           int64
		entries, size string
	}{{0, "0", "0"}, {3, "3", "3000"}} {
		n.Store(tt.set)
		want := `
# HELP compactord_store_bytes Bytes charged to a bounded in-memory store's entries (an estimate of their heap use).
# TYPE compactord_store_bytes gauge
compactord_store_bytes{store="summary-cache"} ` + tt.size + `
compactord_store_bytes{store="token-memo"} 4096
# HELP compactord_store_entries Entries held by a bounded in-memory store (summary-cache, token-memo).
# TYPE compactord_store_entries gauge
compactord_store_entries{store="summary-cache"} ` + tt.entries + `
compactord_store_entries{store="token-memo"} 7
# HELP compactord_store_max_bytes The bound on compactord_store_bytes; older entries are evicted beyond it.
# TYPE compactord_store_max_bytes gauge
compactord_store_max_bytes{store="summary-cache"} 6.7108864e+07
compactord_store_max_bytes{store="token-memo"} 3.3554432e+07
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
			t.Fatalf("after %d entries: %v", tt.set, err)
		}
	}
}

func TestNoStoreNoSeries(t *testing.T) {
	_, reg := newTest(t)
	if n, err := testutil.GatherAndCount(reg, "compactord_store_bytes"); err != nil || n != 0 {
		t.Fatalf("series without a tracked store: %d, %v", n, err)
	}
}

func TestHeapSeries(t *testing.T) {
	_, reg := newTest(t)
	for _, name := range []string{"compactord_heap_live_bytes", "compactord_heap_goal_bytes"} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() == name {
				found = len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetGauge().GetValue() > 0
			}
		}
		if !found {
			t.Errorf("no positive %s", name)
		}
	}
}
