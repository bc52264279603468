package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/summary"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
)

func newTest(t *testing.T) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return New(reg), reg
}

func TestCacheLookupCountsByResult(t *testing.T) {
	m, _ := newTest(t)
	for _, r := range []cache.Status{cache.StatusHit, cache.StatusHit, cache.StatusMiss, cache.StatusHit, cache.StatusUnavailable} {
		m.CacheLookup(r)
	}
	for _, tt := range []struct {
		result cache.Status
		want   float64
	}{{cache.StatusHit, 3}, {cache.StatusMiss, 1}, {cache.StatusUnavailable, 1}} {
		if got := testutil.ToFloat64(m.cacheLookups.WithLabelValues(tt.result.String())); got != tt.want {
			t.Errorf("cache lookups{result=%q} = %v, want %v", tt.result, got, tt.want)
		}
	}
}

func TestCacheSeriesExistBeforeFirstLookup(t *testing.T) {
	_, reg := newTest(t)
	want := `
# HELP compactord_cache_lookups_total Summaries Compact served, by how the summary cache served them (the response's cache_status): hit, miss (written and stored), unavailable (the cache failed and was skipped), bypass (written and not stored).
# TYPE compactord_cache_lookups_total counter
compactord_cache_lookups_total{result="bypass"} 0
compactord_cache_lookups_total{result="hit"} 0
compactord_cache_lookups_total{result="miss"} 0
compactord_cache_lookups_total{result="unavailable"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "compactord_cache_lookups_total"); err != nil {
		t.Fatal(err)
	}
}

func TestShedSeriesExistBeforeFirstRefusal(t *testing.T) {
	_, reg := newTest(t)
	want := `
# HELP compactord_shed_total Calls refused at once because the server was at a bound, by kind: cpu and llm (UNAVAILABLE with RetryInfo, at --max-inflight and --max-inflight-llm), memory (RESOURCE_EXHAUSTED, at --memory-budget).
# TYPE compactord_shed_total counter
compactord_shed_total{kind="cpu"} 0
compactord_shed_total{kind="llm"} 0
compactord_shed_total{kind="memory"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "compactord_shed_total"); err != nil {
		t.Fatal(err)
	}
}

func TestObserveCheckCountsEveryItem(t *testing.T) {
	m, _ := newTest(t)
	m.ObserveCheck(summary.Check{RequestsTotal: 5, RequestsRetained: 2, RequestsAppended: 2, PathsTotal: 3, PathsRetained: 3, Trimmed: true})
	m.ObserveCheck(summary.Check{RequestsTotal: 1, RequestsAppended: 1, PathsTotal: 4, PathsAppended: 1})
	for _, tt := range []struct {
		kind, result string
		want         float64
	}{
		{CheckRequest, CheckRetained, 2}, {CheckRequest, CheckAppended, 3}, {CheckRequest, CheckMissing, 1},
		{CheckPath, CheckRetained, 3}, {CheckPath, CheckAppended, 1}, {CheckPath, CheckMissing, 3},
	} {
		if got := testutil.ToFloat64(m.checkItems.WithLabelValues(tt.kind, tt.result)); got != tt.want {
			t.Errorf("check items{kind=%q,result=%q} = %v, want %v", tt.kind, tt.result, got, tt.want)
		}
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, OutcomeOK},
		{errors.New("upstream 500"), OutcomeError},
		{context.DeadlineExceeded, OutcomeTimeout},
		{fmt.Errorf("summarize mini: %w", context.DeadlineExceeded), OutcomeTimeout},
		{fmt.Errorf("summarize mini: %w", context.Canceled), OutcomeCanceled},
	}
	for _, tt := range tests {
		if got := Outcome(tt.err); got != tt.want {
			t.Errorf("Outcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestObserveSummarizerRecordsCallsAndLatency(t *testing.T) {
	m, reg := newTest(t)
	ctx := context.Background()
	m.ObserveSummarizer(ctx, "mini", 1500*time.Millisecond, nil)
	m.ObserveSummarizer(ctx, "mini", 30*time.Second, fmt.Errorf("call: %w", context.DeadlineExceeded))
	m.ObserveSummarizer(ctx, "mini", 200*time.Millisecond, errors.New("429"))
	m.ObserveSummarizer(ctx, "extractive", 3*time.Millisecond, nil)

	calls := []struct {
		name, outcome string
		want          float64
	}{
		{"mini", OutcomeOK, 1},
		{"mini", OutcomeTimeout, 1},
		{"mini", OutcomeError, 1},
		{"mini", OutcomeCanceled, 0},
		{"extractive", OutcomeOK, 1},
	}
	for _, tt := range calls {
		if got := testutil.ToFloat64(m.summarizerCalls.WithLabelValues(tt.name, tt.outcome)); got != tt.want {
			t.Errorf("summarizer calls{%s,%s} = %v, want %v", tt.name, tt.outcome, got, tt.want)
		}
	}

	want := `
# HELP compactord_summarizer_duration_seconds Duration of summarizer calls, whatever their outcome, by configured summarizer name.
# TYPE compactord_summarizer_duration_seconds histogram
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.005"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.01"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.025"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.05"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.1"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.25"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="0.5"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="1"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="2.5"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="5"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="10"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="20"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="30"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="60"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="extractive",le="+Inf"} 1
compactord_summarizer_duration_seconds_sum{summarizer="extractive"} 0.003
compactord_summarizer_duration_seconds_count{summarizer="extractive"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.005"} 0
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.01"} 0
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.025"} 0
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.05"} 0
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.1"} 0
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.25"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="0.5"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="1"} 1
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="2.5"} 2
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="5"} 2
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="10"} 2
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="20"} 2
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="30"} 3
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="60"} 3
compactord_summarizer_duration_seconds_bucket{summarizer="mini",le="+Inf"} 3
compactord_summarizer_duration_seconds_sum{summarizer="mini"} 31.7
compactord_summarizer_duration_seconds_count{summarizer="mini"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "compactord_summarizer_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestInitializeSummarizersCreatesZeroSeries(t *testing.T) {
	m, reg := newTest(t)
	m.InitializeSummarizers("mini", "extractive")
	if n := testutil.CollectAndCount(m.summarizerCalls); n != 8 {
		t.Errorf("summarizer call series = %d, want 2 names x 4 outcomes = 8", n)
	}
	if n, err := testutil.GatherAndCount(reg, "compactord_summarizer_duration_seconds"); err != nil || n != 2 {
		t.Errorf("latency series = %d (%v), want 2", n, err)
	}
}

func TestTokensAndPruning(t *testing.T) {
	m, reg := newTest(t)
	m.ObserveTokens(100_000, 20_000)
	m.ObserveTokens(300, 300)
	m.ObserveTokens(-1, 50) // an unknown before-count is skipped, the after-count kept
	m.AddPrunedTokens(4096)
	m.AddPrunedTokens(0)
	m.AddPrunedTokens(-5)
	m.AddPrunedTokens(4)

	if got := testutil.ToFloat64(m.prunedTokens); got != 4100 {
		t.Errorf("pruned tokens = %v, want 4100", got)
	}
	tests := []struct {
		stage           string
		count           uint64
		sum             float64
		le512, le131072 uint64 // cumulative counts at those bounds
	}{
		{"before", 2, 100_300, 1, 2},
		{"after", 3, 20_350, 2, 3},
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		var found bool
		for _, mf := range mfs {
			if mf.GetName() != "compactord_compaction_tokens" {
				continue
			}
			for _, metric := range mf.GetMetric() {
				if metric.GetLabel()[0].GetValue() != tt.stage {
					continue
				}
				found = true
				h := metric.GetHistogram()
				if h.GetSampleCount() != tt.count || h.GetSampleSum() != tt.sum {
					t.Errorf("%s: count %d sum %v, want %d and %v", tt.stage, h.GetSampleCount(), h.GetSampleSum(), tt.count, tt.sum)
				}
				for _, b := range h.GetBucket() {
					switch b.GetUpperBound() {
					case 512:
						if b.GetCumulativeCount() != tt.le512 {
							t.Errorf("%s: le=512 holds %d, want %d", tt.stage, b.GetCumulativeCount(), tt.le512)
						}
					case 131072:
						if b.GetCumulativeCount() != tt.le131072 {
							t.Errorf("%s: le=131072 holds %d, want %d", tt.stage, b.GetCumulativeCount(), tt.le131072)
						}
					}
				}
			}
		}
		if !found {
			t.Errorf("no compactord_compaction_tokens{stage=%q} series", tt.stage)
		}
	}
}

// TestGRPCInterceptorsRecordHandledRPCs runs a real gRPC server (health service) over an
// in-memory listener with the interceptors installed.
func TestGRPCInterceptorsRecordHandledRPCs(t *testing.T) {
	m, reg := newTest(t)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(m.StreamServerInterceptor()),
	)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	m.InitializeServer(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	for range 2 {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); err == nil {
		t.Fatal("Check of an unknown service succeeded")
	}

	want := `
# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="NotFound",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 2
`
	// InitializeServer also pre-creates zero series for every other code and method; compare
	// only the ones the calls above touched.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	got.WriteString("\n# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.\n# TYPE grpc_server_handled_total counter\n")
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			if metric.GetCounter().GetValue() == 0 {
				continue
			}
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			fmt.Fprintf(&got, "grpc_server_handled_total{grpc_code=%q,grpc_method=%q,grpc_service=%q,grpc_type=%q} %v\n",
				labels["grpc_code"], labels["grpc_method"], labels["grpc_service"], labels["grpc_type"], metric.GetCounter().GetValue())
		}
	}
	if got.String() != want {
		t.Errorf("handled RPCs:\n%s\nwant:\n%s", got.String(), want)
	}
	if n, err := testutil.GatherAndCount(reg, "grpc_server_handling_seconds"); err != nil || n == 0 {
		t.Errorf("grpc_server_handling_seconds series = %d (%v), want the handling-time histogram", n, err)
	}
	// Pre-created by InitializeServer though never called.
	if n, err := testutil.GatherAndCount(reg, "grpc_server_started_total"); err != nil || n < 2 {
		t.Errorf("grpc_server_started_total series = %d (%v), want Check and Watch (and List)", n, err)
	}
}

func TestHandlerServesTextAndOpenMetricsWithExemplars(t *testing.T) {
	m, _ := newTest(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	m.ObserveSummarizer(trace.ContextWithSpanContext(context.Background(), sc), "mini", time.Second, nil)
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	m.ObserveSummarizer(trace.ContextWithSpanContext(context.Background(), unsampled), "extractive", time.Millisecond, nil)

	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)

	get := func(accept string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	text := get("")
	for _, s := range []string{
		`compactord_summarizer_calls_total{outcome="ok",summarizer="mini"} 1`,
		`compactord_cache_lookups_total{result="miss"} 0`,
		"go_goroutines",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("text exposition lacks %q", s)
		}
	}

	om := get("application/openmetrics-text; version=1.0.0")
	if !strings.Contains(om, `compactord_summarizer_calls_total{outcome="ok",summarizer="mini"} 1.0 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1.0 `) {
		t.Errorf("OpenMetrics exposition lacks the trace exemplar of the sampled call:\n%s", grep(om, "compactord_summarizer_calls_total"))
	}
	if line := grep(om, `compactord_summarizer_calls_total{outcome="ok",summarizer="extractive"}`); line == "" || strings.Contains(line, "#") {
		t.Errorf("the unsampled call must be counted without an exemplar, got %q", line)
	}
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestNilMetricsRecordsNothingAndPassesCallsThrough(t *testing.T) {
	var m *Recorder
	m.CacheLookup(cache.StatusHit)
	m.ObserveSummarizer(context.Background(), "mini", time.Second, nil)
	m.ObserveTokens(1, 1)
	m.AddPrunedTokens(1)
	m.InitializeSummarizers("mini")
	m.InitializeServer(grpc.NewServer())
	m.TrackStore("x", 1, func() (int, int64) { return 0, 0 })

	called := false
	resp, err := m.UnaryServerInterceptor()(context.Background(), "req", &grpc.UnaryServerInfo{},
		func(context.Context, any) (any, error) { called = true; return "resp", nil })
	if !called || resp != "resp" || err != nil {
		t.Errorf("nil unary interceptor: called=%v resp=%v err=%v", called, resp, err)
	}
	called = false
	if err := m.StreamServerInterceptor()(nil, nil, &grpc.StreamServerInfo{},
		func(any, grpc.ServerStream) error { called = true; return nil }); !called || err != nil {
		t.Errorf("nil stream interceptor: called=%v err=%v", called, err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Handler status = %d, want 404", rec.Code)
	}
}

func TestNewToleratesRegisteredRuntimeCollectors(t *testing.T) {
	// prometheus.DefaultRegisterer already holds the Go and process collectors; New must
	// reuse them instead of panicking.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	New(reg)
	if n, err := testutil.GatherAndCount(reg, "go_goroutines"); err != nil || n != 1 {
		t.Errorf("go_goroutines series = %d (%v), want 1", n, err)
	}
}

func TestHandlerFallsBackToDefaultGatherer(t *testing.T) {
	// A Registerer that cannot gather (a wrapper) is served through DefaultGatherer.
	onlyRegisterer := struct{ prometheus.Registerer }{prometheus.NewRegistry()}
	if m := New(onlyRegisterer); m.gatherer != prometheus.DefaultGatherer {
		t.Error("gatherer is not prometheus.DefaultGatherer")
	}
	if m := New(nil); m.gatherer == prometheus.DefaultGatherer {
		t.Error("New(nil) must use its own registry")
	}
}

func TestNewPanicsOnDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg)
	defer func() {
		if recover() == nil {
			t.Error("second New on the same registry did not panic")
		}
	}()
	New(reg)
}
