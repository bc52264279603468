package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// OtherTenant is the tenant label of every tenant not named by SetTenantLabels: tenant labels
// stay bounded whatever tenants callers name.
const OtherTenant = "other"

// limits are the metrics of per-tenant limits and load shedding:
//
//	compactord_limit_refusals_total{limit, tenant}  calls refused by a per-tenant limit;
//	                                                tenant is a configured tenant or "other"
//	compactord_limit_fallback_total{limit}          limit decisions taken by the replica alone
//	                                                because Redis failed
//	compactord_shed_total{kind}                     calls refused at once because the server
//	                                                was at its in-flight bound (kind = cpu | llm)
//	compactord_inflight{kind}                       calls in flight per kind
type limits struct {
	refusals *prometheus.CounterVec
	fallback *prometheus.CounterVec
	shed     *prometheus.CounterVec
	inflight *prometheus.GaugeVec
	// requestBytes is the memory budget in use; requestBudget the budget.
	requestBytes, requestBudget prometheus.Gauge

	mu      sync.RWMutex
	tenants map[string]bool
}

func newLimits() *limits {
	return &limits{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_limit_refusals_total",
			Help: "Calls refused with RESOURCE_EXHAUSTED by a per-tenant limit (calls_per_second, concurrent_compacts, summarizer_tokens); tenant is a configured tenant or \"other\".",
		}, []string{"limit", "tenant"}),
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_limit_fallback_total",
			Help: "Per-tenant limit decisions this replica took alone, with its local limiter, because Redis failed.",
		}, []string{"limit"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_shed_total",
			Help: "Calls refused at once because the server was at a bound, by kind: cpu and llm (UNAVAILABLE with RetryInfo, at --max-inflight and --max-inflight-llm), memory (RESOURCE_EXHAUSTED, at --memory-budget).",
		}, []string{"kind"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "compactord_inflight",
			Help: "Calls in flight by kind: cpu (CompactorService calls doing engine work) and llm (summarizer calls to a model).",
		}, []string{"kind"}),
		requestBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "compactord_request_bytes",
			Help: "Bytes of the memory budget held by requests being decoded and held (their encoded copy and what decoding it allocates).",
		}),
		requestBudget: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "compactord_request_budget_bytes",
			Help: "The memory budget of requests being decoded and held (--memory-budget); 0 is unbounded.",
		}),
		tenants: map[string]bool{},
	}
}

func (l *limits) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.refusals, l.fallback, l.shed, l.inflight, l.requestBytes, l.requestBudget}
}

// SetTenantLabels names the tenants that get a label of their own (the tenants the limits
// configuration names); every other tenant is counted as OtherTenant.
func (m *Recorder) SetTenantLabels(tenants ...string) {
	if m == nil {
		return
	}
	set := make(map[string]bool, len(tenants))
	for _, t := range tenants {
		set[t] = true
	}
	m.limits.mu.Lock()
	m.limits.tenants = set
	m.limits.mu.Unlock()
}

// TenantLabel is the label value tenant is counted under.
func (m *Recorder) TenantLabel(tenant string) string {
	if m == nil {
		return OtherTenant
	}
	m.limits.mu.RLock()
	defer m.limits.mu.RUnlock()
	if m.limits.tenants[tenant] {
		return tenant
	}
	return OtherTenant
}

// LimitRefused counts a call refused by the per-tenant limit named limit.
func (m *Recorder) LimitRefused(limit, tenant string) {
	if m == nil {
		return
	}
	m.limits.refusals.WithLabelValues(limit, m.TenantLabel(tenant)).Inc()
}

// LimitFallback counts a decision on limit taken locally because Redis failed.
func (m *Recorder) LimitFallback(limit string) {
	if m == nil {
		return
	}
	m.limits.fallback.WithLabelValues(limit).Inc()
}

// The kinds of bound Shed counts refusals at: --max-inflight (cpu), --max-inflight-llm
// (llm) and --memory-budget (memory). AddInflight takes the first two.
const (
	KindCPU    = "cpu"
	KindLLM    = "llm"
	KindMemory = "memory"
)

// Shed counts a call refused at the bound of kind (KindCPU, KindLLM or KindMemory).
func (m *Recorder) Shed(kind string) {
	if m == nil {
		return
	}
	m.limits.shed.WithLabelValues(kind).Inc()
}

// AddInflight moves the in-flight gauge of kind (KindCPU or KindLLM) by delta.
func (m *Recorder) AddInflight(kind string, delta int) {
	if m == nil {
		return
	}
	m.limits.inflight.WithLabelValues(kind).Add(float64(delta))
}

// SetMemoryBudget records the memory budget of requests (0: unbounded).
func (m *Recorder) SetMemoryBudget(n int64) {
	if m == nil {
		return
	}
	m.limits.requestBudget.Set(float64(n))
}

// AddRequestBytes moves the memory budget in use by delta bytes.
func (m *Recorder) AddRequestBytes(delta int64) {
	if m == nil {
		return
	}
	m.limits.requestBytes.Add(float64(delta))
}
