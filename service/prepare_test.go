package service_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// prepLatency is the fake LLM's latency in these tests: long enough that a Compact answered
// from a prepared summary is visibly not waiting for a model, short enough for the race
// detector on two cores.
const prepLatency = 300 * time.Millisecond

// prepPolicy puts irtest.Conversation(20) (≈10.4k tokens) between its prepare ratio (0.5 of
// the usable 14,400) and its trigger (11,520), pruning off; Conversation(24) is above it.
func prepPolicy() *compactorv1.Policy {
	return &compactorv1.Policy{ContextWindow: 16000, PrepareRatio: 0.5, Prune: &compactorv1.PrunePolicy{Disabled: true}}
}

// lockedBuffer is a log destination safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// prepServer serves a Server with an "llm" summarizer (OpenAI protocol, pointed at llm) and
// an in-memory cache on a real loopback port; it returns the Server (for Shutdown), a client
// and the server's log.
func prepServer(t *testing.T, llm *llmtest.Server, admit service.SummaryAdmitter) (*service.Server, compactorv1.CompactorServiceClient, *lockedBuffer) {
	t.Helper()
	return breakerPrepServer(t, llm, admit, summarize.BreakerPolicy{})
}

// breakerPrepServer is prepServer with the summarizer's circuit breaker set to breaker (zero:
// the default) and its calls tried once when it is set.
func breakerPrepServer(t *testing.T, llm *llmtest.Server, admit service.SummaryAdmitter, breaker summarize.BreakerPolicy) (*service.Server, compactorv1.CompactorServiceClient, *lockedBuffer) {
	t.Helper()
	retry := summarize.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	if breaker != (summarize.BreakerPolicy{}) {
		retry.MaxAttempts = 1
	}
	reg, err := summarize.NewRegistry(&summarize.Config{Summarizers: []summarize.SummarizerConfig{{
		Name: "llm", Kind: "openai", BaseURL: llm.URL + "/v1", Model: "gpt-test", Timeout: 10 * time.Second,
	}}}, "", summarize.Options{Retry: retry, Breaker: breaker})
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	srv := service.New(service.Options{Summarizers: reg, Cache: cache.NewMemory(cache.MemoryOptions{}), Admit: admit,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	_, conn := serveTCP(t, srv, service.GRPCOptions{})
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv, compactorv1.NewCompactorServiceClient(conn), log
}

// waitCalls waits until the fake LLM has answered n calls and the preparations are done.
func waitCalls(t *testing.T, llm *llmtest.Server, n int64) {
	t.Helper()
	if !eventually(func() bool { return llm.Calls() >= n }) {
		t.Fatalf("%d LLM calls, want %d", llm.Calls(), n)
	}
}

// TestPlanPreparesAheadOfTheTrigger: a Plan between prepare_ratio and the trigger starts the
// summary of the range a compaction would fold now, detached; the Compact at the trigger,
// turns later, builds on it: its one LLM call is given the prepared summary as its anchor and
// only the messages after the prepared range, and a Compact of the prepared range itself is
// served the prepared summary with no call.
func TestPlanPreparesAheadOfTheTrigger(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.Script(nil, prepLatency)
	admit := &recordingSummaryAdmitter{}
	_, client, _ := prepServer(t, llm, admit)
	early := irtest.Conversation(20)
	plan, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: early, Policy: prepPolicy(), Summarizer: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.GetAction() != compactorv1.Action_ACTION_NONE || plan.GetTokensBefore() <= plan.GetUsableTokens()/2 {
		t.Fatalf("plan %v at %d tokens of %d usable: want a conversation between the prepare ratio and the trigger",
			plan.GetAction(), plan.GetTokensBefore(), plan.GetUsableTokens())
	}
	waitCalls(t, llm, 1)
	if !strings.Contains(llm.Body(1), "req-00") {
		t.Fatalf("the preparation's LLM call does not hold the conversation's start: %.200q", llm.Body(1))
	}

	// The range the preparation folded, compacted (forced: it is under the trigger): served
	// the prepared summary, no call.
	forced := &compactorv1.CompactRequest{Messages: early, Policy: prepPolicy(), Summarizer: "llm", Force: true}
	resp, err := client.Compact(t.Context(), forced)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT || !strings.HasPrefix(resp.GetSummary().GetText(), "SUMMARY-1:") || llm.Calls() != 1 {
		t.Fatalf("cache %v, summary %.40q, %d LLM calls: want the prepared summary, served with no call", resp.GetCacheStatus(), resp.GetSummary().GetText(), llm.Calls())
	}
	prepCut := int(resp.GetPlan().GetCutIndex())

	// Four turns later, at the trigger: one incremental call, anchored on the prepared summary.
	late := irtest.Conversation(24)
	resp, err = client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: late, Policy: prepPolicy(), Summarizer: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, late, resp)
	if llm.Calls() != 2 || !strings.HasPrefix(resp.GetSummary().GetText(), "SUMMARY-2:") {
		t.Fatalf("%d LLM calls, summary %.40q: want one incremental call", llm.Calls(), resp.GetSummary().GetText())
	}
	body := llm.Body(2)
	if !strings.Contains(body, "SUMMARY-1:") {
		t.Errorf("the incremental call is not anchored on the prepared summary: %.300q", body)
	}
	for i := 0; 4+4*i < prepCut; i++ { // turn i: req at 1+4i, call, out-i at 3+4i, ans-i at 4+4i
		for _, marker := range []string{fmt.Sprintf("out-%02d", i), fmt.Sprintf("ans-%02d", i)} {
			if strings.Contains(body, marker) {
				t.Errorf("the incremental call was sent %s, which the prepared summary covers", marker)
			}
		}
	}
	admit.mu.Lock()
	defer admit.mu.Unlock()
	if len(admit.estimates) != 2 {
		t.Errorf("%d summarizer calls admitted, want 2: the preparation's is under the tenant's budget too", len(admit.estimates))
	}
}

// TestCompactPrepareThenTrigger: Compact with prepare answers while the model has not yet
// answered the preparation; a Compact of the same conversation arriving while it computes
// waits for it, and one arriving after is served it from the cache: one LLM call in all, and
// each answer holds the prepared summary.
func TestCompactPrepareThenTrigger(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	arrived, release := llm.Hold()
	defer release()
	_, client, _ := prepServer(t, llm, nil)
	msgs := irtest.Conversation(24)
	req := &compactorv1.CompactRequest{Messages: msgs, Policy: prepPolicy(), Summarizer: "llm"}
	prep := proto.Clone(req).(*compactorv1.CompactRequest)
	prep.Prepare = true
	resp, err := client.Compact(t.Context(), prep) // answered while the model is held
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetCompacted() || !strings.HasPrefix(resp.GetReason(), "preparing the summary of messages") ||
		resp.GetPlan().GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		t.Fatalf("compacted %v, reason %q, plan %v: want an answer saying a preparation started", resp.GetCompacted(), resp.GetReason(), resp.GetPlan().GetAction())
	}
	<-arrived
	joined := compactAsync(t, client, req) // while the preparation computes
	time.Sleep(100 * time.Millisecond)
	release()
	r := <-joined
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkCompacted(t, msgs, r.resp)
	hit, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if hit.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT {
		t.Errorf("cache %v after the preparation, want a hit", hit.GetCacheStatus())
	}
	for _, r := range []*compactorv1.CompactResponse{r.resp, hit} {
		if !strings.HasPrefix(r.GetSummary().GetText(), "SUMMARY-1:") {
			t.Errorf("summary %.40q, want the prepared one", r.GetSummary().GetText())
		}
	}
	if llm.Calls() != 1 {
		t.Errorf("%d LLM calls, want the preparation's alone", llm.Calls())
	}
	// Preparing what is cached starts nothing.
	if _, err := client.Compact(t.Context(), prep); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if llm.Calls() != 1 {
		t.Errorf("preparing a cached range made an LLM call")
	}
}

// TestPreparedSummaryServesOnlyItsRange: a prepared summary is never served for a range it
// does not cover: a conversation that differs inside the prepared range, and one that ends
// before it, get summaries of their own.
func TestPreparedSummaryServesOnlyItsRange(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	_, client, _ := prepServer(t, llm, nil)
	msgs := irtest.Conversation(24)
	prep := &compactorv1.CompactRequest{Messages: msgs, Policy: prepPolicy(), Summarizer: "llm", Prepare: true}
	resp, err := client.Compact(t.Context(), prep)
	if err != nil {
		t.Fatal(err)
	}
	cut := int(resp.GetPlan().GetCutIndex())
	waitCalls(t, llm, 1)

	edited := irtest.Conversation(24)
	edited[cut-1] = irtest.Assistant("ans-xx: a different answer inside the prepared range.")
	shorter := irtest.Conversation(24)[:cut-2]
	for name, m := range map[string][]*compactorv1.Message{"edited": edited, "shorter": shorter} {
		calls := llm.Calls()
		resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: m, Policy: prepPolicy(), Summarizer: "llm", Force: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.HasPrefix(resp.GetSummary().GetText(), "SUMMARY-1:") || resp.GetCacheStatus() == compactorv1.CacheStatus_CACHE_STATUS_HIT || llm.Calls() != calls+1 {
			t.Errorf("%s: cache %v, summary %.40q: the prepared summary served a range it does not cover", name, resp.GetCacheStatus(), resp.GetSummary().GetText())
		}
	}
}

// TestPreparationUnderTheBreaker: a preparation is a call of the summarizer like the
// Compacts': with its circuit breaker open, Compact with prepare still answers at once, and
// the preparation fails at the breaker (logged) without calling the model.
func TestPreparationUnderTheBreaker(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.Script(func(int64) (int, string) { return http.StatusBadGateway, "" }, 0)
	_, client, log := breakerPrepServer(t, llm, nil, summarize.BreakerPolicy{Failures: 2, Cooldown: time.Hour})
	for i := range 2 {
		req := &compactorv1.CompactRequest{Messages: irtest.Conversation(24 + i), Policy: prepPolicy(), Summarizer: "llm", Force: true}
		if _, err := client.Compact(t.Context(), req); err == nil {
			t.Fatalf("call %d: the failing model served a summary", i)
		}
	}
	before := llm.Calls()
	resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: irtest.Conversation(30), Policy: prepPolicy(), Summarizer: "llm", Prepare: true})
	if err != nil || !strings.HasPrefix(resp.GetReason(), "preparing the summary") {
		t.Fatalf("prepare with the breaker open: %v, reason %q; want the preparation started", err, resp.GetReason())
	}
	if !eventually(func() bool { return strings.Contains(log.String(), "preparing a summary failed") }) {
		t.Fatalf("the preparation did not fail; log:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "circuit breaker open") || llm.Calls() != before {
		t.Errorf("the preparation made %d calls with the breaker open; log:\n%s", llm.Calls()-before, log.String())
	}
}

// TestPreparationFailureDoesNotFailCompact: a preparation whose LLM call fails (permanently:
// no retry) is only logged; a Compact that joined it while it ran, and one after, summarize
// as if nothing had been prepared.
func TestPreparationFailureDoesNotFailCompact(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.Script(func(n int64) (int, string) {
		if n == 1 {
			return 400, ""
		}
		return 200, "SUMMARY-ok: the user asked for the tasks quoted above."
	}, 0)
	arrived, release := llm.Hold()
	_, client, log := prepServer(t, llm, nil)
	msgs := irtest.Conversation(24)
	req := &compactorv1.CompactRequest{Messages: msgs, Policy: prepPolicy(), Summarizer: "llm"}
	prep := proto.Clone(req).(*compactorv1.CompactRequest)
	prep.Prepare = true
	if _, err := client.Compact(t.Context(), prep); err != nil {
		t.Fatal(err)
	}
	<-arrived
	joined := compactAsync(t, client, req)
	time.Sleep(100 * time.Millisecond) // the Compact joins the preparation's computation
	release()
	r := <-joined
	if r.err != nil {
		t.Fatalf("a Compact that joined a failed preparation failed: %v", r.err)
	}
	checkCompacted(t, msgs, r.resp)
	if !strings.HasPrefix(r.resp.GetSummary().GetText(), "SUMMARY-ok:") {
		t.Errorf("summary %.40q", r.resp.GetSummary().GetText())
	}
	if !eventually(func() bool { return strings.Contains(log.String(), "preparing a summary failed") }) {
		t.Errorf("the failed preparation is not logged: %s", log.String())
	}
	if strings.Contains(log.String(), "req-0") {
		t.Errorf("the log holds conversation content: %s", log.String())
	}
}

// TestShutdownCancelsPreparations: Shutdown cancels a preparation waiting on its model and
// waits for it, leaving no goroutine of it behind; no preparation starts after.
func TestShutdownCancelsPreparations(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	arrived, release := llm.Hold()
	defer release()
	srv, client, _ := prepServer(t, llm, nil)
	if _, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: irtest.Conversation(2), Policy: prepPolicy()}); err != nil {
		t.Fatal(err) // the connection's goroutines, before counting
	}
	before := runtime.NumGoroutine()
	msgs := irtest.Conversation(24)
	if _, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Policy: prepPolicy(), Summarizer: "llm", Prepare: true}); err != nil {
		t.Fatal(err)
	}
	<-arrived
	if n := runtime.NumGoroutine(); n <= before {
		t.Fatalf("%d goroutines with a preparation running, %d before: the count cannot see it", n, before)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !eventually(func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Shutdown, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
	resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Policy: prepPolicy(), Summarizer: "llm", Prepare: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.GetReason(), "shutting down") {
		t.Errorf("reason %q after Shutdown", resp.GetReason())
	}
}

// compactResult is one Compact's answer.
type compactResult struct {
	resp *compactorv1.CompactResponse
	err  error
}

// compactAsync sends req in its own goroutine; the channel receives its answer.
func compactAsync(t *testing.T, client compactorv1.CompactorServiceClient, req *compactorv1.CompactRequest) <-chan compactResult {
	joined := make(chan compactResult, 1)
	go func() {
		r, err := client.Compact(t.Context(), req)
		joined <- compactResult{r, err}
	}()
	return joined
}

// TestPreparationHoldsItsLeasePastTheCallersDeadline: a preparation outlives the Compact that
// asked for it, and so does that Compact's concurrent-Compacts lease on Redis: a second
// Compact of the tenant is refused while the preparation still runs, well after the first
// Compact's deadline (the lease used to expire with it, a second after).
func TestPreparationHoldsItsLeasePastTheCallersDeadline(t *testing.T) {
	opt, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	llm := llmtest.NewOpenAI(t)
	arrived, release := llm.Hold()
	defer release()
	enf := limit.New(limit.Config{Default: limit.Quota{ConcurrentCompacts: 1}}, limit.Options{Redis: rdb})
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{}),
		unary: []grpc.UnaryServerInterceptor{enf.UnaryServerInterceptor()}})
	tenant := metadata.AppendToOutgoingContext(t.Context(), auth.TenantKey, fmt.Sprintf("lease-%d", time.Now().UnixNano()))

	deadline := time.Now().Add(3 * time.Second)
	short, stop := context.WithDeadline(tenant, deadline)
	req := compactReq(irtest.Conversation(20))
	req.Prepare = true
	_, err = client.Compact(short, req)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	<-arrived // the preparation is with the model, and stays there
	time.Sleep(time.Until(deadline) + 2500*time.Millisecond)
	other := compactReq(irtest.Conversation(22))
	other.Messages[1] = irtest.User("A different task: " + strings.Repeat("port the parser ", 20))
	ctx, cancel := context.WithTimeout(tenant, time.Second)
	defer cancel()
	if _, err := client.Compact(ctx, other); !quotaRefusal(err, limit.ConcurrentCompacts) {
		t.Errorf("a second Compact 2.5 s after the first one's deadline, its preparation still running: %v, want RESOURCE_EXHAUSTED naming %s", err, limit.ConcurrentCompacts)
	}
}
