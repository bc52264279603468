package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreStats reports the contents of a bounded in-memory store: the entries it holds and
// the bytes charged against its bound.
type StoreStats func() (entries int, bytes int64)

// stores exports every tracked store's size at each scrape.
type stores struct {
	entries, bytes, max *prometheus.Desc

	mu  sync.Mutex
	all []store
}

type store struct {
	name     string
	maxBytes int64
	stats    StoreStats
}

func newStores() *stores {
	l := []string{"store"}
	return &stores{
		entries: prometheus.NewDesc("compactord_store_entries", "Entries held by a bounded in-memory store (summary-cache, token-memo).", l, nil),
		bytes:   prometheus.NewDesc("compactord_store_bytes", "Bytes charged to a bounded in-memory store's entries (an estimate of their heap use).", l, nil),
		max:     prometheus.NewDesc("compactord_store_max_bytes", "The bound on compactord_store_bytes; older entries are evicted beyond it.", l, nil),
	}
}

func (s *stores) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.entries
	ch <- s.bytes
	ch <- s.max
}

func (s *stores) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	all := s.all
	s.mu.Unlock()
	for _, st := range all {
		n, b := st.stats()
		ch <- prometheus.MustNewConstMetric(s.entries, prometheus.GaugeValue, float64(n), st.name)
		ch <- prometheus.MustNewConstMetric(s.bytes, prometheus.GaugeValue, float64(b), st.name)
		ch <- prometheus.MustNewConstMetric(s.max, prometheus.GaugeValue, float64(st.maxBytes), st.name)
	}
}

// TrackStore exports the size of the bounded in-memory store name, read from stats at every
// scrape, as compactord_store_entries and compactord_store_bytes, and its bound maxBytes as
// compactord_store_max_bytes, all labelled store=name. stats must be safe for concurrent
// use. Track each name once. On a nil *Recorder it does nothing.
func (m *Recorder) TrackStore(name string, maxBytes int64, stats StoreStats) {
	if m == nil {
		return
	}
	m.stores.mu.Lock()
	defer m.stores.mu.Unlock()
	m.stores.all = append(m.stores.all, store{name, maxBytes, stats})
}
