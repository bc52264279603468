package service_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// policy forces a summary on irtest.Conversation(20) (≈10k tokens against an 8k window) with
// pruning off, so every test exercises the summarizer.
func policy() *compactorv1.Policy {
	return &compactorv1.Policy{ContextWindow: 8000, Prune: &compactorv1.PrunePolicy{Disabled: true}}
}

// replicaConfig describes one compactord instance under test.
type replicaConfig struct {
	llm      *llmtest.Server
	cache    cache.Cache
	tp       trace.TracerProvider
	retry    summarize.RetryPolicy
	breaker  summarize.BreakerPolicy
	fill     cache.FillOptions
	maxRatio float64
	admit    service.SummaryAdmitter
	fallback string                        // the llm summarizer's fallback
	model    string                        // the llm summarizer's model; "gpt-test" by default
	kind     string                        // the llm summarizer's kind; openai by default
	maxInput int64                         // the llm summarizer's max_input_tokens; 0: the default
	calls    service.Admitter              // admits calls and their requests' memory
	metrics  *metrics.Recorder             // records the cache outcomes and the rest
	unary    []grpc.UnaryServerInterceptor // e.g. the per-tenant limits
}

// startReplica serves a Server with an "llm" summarizer (OpenAI protocol, pointed at
// cfg.llm) on a real loopback TCP port and returns a client.
func startReplica(t *testing.T, cfg replicaConfig) compactorv1.CompactorServiceClient {
	t.Helper()
	if cfg.retry == (summarize.RetryPolicy{}) {
		cfg.retry = summarize.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	}
	var sc *summarize.Config
	if cfg.model == "" {
		cfg.model = "gpt-test"
	}
	if cfg.llm != nil {
		kind, base := cfg.kind, cfg.llm.URL+"/v1"
		switch kind {
		case "":
			kind = summarize.KindOpenAI
		case summarize.KindAnthropic:
			base = cfg.llm.URL
		}
		sc = &summarize.Config{Summarizers: []summarize.SummarizerConfig{{
			Name: "llm", Kind: kind, BaseURL: base, Model: cfg.model, Timeout: 10 * time.Second,
			Fallback: cfg.fallback, MaxInputTokens: cfg.maxInput,
		}}}
	}
	reg, err := summarize.NewRegistry(sc, "", summarize.Options{TracerProvider: cfg.tp, Retry: cfg.retry, Breaker: cfg.breaker})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.fill == (cache.FillOptions{}) {
		cfg.fill = cache.FillOptions{PollInterval: 20 * time.Millisecond}
	}
	srv := service.New(service.Options{Summarizers: reg, Cache: cfg.cache, Fill: cfg.fill, MaxSummaryRatio: cfg.maxRatio, Admit: cfg.admit,
		Metrics: cfg.metrics})
	_, conn := serveTCP(t, srv, service.GRPCOptions{TracerProvider: cfg.tp, Admit: cfg.calls, UnaryInterceptors: cfg.unary})
	return compactorv1.NewCompactorServiceClient(conn)
}

// newRedisCache returns a Redis cache at rawURL under a key prefix of its own, so tests never
// see each other's entries.
// testRedisBudget replaces the 50 ms production budget per Redis command in tests that run
// many concurrent calls under the race detector on two cores, where a healthy round trip
// (pool wait included) can take longer; cache.TestRedisStalledGivesUpWithinBudget checks the
// production budget itself.
const testRedisBudget = 2 * time.Second

func newRedisCache(t *testing.T, rawURL string, tp trace.TracerProvider) *cache.Redis {
	t.Helper()
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	r, err := cache.NewRedis(cache.RedisOptions{URL: rawURL, TTL: time.Hour, TracerProvider: tp, Budget: testRedisBudget,
		KeyPrefix: "compactord-test:" + hex.EncodeToString(nonce) + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// sharedRedis is newRedisCache for several replicas: one key prefix, one client each.
func sharedRedis(t *testing.T, rawURL string, n int) []cache.Cache {
	t.Helper()
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	out := make([]cache.Cache, n)
	for i := range out {
		r, err := cache.NewRedis(cache.RedisOptions{URL: rawURL, TTL: time.Hour, Budget: testRedisBudget,
			KeyPrefix: "compactord-test:" + hex.EncodeToString(nonce) + ":"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		out[i] = r
	}
	return out
}

func compactReq(msgs []*compactorv1.Message) *compactorv1.CompactRequest {
	return &compactorv1.CompactRequest{Messages: msgs, Policy: policy(), Summarizer: "llm"}
}

// checkCompacted asserts the shape head + summary + tail of a summarizing compaction.
func checkCompacted(t *testing.T, msgs []*compactorv1.Message, resp *compactorv1.CompactResponse) {
	t.Helper()
	if !resp.GetCompacted() || resp.GetPlan().GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		t.Fatalf("compacted = %v, action %v", resp.GetCompacted(), resp.GetPlan().GetAction())
	}
	cut := int(resp.GetPlan().GetCutIndex())
	out := resp.GetMessages()
	// Requests of the summarized range that the summary could not hold stay verbatim right
	// after it (policy.keep_user_messages_tokens): original user messages, in order.
	kept := int(resp.GetSummary().GetRequestsKeptVerbatim())
	if len(out) != 1+1+kept+len(msgs)-cut {
		t.Fatalf("%d messages, want system + summary + %d kept requests + %d tail", len(out), kept, len(msgs)-cut)
	}
	next := 1
	for _, m := range out[2 : 2+kept] {
		for next < cut && !proto.Equal(m, msgs[next]) {
			next++
		}
		if next == cut || m.GetRole() != compactorv1.Role_ROLE_USER {
			t.Fatalf("a message kept after the summary is not a user message of the summarized range, in order: %v", m)
		}
		next++
	}
	out = append(out[:2:2], out[2+kept:]...)
	if !proto.Equal(out[0], msgs[0]) {
		t.Errorf("head message changed: %v", out[0])
	}
	sum := out[1]
	if sum.GetRole() != compactorv1.Role_ROLE_USER || sum.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
		t.Errorf("summary message role %v kind %v", sum.GetRole(), sum.GetKind())
	}
	if txt := sum.GetParts()[0].GetText().GetText(); !strings.Contains(txt, resp.GetSummary().GetText()) || !strings.Contains(txt, "continues from an earlier conversation") {
		t.Errorf("summary message text is not the framed summary: %q", txt)
	}
	// The summary counts the messages it stands for: those before the cut but the head and
	// the requests kept verbatim after it.
	if txt, want := sum.GetParts()[0].GetText().GetText(), fmt.Sprintf("(%d messages)", cut-1-kept); !strings.Contains(txt, want) {
		t.Errorf("the summary's header does not say it covers %s: %.300q", want, txt)
	}
	// The tail is the messages from the cut on, those the plan prunes or cuts shortened.
	for i, m := range out[2:] {
		switch resp.GetPlan().GetDispositions()[cut+i] {
		case compactorv1.Disposition_DISPOSITION_KEEP:
			if !proto.Equal(m, msgs[cut+i]) {
				t.Fatalf("tail message %d differs from messages[%d]", i, cut+i)
			}
		case compactorv1.Disposition_DISPOSITION_PRUNE:
			if m.GetRole() != msgs[cut+i].GetRole() || proto.Size(m) >= proto.Size(msgs[cut+i]) {
				t.Fatalf("tail message %d is not messages[%d] shortened", i, cut+i)
			}
		default:
			t.Fatalf("tail message %d: disposition %v", i, resp.GetPlan().GetDispositions()[cut+i])
		}
	}
	if got := resp.GetSummary().GetCoveredMessages(); int(got) != cut {
		t.Errorf("covered_messages = %d, want the cut %d", got, cut)
	}
}

func TestCompactCachesAcrossReplicasAndBuildsOnCachedSummary(t *testing.T) {
	url := redisURL(t)
	llm := llmtest.NewOpenAI(t)
	caches := sharedRedis(t, url, 2)
	a := startReplica(t, replicaConfig{llm: llm, cache: caches[0]})
	b := startReplica(t, replicaConfig{llm: llm, cache: caches[1]})
	msgs := irtest.Conversation(20)

	first, err := a.Compact(t.Context(), compactReq(msgs))
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, msgs, first)
	if first.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_MISS || llm.Calls() != 1 {
		t.Fatalf("first: cache %v, %d LLM calls; want MISS and 1", first.GetCacheStatus(), llm.Calls())
	}
	if !strings.HasPrefix(first.GetSummary().GetText(), "SUMMARY-1") || first.GetSummary().GetModel() != "gpt-test" {
		t.Errorf("summary %+v", first.GetSummary())
	}

	again, err := b.Compact(t.Context(), compactReq(msgs))
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, msgs, again)
	if again.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT || llm.Calls() != 1 {
		t.Fatalf("same prefix on another replica: cache %v, %d LLM calls; want HIT and still 1", again.GetCacheStatus(), llm.Calls())
	}
	if again.GetSummary().GetText() != first.GetSummary().GetText() {
		t.Errorf("cached summary differs")
	}

	grown := irtest.Conversation(22) // the same 20 turns plus two new ones
	next, err := b.Compact(t.Context(), compactReq(grown))
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, grown, next)
	cut1, cut2 := int(first.GetPlan().GetCutIndex()), int(next.GetPlan().GetCutIndex())
	if cut2 <= cut1 {
		t.Fatalf("the cut did not move with the conversation: %d then %d", cut1, cut2)
	}
	if next.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_MISS || llm.Calls() != 2 {
		t.Fatalf("grown: cache %v, %d LLM calls; want MISS and 2", next.GetCacheStatus(), llm.Calls())
	}
	prompt := llm.Body(2)
	// The anchor is the cached summary as stored: checked, so it quotes the requests it
	// holds. Messages before the cached prefix reach the summarizer only through it, but for
	// the requests it left out because the first compaction kept them verbatim and the
	// grown one no longer does: those it must fold in.
	anchor, _ := json.Marshal(first.GetSummary().GetText())
	if !strings.Contains(prompt, string(anchor[1:len(anchor)-1])) {
		t.Fatal("the grown conversation's summary was not anchored on the cached one")
	}
	prompt = strings.Replace(prompt, string(anchor[1:len(anchor)-1]), "", 1)
	kept1, kept2 := keptMarkers(first), keptMarkers(next)
	released := 0
	for i := 1; i < cut2; i++ {
		marker := grown[i].GetParts()[0].GetText().GetText()
		if marker == "" {
			continue
		}
		marker = marker[:6] // "req-07", "ans-07"
		release := i < cut1 && kept1[marker] && !kept2[marker]
		if release {
			released++
		}
		if sent, want := strings.Contains(prompt, marker), i >= cut1 || release; sent != want {
			t.Errorf("messages[%d] (%s): sent to the summarizer = %v, want %v (cached prefix ends at %d, kept then %v, now %v)",
				i, marker, sent, want, cut1, kept1[marker], kept2[marker])
		}
	}
	if released == 0 {
		t.Error("no request kept verbatim by the first compaction is folded into the grown one's summary: the test no longer covers releasing them")
	}
}

// keptMarkers returns the markers ("req-07") of the requests resp keeps verbatim after its
// summary.
func keptMarkers(resp *compactorv1.CompactResponse) map[string]bool {
	kept := map[string]bool{}
	n := int(resp.GetSummary().GetRequestsKeptVerbatim())
	for _, m := range resp.GetMessages()[2 : 2+n] {
		kept[m.GetParts()[0].GetText().GetText()[:6]] = true
	}
	return kept
}

func TestCompactOneLLMCallAcrossThreeReplicas(t *testing.T) {
	url := redisURL(t)
	llm := llmtest.NewOpenAI(t)
	llm.Script(nil, 300*time.Millisecond) // keep the first call in flight while the others arrive
	var clients []compactorv1.CompactorServiceClient
	for _, c := range sharedRedis(t, url, 3) {
		clients = append(clients, startReplica(t, replicaConfig{llm: llm, cache: c}))
	}
	msgs := irtest.Conversation(20)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[compactorv1.CacheStatus]int{}
		texts    = map[string]bool{}
	)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := clients[i%3].Compact(t.Context(), compactReq(msgs))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			mu.Lock()
			statuses[resp.GetCacheStatus()]++
			texts[resp.GetSummary().GetText()] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := llm.Calls(); n != 1 {
		t.Errorf("%d calls reached the LLM, want exactly 1", n)
	}
	if len(texts) != 1 {
		t.Errorf("%d different summaries, want 1", len(texts))
	}
	if statuses[compactorv1.CacheStatus_CACHE_STATUS_MISS] != 1 || statuses[compactorv1.CacheStatus_CACHE_STATUS_HIT] != 49 {
		t.Errorf("cache statuses %v, want 1 MISS and 49 HIT", statuses)
	}
}

func TestCompactSurvivesRedisOutage(t *testing.T) {
	redisAt, proxy := proxiedRedis(t)
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm, cache: newRedisCache(t, redisAt, nil)})

	resp, err := client.Compact(t.Context(), compactReq(irtest.Conversation(20)))
	if err != nil || resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_MISS {
		t.Fatalf("with Redis: %v, %v", resp.GetCacheStatus(), err)
	}

	proxy.Stop()
	down := irtest.Conversation(21)
	resp, err = client.Compact(t.Context(), compactReq(down))
	if err != nil {
		t.Fatalf("Redis down: Compact failed: %v", err)
	}
	checkCompacted(t, down, resp)
	if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_UNAVAILABLE {
		t.Errorf("Redis down: cache status %v, want UNAVAILABLE", resp.GetCacheStatus())
	}

	if err := proxy.Start(); err != nil {
		t.Fatalf("proxy restart: %v", err)
	}
	back := irtest.Conversation(23)
	if resp, err = client.Compact(t.Context(), compactReq(back)); err != nil {
		t.Fatal(err)
	}
	if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_MISS {
		t.Errorf("Redis back: cache status %v, want MISS (stored again)", resp.GetCacheStatus())
	}
	calls := llm.Calls()
	if resp, err = client.Compact(t.Context(), compactReq(back)); err != nil {
		t.Fatal(err)
	}
	if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT || llm.Calls() != calls {
		t.Errorf("Redis back, same request: cache %v with %d new LLM calls, want HIT and none", resp.GetCacheStatus(), llm.Calls()-calls)
	}
}

func TestCompactTenantIsolation(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm, cache: newRedisCache(t, redisURL(t), nil)})
	as := func(tenant string) *compactorv1.CompactResponse {
		t.Helper()
		ctx := metadata.AppendToOutgoingContext(t.Context(), service.TenantMetadataKey, tenant)
		resp, err := client.Compact(ctx, compactReq(irtest.Conversation(20)))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := as("tenant-a").GetCacheStatus(); got != compactorv1.CacheStatus_CACHE_STATUS_MISS {
		t.Fatalf("tenant A first: %v", got)
	}
	if got := as("tenant-b").GetCacheStatus(); got != compactorv1.CacheStatus_CACHE_STATUS_MISS {
		t.Errorf("tenant B read tenant A's summary of an identical prefix: %v", got)
	}
	if llm.Calls() != 2 {
		t.Errorf("%d LLM calls, want one per tenant", llm.Calls())
	}
	if got := as("tenant-a").GetCacheStatus(); got != compactorv1.CacheStatus_CACHE_STATUS_HIT {
		t.Errorf("tenant A again: %v, want HIT", got)
	}
}

func TestCompactSummarizerFailures(t *testing.T) {
	tests := []struct {
		name     string
		reply    func(n int64) (int, string)
		delay    time.Duration
		deadline time.Duration
		want     codes.Code
		calls    int64
	}{
		{name: "429 then success", reply: func(n int64) (int, string) {
			if n == 1 {
				return http.StatusTooManyRequests, ""
			}
			return 0, "SUMMARY after a retry"
		}, want: codes.OK, calls: 2},
		{name: "500s exhaust the retries", reply: func(int64) (int, string) { return http.StatusInternalServerError, "" }, want: codes.Unavailable, calls: 3},
		{name: "slow past the deadline", delay: 10 * time.Second, deadline: 300 * time.Millisecond, want: codes.DeadlineExceeded, calls: 1},
		{name: "empty completion", reply: func(int64) (int, string) { return 0, "  \n" }, want: codes.Unavailable, calls: 1},
		// A refused key or request is permanent: FAILED_PRECONDITION, never retried
		// (TestCompactRejectedIsNotRetryable checks the details).
		{name: "401", reply: func(int64) (int, string) { return http.StatusUnauthorized, "" }, want: codes.FailedPrecondition, calls: 1},
		// A summary longer than its budget is cut to it (deterministically), not rejected:
		// a rejection would repeat on every retry.
		{name: "summary as long as its input", reply: func(int64) (int, string) { return 0, strings.Repeat("all of it again ", 3000) }, want: codes.OK, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := llmtest.NewOpenAI(t)
			llm.Script(tt.reply, tt.delay)
			client := startReplica(t, replicaConfig{llm: llm, breaker: summarize.BreakerPolicy{Failures: -1}})
			// Count the conversation once first, so the deadline below is spent on the
			// summarizer and not on loading the tokenizer.
			if _, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: irtest.Conversation(20), Policy: policy()}); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.deadline > 0 {
				var cancel func()
				ctx, cancel = contextWithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			resp, err := client.Compact(ctx, compactReq(irtest.Conversation(20)))
			if status.Code(err) != tt.want {
				t.Fatalf("Compact = %v, want %v", err, tt.want)
			}
			if llm.Calls() != tt.calls {
				t.Errorf("%d LLM calls, want %d", llm.Calls(), tt.calls)
			}
			if err != nil {
				if resp != nil {
					t.Errorf("a failed Compact returned messages: %v", resp)
				}
				// Nothing was half-written: a healthy summarizer now computes (MISS), it does
				// not find a cached result of the failure.
				llm.Script(nil, 0)
				resp, err := client.Compact(t.Context(), compactReq(irtest.Conversation(20)))
				if err != nil || resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_MISS {
					t.Errorf("after the failure: %v, %v; want a fresh MISS", resp.GetCacheStatus(), err)
				}
			}
		})
	}
}

// TestCompactRejectedIsNotRetryable: a provider's 400, 401 or 403 is answered with
// FAILED_PRECONDITION naming the HTTP status and without RetryInfo (a retry meets the same
// answer), the fallback summarizer does not stand in, and nothing of the provider's error
// text beyond its status reaches the caller.
func TestCompactRejectedIsNotRetryable(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden} {
		llm := llmtest.NewOpenAI(t)
		llm.Script(func(int64) (int, string) { return code, "" }, 0)
		client := startReplica(t, replicaConfig{llm: llm, fallback: "extractive"})
		_, err := client.Compact(t.Context(), compactReq(irtest.Conversation(20)))
		st := status.Convert(err)
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				t.Errorf("HTTP %d: RetryInfo %v invites a retry", code, d)
			case *errdetails.ErrorInfo:
				info = d
			}
		}
		if st.Code() != codes.FailedPrecondition || info.GetReason() != "SUMMARIZER_REJECTED" || info.GetMetadata()["status"] != strconv.Itoa(code) {
			t.Errorf("HTTP %d: %v (%v), want FAILED_PRECONDITION with ErrorInfo SUMMARIZER_REJECTED naming the status", code, err, info)
		}
		if strings.Contains(st.Message(), "scripted") || strings.Contains(st.Message(), llm.URL) {
			t.Errorf("HTTP %d: the message repeats the provider's text or address: %q", code, st.Message())
		}
		if llm.Calls() != 1 {
			t.Errorf("HTTP %d: %d calls, want 1", code, llm.Calls())
		}
	}
}

func TestCompactCircuitBreakerOpens(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.Script(func(int64) (int, string) { return http.StatusBadGateway, "" }, 0)
	client := startReplica(t, replicaConfig{llm: llm,
		retry:   summarize.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		breaker: summarize.BreakerPolicy{Failures: 3, Cooldown: time.Hour}})
	for i := range 3 {
		if _, err := client.Compact(t.Context(), compactReq(irtest.Conversation(20+i))); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i, err)
		}
	}
	before := llm.Calls()
	_, err := client.Compact(t.Context(), compactReq(irtest.Conversation(30)))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "circuit") {
		t.Fatalf("with the breaker open: %v, want UNAVAILABLE naming the circuit breaker", err)
	}
	if llm.Calls() != before {
		t.Errorf("the open breaker let %d calls through", llm.Calls()-before)
	}
	// A transient failure invites a retry, and says when: the breaker's cooldown.
	var retry *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() < 59*time.Minute {
		t.Errorf("RetryInfo %v, want the breaker's remaining cooldown (about an hour)", retry)
	}
}

// TestCompactFallsBackToExtractive: with fallback: extractive, a summarizer outage writes an
// extractive summary that says so (response and span), is not cached, and leaves the next
// call to the LLM once it is back.
func TestCompactFallsBackToExtractive(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	llm := llmtest.NewOpenAI(t)
	llm.Script(func(int64) (int, string) { return http.StatusInternalServerError, "" }, 0)
	client := startReplica(t, replicaConfig{llm: llm, tp: tp, fallback: "extractive", cache: cache.NewMemory(cache.MemoryOptions{}),
		retry: summarize.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
	req := compactReq(irtest.Conversation(20))
	resp, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatalf("with a fallback, an LLM outage: %v", err)
	}
	checkCompacted(t, req.Messages, resp)
	if s := resp.GetSummary(); s.GetSummarizer() != "extractive" || s.GetFallbackFrom() != "llm" || s.GetModel() != summarize.ExtractiveModel {
		t.Errorf("summary by %q (model %q), fallback_from %q; want extractive standing in for llm", s.GetSummarizer(), s.GetModel(), s.GetFallbackFrom())
	}
	var saw bool
	for deadline := time.Now().Add(5 * time.Second); !saw && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, sp := range exp.GetSpans() {
			for _, kv := range sp.Attributes {
				saw = saw || (kv.Key == "compactor.summary.fallback_from" && kv.Value.AsString() == "llm")
			}
		}
	}
	if !saw {
		t.Error("no span says the summary fell back")
	}
	llm.Script(func(int64) (int, string) { return 0, "The user asked for fixes; the agent made them." }, 0)
	before := llm.Calls()
	again, err := client.Compact(t.Context(), req)
	if err != nil || again.GetSummary().GetSummarizer() != "llm" || again.GetSummary().GetFallbackFrom() != "" || llm.Calls() == before {
		t.Errorf("once the LLM is back: %v, summary by %q (fallback_from %q), %d LLM calls; want a fresh LLM summary, the fallback not cached",
			err, again.GetSummary().GetSummarizer(), again.GetSummary().GetFallbackFrom(), llm.Calls()-before)
	}
}

func TestCompactSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm, tp: tp, cache: cache.NewMemory(cache.MemoryOptions{TracerProvider: tp})})
	resp, err := client.Compact(t.Context(), compactReq(irtest.Conversation(20)))
	if err != nil {
		t.Fatal(err)
	}
	// The server span ends after the response is on its way (otelgrpc ends it at the call's
	// end event), so the client can have the response before the span is exported.
	spans := exp.GetSpans()
	for deadline := time.Now().Add(5 * time.Second); !hasSpan(spans, "compactor.v1.CompactorService/Compact") && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		spans = exp.GetSpans()
	}
	var server, chat *tracetest.SpanStub
	for i, s := range spans {
		switch {
		case s.Name == "compactor.v1.CompactorService/Compact":
			server = &spans[i]
		case strings.HasPrefix(s.Name, "chat "):
			chat = &spans[i]
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "req-") || strings.Contains(kv.Value.String(), "quick brown fox") {
				t.Errorf("span %s attribute %s carries conversation text", s.Name, kv.Key)
			}
		}
	}
	if server == nil || chat == nil {
		t.Fatalf("want a server span and a chat span, got %d spans: %v", len(spans), spanNames(spans))
	}
	if chat.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("the summarization span is not a child of the server span")
	}
	want := map[attribute.Key]string{
		"gen_ai.operation.name":          "chat",
		"gen_ai.provider.name":           "openai",
		"gen_ai.request.model":           "gpt-test",
		"gen_ai.response.finish_reasons": `["stop"]`,
		"compactor.prefix_hash":          resp.GetPlan().GetPrefixHash(),
		"compactor.cache.hit":            "false",
	}
	got := map[attribute.Key]string{}
	for _, kv := range chat.Attributes {
		got[kv.Key] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("chat span %s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []attribute.Key{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "compactor.messages.summarized", "compactor.tokens.before", "compactor.tokens.after"} {
		if got[k] == "" || got[k] == "0" {
			t.Errorf("chat span lacks %s (got %q)", k, got[k])
		}
	}
	hit := false
	for _, kv := range server.Attributes {
		if kv.Key == "compactor.cache.hit" {
			hit = true
		}
	}
	if !hit {
		t.Error("server span lacks compactor.cache.hit")
	}
	checked := map[attribute.Key]int64{}
	for _, kv := range server.Attributes {
		if strings.HasPrefix(string(kv.Key), "compactor.check.") && kv.Value.Type() == attribute.INT64 {
			checked[kv.Key] = kv.Value.AsInt64()
		}
	}
	if checked["compactor.check.requests.total"] == 0 ||
		checked["compactor.check.requests.total"] != int64(resp.GetSummary().GetRequestsTotal()) ||
		checked["compactor.check.requests.appended"] != int64(resp.GetSummary().GetRequestsAppended()) {
		t.Errorf("server span check attributes %v do not match the summary's check %v", checked, resp.GetSummary())
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestCompactActionsAndOptions(t *testing.T) {
	client := startReplica(t, replicaConfig{llm: llmtest.NewOpenAI(t)})
	msgs := irtest.Conversation(20)

	none, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 200_000}})
	if err != nil {
		t.Fatal(err)
	}
	if none.GetCompacted() || len(none.GetMessages()) != 0 || none.GetPlan().GetAction() != compactorv1.Action_ACTION_NONE {
		t.Errorf("under the trigger: compacted %v with %d messages", none.GetCompacted(), len(none.GetMessages()))
	}

	prune, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 14_000}})
	if err != nil {
		t.Fatal(err)
	}
	if prune.GetPlan().GetAction() != compactorv1.Action_ACTION_PRUNE || !prune.GetCompacted() || len(prune.GetMessages()) != len(msgs) || prune.GetSummary() != nil {
		t.Fatalf("prune: action %v, compacted %v, %d messages", prune.GetPlan().GetAction(), prune.GetCompacted(), len(prune.GetMessages()))
	}
	marked := 0
	for _, m := range prune.GetMessages() {
		for _, p := range m.GetParts() {
			if out := p.GetToolResult().GetOutput().GetText(); out != "" && !strings.HasPrefix(out, "out-") {
				marked++
			}
		}
	}
	if marked == 0 {
		t.Error("prune: no tool output was replaced by a marker")
	}

	req := &compactorv1.CompactRequest{Messages: msgs, Policy: policy(), EmitCompactPrompt: true, Instructions: "focus on m07.go"}
	ext, err := client.Compact(t.Context(), req) // the default summarizer: extractive
	if err != nil {
		t.Fatal(err)
	}
	out := ext.GetMessages()
	if ext.GetSummary().GetSummarizer() != "extractive" || len(out) < 3 ||
		out[1].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT ||
		out[2].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
		t.Fatalf("extractive with compact prompt: summarizer %q, kinds %v", ext.GetSummary().GetSummarizer(), kinds(out))
	}
	if !strings.Contains(out[1].GetParts()[0].GetText().GetText(), "focus on m07.go") {
		t.Error("the compact prompt does not record the instructions")
	}

	_, err = client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Policy: policy(), Summarizer: "gpt-99"})
	if f := BadRequestField(t, err, codes.InvalidArgument); f != "summarizer" {
		t.Errorf("unknown summarizer: field %q", f)
	}
}

func kinds(msgs []*compactorv1.Message) []compactorv1.MessageKind {
	var out []compactorv1.MessageKind
	for _, m := range msgs {
		out = append(out, m.GetKind())
	}
	return out
}

// hasSpan reports whether spans holds one named name.
func hasSpan(spans tracetest.SpanStubs, name string) bool {
	for _, s := range spans {
		if s.Name == name {
			return true
		}
	}
	return false
}

// TestCompactBoundsInstructionsAndAnchor: instructions go into the summarizer's prompt
// whole, so they may take at most the policy's summary room (RESOURCE_EXHAUSTED naming
// instructions beyond it); the previous summary a new one builds on is cut to that room when
// it is more than twice as long, so a caller's oversized COMPACT_SUMMARY text never reaches
// the model whole.
func TestCompactBoundsInstructionsAndAnchor(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{})})
	req := compactReq(irtest.Conversation(20))
	req.Instructions = strings.Repeat("keep every path ", 1000) // about 3000 tokens
	_, err := client.Compact(t.Context(), req)
	if field := BadRequestField(t, err, codes.ResourceExhausted); field != "instructions" {
		t.Errorf("instructions past the summary room: field %q", field)
	}
	req.Policy.SummaryMaxTokens = 4000
	if _, err := client.Compact(t.Context(), req); err != nil {
		t.Errorf("the same instructions within a 4000-token summary room: %v", err)
	}

	anchor := "ANCHOR-HEAD " + strings.Repeat("an earlier summary that goes on and on. ", 4000) + " ANCHOR-TAIL"
	msgs := irtest.Conversation(20)
	msgs = append(msgs[:1], append([]*compactorv1.Message{engine.SummaryMessage(anchor, 40, 0)}, msgs[1:]...)...)
	big := &compactorv1.CompactRequest{Messages: msgs, Summarizer: "llm", Force: true,
		Policy: &compactorv1.Policy{ContextWindow: 200_000, Prune: &compactorv1.PrunePolicy{Disabled: true}}}
	before := llm.Calls()
	if _, err := client.Compact(t.Context(), big); err != nil {
		t.Fatal(err)
	}
	if llm.Calls() != before+1 {
		t.Fatalf("%d LLM calls, want 1", llm.Calls()-before)
	}
	body := llm.Body(int(before + 1))
	if !strings.Contains(body, "ANCHOR-HEAD") || !strings.Contains(body, "ANCHOR-TAIL") || !strings.Contains(body, "bytes omitted") || len(body) > len(anchor)/2 {
		t.Errorf("a %d-byte anchor reached the model in a %d-byte request: want it cut to the summary room, head and tail kept", len(anchor), len(body))
	}
}

func TestCompactFoldsRequestsACachedSummaryLeftOut(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{})})
	msgs := irtest.Conversation(20)

	// A target as high as the trigger: the cut is where the tail budget puts it, whatever the
	// requests kept verbatim cost, so both compactions below cut the same prefix.
	keepingReq := compactReq(msgs)
	keepingReq.Policy.TargetRatio = engine.DefaultTriggerRatio
	keeping, err := client.Compact(t.Context(), keepingReq)
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, msgs, keeping)
	kept := keptMarkers(keeping)
	if len(kept) < 2 {
		t.Fatalf("the first compaction keeps %d requests verbatim; the test needs some beside the newest", len(kept))
	}

	// The same prefix, compacted by a policy that keeps only the newest request: the cached
	// summary left the others out, so it cannot serve as it is.
	req := compactReq(msgs)
	req.Policy.KeepUserMessagesTokens, req.Policy.TargetRatio = -1, engine.DefaultTriggerRatio
	newest, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, msgs, newest)
	if newest.GetPlan().GetCutIndex() != keeping.GetPlan().GetCutIndex() {
		t.Fatalf("cut %d then %d: the test needs the same prefix", keeping.GetPlan().GetCutIndex(), newest.GetPlan().GetCutIndex())
	}
	if newest.GetCacheStatus() == compactorv1.CacheStatus_CACHE_STATUS_HIT || llm.Calls() != 2 {
		t.Fatalf("cache %v after %d LLM calls: a summary that left out requests the compaction does not keep was served", newest.GetCacheStatus(), llm.Calls())
	}
	prompt := llm.Body(2)
	anchor, _ := json.Marshal(keeping.GetSummary().GetText())
	if !strings.Contains(prompt, string(anchor[1:len(anchor)-1])) {
		t.Error("the new summary was not built on the cached one")
	}
	released := keptMarkers(newest)
	for marker := range kept {
		if released[marker] {
			continue
		}
		if !strings.Contains(prompt, marker) {
			t.Errorf("%s, kept beside the cached summary and no longer kept, was not sent to the summarizer", marker)
		}
	}

	// The entry stored now holds every request: the first policy is served it as it is.
	again, err := client.Compact(t.Context(), keepingReq)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT || llm.Calls() != 2 {
		t.Errorf("cache %v after %d LLM calls: the summary holding every request was not served to a compaction keeping some", again.GetCacheStatus(), llm.Calls())
	}
}

// TestCompactDoesNotServeASummaryWrittenForASmallerRoom holds issue 37's case: a compaction
// with a small summary room stores a summary of a prefix that had to leave requests out; a
// later compaction of the same prefix with a larger room must not be served it (nor build on
// it), but keep what a compaction with nothing cached keeps.
func TestCompactDoesNotServeASummaryWrittenForASmallerRoom(t *testing.T) {
	msgs := irtest.Conversation(40)
	req := func(room int64) *compactorv1.CompactRequest {
		// A target as high as the trigger and no request kept verbatim: the cut is where the
		// tail budget puts it, whatever the summary room, and the summary holds the requests.
		return &compactorv1.CompactRequest{Messages: msgs, Force: true, Policy: &compactorv1.Policy{
			ContextWindow: 12000, SummaryMaxTokens: room, TargetRatio: engine.DefaultTriggerRatio, KeepUserMessagesTokens: -1}}
	}
	ctx := t.Context()
	cold, err := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})}).Compact(ctx, req(0))
	if err != nil {
		t.Fatal(err)
	}
	srv := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})})
	small, err := srv.Compact(ctx, req(150))
	if err != nil {
		t.Fatal(err)
	}
	s := small.GetSummary()
	if s.GetRequestsRetained()+s.GetRequestsAppended() >= s.GetRequestsTotal() {
		t.Fatalf("the small room's summary holds all %d requests: the test needs one that left some out", s.GetRequestsTotal())
	}
	if small.GetPlan().GetCutIndex() != cold.GetPlan().GetCutIndex() {
		t.Fatalf("cut %d then %d: the test needs the same prefix", small.GetPlan().GetCutIndex(), cold.GetPlan().GetCutIndex())
	}
	warm, err := srv.Compact(ctx, req(0))
	if err != nil {
		t.Fatal(err)
	}
	if warm.GetCacheStatus() == compactorv1.CacheStatus_CACHE_STATUS_HIT {
		t.Errorf("the summary written for a room of 150 tokens, which left requests out, served a compaction with a room of %d", warm.GetPlan().GetSummaryTokens())
	}
	if got, want := warm.GetSummary().GetText(), cold.GetSummary().GetText(); got != want {
		t.Errorf("warm summary differs from the cold one:\n%s\n--- cold:\n%s", got, want)
	}
	again, err := srv.Compact(ctx, req(0))
	if err != nil {
		t.Fatal(err)
	}
	if again.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT {
		t.Errorf("cache %v: the summary written for this room was not stored for the next call", again.GetCacheStatus())
	}
}

// TestCompactRangeAfterAHeadTaskQuotesNoObservation: a mini-swe-agent task is standing
// instructions with the user's words, kept in the head; the summarized range after it starts
// with a tool observation posing as a user turn (<returncode>…), which is no request: the
// summary does not quote it as one, and the check neither appends it nor reports a request
// dropped.
func TestCompactRangeAfterAHeadTaskQuotesNoObservation(t *testing.T) {
	client := startReplica(t, replicaConfig{cache: cache.NewMemory(cache.MemoryOptions{})})
	msgs := liftCorpus(t, client, "minisweagent-gemini3-django__django-11141.openai.json")
	if !engine.HeadTask(msgs[:2]) {
		t.Fatal("the corpus's mini-swe-agent task is not a head task: the test proves nothing")
	}
	resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs[:56], Force: true,
		Policy: &compactorv1.Policy{ContextWindow: 13000}})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetCompacted() {
		t.Fatalf("not compacted: %s", resp.GetReason())
	}
	for _, m := range resp.GetMessages() {
		if m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			continue
		}
		text := engine.SummaryText(m)
		if _, reqs, ok := strings.Cut(text, "## User requests (verbatim)"); ok {
			reqs, _, _ = strings.Cut(reqs, "\n## ")
			if strings.Contains(reqs, "<returncode>") {
				t.Errorf("the summary quotes a tool observation as a request:\n%s", reqs)
			}
		}
		if strings.Contains(text, "Request 1") && strings.Contains(text, "<returncode>") {
			t.Errorf("the check appended a tool observation as a request:\n%s", text)
		}
	}
	if d := resp.GetSummary().GetRequestsDropped(); len(d) > 0 {
		t.Errorf("requests dropped %v, warnings %q: the range has no request the summary could not hold", d, resp.GetWarnings())
	}
}
