// Package metrics holds compactord's Prometheus instrumentation: the gRPC server metrics of
// go-grpc-middleware's prometheus provider, plus the cache, summarizer, token, limit and
// memory metrics the service records itself. It is a thin layer: callers record facts
// through the methods of a Recorder and serve its Handler on the metrics port
// (--metrics-listen, :9090 by default).
//
// Every series New registers (counters end in _total, durations are in seconds, sizes in
// bytes); TestDocNamesEverySeries keeps this list whole:
//
//	grpc_server_started_total, grpc_server_handled_total{grpc_code},
//	grpc_server_msg_received_total, grpc_server_msg_sent_total,
//	grpc_server_handling_seconds             per grpc_type, grpc_service, grpc_method
//	compactord_cache_lookups_total{result}   summaries Compact served, by the response's
//	                                         cache_status: hit | miss | unavailable | bypass
//	compactord_summarizer_calls_total{summarizer, outcome}
//	                                         outcome = ok | error | timeout | canceled;
//	                                         summarizer errors are the outcome != "ok" series
//	compactord_summarizer_duration_seconds{summarizer}
//	compactord_summary_check_items_total{kind, result}
//	                                         what the summary check found in new summaries:
//	                                         kind = request | path,
//	                                         result = retained | appended | missing
//	compactord_summary_unpaid_total          summaries not made: no summary could pay
//	compactord_compaction_tokens{stage}      histogram per compaction, stage = before | after
//	compactord_pruned_tokens_total           tokens removed by pruning and cutting tool outputs (not summarized)
//	compactord_store_entries{store}, compactord_store_bytes{store},
//	compactord_store_max_bytes{store}        the bounded in-memory stores (stores.go)
//	compactord_heap_live_bytes, compactord_heap_goal_bytes
//	                                         the live heap and the next GC's goal (heap.go)
//	compactord_limit_refusals_total{limit, tenant}, compactord_limit_fallback_total{limit},
//	compactord_shed_total{kind}, compactord_inflight{kind},
//	compactord_request_bytes, compactord_request_budget_bytes   (limits.go)
//
// plus the Go runtime (go_*) and process (process_*) collectors.
//
// Label values are bounded: summarizer names come from the configuration, never from
// request data; a tenant label is a tenant the limits configuration names, else "other";
// no label ever carries conversation content.
//
// A nil *Recorder is valid and records nothing, so callers can run with metrics disabled
// without nil checks.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/summary"
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Summarizer call outcomes, derived from the error passed to ObserveSummarizer.
const (
	OutcomeOK       = "ok"
	OutcomeError    = "error"
	OutcomeTimeout  = "timeout"  // the error wraps context.DeadlineExceeded
	OutcomeCanceled = "canceled" // the error wraps context.Canceled
)

var (
	// Compaction RPCs range from sub-millisecond (cache hit, nothing to do) to an LLM
	// summarizer's tens of seconds.
	rpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}
	// Summarizer calls: the extractive one takes milliseconds, LLM calls seconds.
	summarizerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}
	// Token counts per conversation: 256 up to 2^20 (1M-token context windows).
	tokenBuckets = prometheus.ExponentialBuckets(256, 2, 13)
)

// Recorder records compactord's metrics into the registry given to New and serves them. Its
// methods are safe for concurrent use.
type Recorder struct {
	gatherer prometheus.Gatherer
	grpc     *grpcprom.ServerMetrics

	cacheLookups      *prometheus.CounterVec
	summarizerCalls   *prometheus.CounterVec
	summarizerLatency *prometheus.HistogramVec
	tokensBefore      prometheus.Observer
	tokensAfter       prometheus.Observer
	prunedTokens      prometheus.Counter
	checkItems        *prometheus.CounterVec
	unpaid            prometheus.Counter
	stores            *stores
	limits            *limits
}

// New creates the collectors and registers them with reg; a nil reg means a fresh
// *prometheus.Registry. The Go runtime and process collectors are registered too, unless reg
// already has them (prometheus.DefaultRegisterer does). New panics if reg already holds one
// of the other metrics, as prometheus.MustRegister does; call it once per registry.
//
// Handler serves reg when it is also a prometheus.Gatherer (a *prometheus.Registry is), and
// prometheus.DefaultGatherer otherwise.
func New(reg prometheus.Registerer) *Recorder {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	gatherer, ok := reg.(prometheus.Gatherer)
	if !ok {
		gatherer = prometheus.DefaultGatherer
	}
	m := &Recorder{
		gatherer: gatherer,
		grpc: grpcprom.NewServerMetrics(
			grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(rpcBuckets)),
		),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_cache_lookups_total",
			Help: "Summaries Compact served, by how the summary cache served them (the response's cache_status): hit, miss (written and stored), unavailable (the cache failed and was skipped), bypass (written and not stored).",
		}, []string{"result"}),
		summarizerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_summarizer_calls_total",
			Help: "Summarizer calls by configured summarizer name and outcome (ok, error, timeout, canceled).",
		}, []string{"summarizer", "outcome"}),
		summarizerLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "compactord_summarizer_duration_seconds",
			Help:    "Duration of summarizer calls, whatever their outcome, by configured summarizer name.",
			Buckets: summarizerBuckets,
		}, []string{"summarizer"}),
		prunedTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "compactord_pruned_tokens_total",
			Help: "Tokens removed from conversations by pruning and by cutting tool outputs (dropped, not summarized).",
		}),
		checkItems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_summary_check_items_total",
			Help: "Items the summary check looked for in new summaries, by kind (request, path) and result (retained by the summary or kept messages, appended by the check, missing: did not fit the budget).",
		}, []string{"kind", "result"}),
		unpaid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "compactord_summary_unpaid_total",
			Help: "Forced or planned summaries not made because no summary could pay for itself (the range was too short); Compact answered compacted=false.",
		}),
	}
	tokens := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "compactord_compaction_tokens",
		Help:    "Conversation size in tokens per compaction, before and after (stage label).",
		Buckets: tokenBuckets,
	}, []string{"stage"})
	m.stores = newStores()
	m.limits = newLimits()
	for _, k := range []string{KindCPU, KindLLM, KindMemory} {
		m.limits.shed.WithLabelValues(k)
	}
	for _, k := range []string{KindCPU, KindLLM} {
		m.limits.inflight.WithLabelValues(k)
	}
	m.tokensBefore = tokens.WithLabelValues("before")
	m.tokensAfter = tokens.WithLabelValues("after")

	// Every cache series exists from the start, so rate() and ratios work before the first
	// miss.
	for _, s := range cache.Statuses() {
		m.cacheLookups.WithLabelValues(s.String())
	}
	for _, k := range []string{CheckRequest, CheckPath} {
		for _, r := range []string{CheckRetained, CheckAppended, CheckMissing} {
			m.checkItems.WithLabelValues(k, r)
		}
	}

	reg.MustRegister(m.grpc, m.cacheLookups, m.summarizerCalls, m.summarizerLatency, tokens, m.prunedTokens, m.checkItems, m.unpaid, m.stores, newHeap())
	reg.MustRegister(m.limits.collectors()...)
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				panic(err)
			}
		}
	}
	return m
}

// Handler serves the registry in the Prometheus text format, or OpenMetrics (which carries
// the trace-ID exemplars) when the scraper asks for it. Mount it at /metrics on the metrics
// listener. On a nil *Recorder it answers 404.
func (m *Recorder) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// UnaryServerInterceptor counts and times unary RPCs (grpc_server_*). Sampled requests
// attach their trace ID as an exemplar. On a nil *Recorder it only calls the handler.
func (m *Recorder) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	if m == nil {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		}
	}
	return m.grpc.UnaryServerInterceptor(grpcprom.WithExemplarFromContext(traceExemplar))
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming RPCs (health Watch,
// reflection).
func (m *Recorder) StreamServerInterceptor() grpc.StreamServerInterceptor {
	if m == nil {
		return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, ss)
		}
	}
	return m.grpc.StreamServerInterceptor(grpcprom.WithExemplarFromContext(traceExemplar))
}

// ServiceInfoProvider is what InitializeServer needs; *grpc.Server implements it.
type ServiceInfoProvider interface {
	GetServiceInfo() map[string]grpc.ServiceInfo
}

// InitializeServer creates zero-valued grpc_server_* series for every method registered on
// srv, so dashboards and alerts see them before the first call. Call it after registering
// the services and before Serve.
func (m *Recorder) InitializeServer(srv ServiceInfoProvider) {
	if m == nil {
		return
	}
	m.grpc.InitializeMetrics(srv)
}

// InitializeSummarizers creates zero-valued series for the named summarizers (every
// outcome), so their error ratio is defined before the first call. Pass the configured
// names.
func (m *Recorder) InitializeSummarizers(names ...string) {
	if m == nil {
		return
	}
	for _, n := range names {
		for _, o := range []string{OutcomeOK, OutcomeError, OutcomeTimeout, OutcomeCanceled} {
			m.summarizerCalls.WithLabelValues(n, o)
		}
		m.summarizerLatency.WithLabelValues(n)
	}
}

// CacheLookup counts one summary Compact served, by how the cache served it (labelled with
// s.String()).
func (m *Recorder) CacheLookup(s cache.Status) {
	if m == nil {
		return
	}
	m.cacheLookups.WithLabelValues(s.String()).Inc()
}

// ObserveSummarizer records one call of the configured summarizer name that took d and
// returned err: a call counted under Outcome(err) and its duration. ctx supplies the trace
// ID exemplar when the request is sampled.
func (m *Recorder) ObserveSummarizer(ctx context.Context, name string, d time.Duration, err error) {
	if m == nil {
		return
	}
	ex := traceExemplar(ctx)
	m.summarizerCalls.WithLabelValues(name, Outcome(err)).(prometheus.ExemplarAdder).AddWithExemplar(1, ex)
	m.summarizerLatency.WithLabelValues(name).(prometheus.ExemplarObserver).ObserveWithExemplar(d.Seconds(), ex)
}

// ObserveTokens records the size of one compacted conversation before and after compaction,
// in tokens. Negative counts are ignored.
func (m *Recorder) ObserveTokens(before, after int) {
	if m == nil {
		return
	}
	if before >= 0 {
		m.tokensBefore.Observe(float64(before))
	}
	if after >= 0 {
		m.tokensAfter.Observe(float64(after))
	}
}

// AddPrunedTokens adds n tokens removed by pruning and cutting. Non-positive n is ignored.
func (m *Recorder) AddPrunedTokens(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.prunedTokens.Add(float64(n))
}

// Outcome classifies a summarizer error for the outcome label: OutcomeOK for nil,
// OutcomeTimeout for errors wrapping context.DeadlineExceeded, OutcomeCanceled for
// context.Canceled, and OutcomeError for anything else.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	default:
		return OutcomeError
	}
}

// traceExemplar labels an observation with the trace ID of a sampled span in ctx, linking a
// latency bucket to a trace; it returns nil (no exemplar) otherwise.
func traceExemplar(ctx context.Context) prometheus.Labels {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{"trace_id": sc.TraceID().String()}
}

// Labels of compactord_summary_check_items_total.
const (
	CheckRequest  = "request"
	CheckPath     = "path"
	CheckRetained = "retained"
	CheckAppended = "appended"
	CheckMissing  = "missing"
)

// ObserveCheck records what one summary check found: per kind (CheckRequest, CheckPath), the
// items it found retained and those it appended; the rest of the kind's total are counted
// missing. Counts are never content.
func (m *Recorder) ObserveCheck(c summary.Check) {
	if m == nil {
		return
	}
	m.observeCheckKind(CheckRequest, c.RequestsTotal, c.RequestsRetained, c.RequestsAppended)
	m.observeCheckKind(CheckPath, c.PathsTotal, c.PathsRetained, c.PathsAppended)
}

func (m *Recorder) observeCheckKind(kind string, total, retained, appended int) {
	m.checkItems.WithLabelValues(kind, CheckRetained).Add(float64(retained))
	m.checkItems.WithLabelValues(kind, CheckAppended).Add(float64(appended))
	if missing := total - retained - appended; missing > 0 {
		m.checkItems.WithLabelValues(kind, CheckMissing).Add(float64(missing))
	}
}

// AddUnpaid counts one summary not made because no summary could pay for itself.
func (m *Recorder) AddUnpaid() {
	if m == nil {
		return
	}
	m.unpaid.Inc()
}
