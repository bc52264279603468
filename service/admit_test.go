package service_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/limit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestCompactSummarizerTokenBudget: LLM summaries spend the tenant's token budget; once it is
// spent, a Compact that needs a new LLM summary is refused with RESOURCE_EXHAUSTED naming
// summarizer_tokens, while cache hits and the extractive summarizer (no tokens) still serve.
func TestCompactSummarizerTokenBudget(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	enf := limit.New(limit.Config{Default: limit.Quota{SummarizerTokens: 100, TokenWindow: time.Hour}}, limit.Options{})
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{}), admit: limit.Admission{Enforcer: enf}})
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-compactor-tenant", "acme")

	first := compactReq(irtest.Conversation(20))
	if _, err := client.Compact(ctx, first); err != nil {
		t.Fatal(err)
	}
	if llm.Calls() == 0 {
		t.Fatal("the first Compact made no LLM call")
	}
	other := compactReq(irtest.Conversation(22))
	other.Messages[1] = irtest.User("A different task: " + strings.Repeat("port the parser ", 20))
	_, err := client.Compact(ctx, other)
	if !quotaRefusal(err, limit.SummarizerTokens) {
		t.Fatalf("a new LLM summary over the budget: %v (%v), want RESOURCE_EXHAUSTED naming %s", err, status.Convert(err).Details(), limit.SummarizerTokens)
	}
	if hit, err := client.Compact(ctx, first); err != nil || hit.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT {
		t.Errorf("a cache hit over the budget: %v, %v", err, hit.GetCacheStatus())
	}
	other.Summarizer = "extractive"
	if _, err := client.Compact(ctx, other); err != nil {
		t.Errorf("the extractive summarizer over the budget: %v", err)
	}
	globex := metadata.AppendToOutgoingContext(t.Context(), "x-compactor-tenant", "globex")
	other.Summarizer = "llm"
	before := llm.Calls()
	if _, err := client.Compact(globex, other); err != nil || llm.Calls() == before {
		t.Errorf("another tenant's LLM summary: %v (LLM calls %d → %d)", err, before, llm.Calls())
	}
}

// quotaRefusal reports whether err is RESOURCE_EXHAUSTED with a QuotaFailure naming the
// per-tenant limit name.
func quotaRefusal(err error, name string) bool {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && strings.HasPrefix(q.Violations[0].Description, name) {
			return st.Code() == codes.ResourceExhausted
		}
	}
	return false
}

// recordingSummaryAdmitter admits every summarizer call and records the estimates and the
// tokens spent.
type recordingSummaryAdmitter struct {
	mu               sync.Mutex
	estimates, spent []int64
}

func (r *recordingSummaryAdmitter) AdmitSummary(_ context.Context, _ string, estimate int64) (func(int64), error) {
	r.mu.Lock()
	r.estimates = append(r.estimates, estimate)
	r.mu.Unlock()
	return func(n int64) {
		r.mu.Lock()
		r.spent = append(r.spent, n)
		r.mu.Unlock()
	}, nil
}

// TestCompactAdmitsLLMByKind: whether a summary spends the token budget depends on the
// summarizer's kind, not its model's name: an LLM whose model is called "extractive" is
// admitted and charged like any other, with an estimate covering what it was sent and the
// summary; the extractive summarizer is not.
func TestCompactAdmitsLLMByKind(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	admit := &recordingSummaryAdmitter{}
	client := startReplica(t, replicaConfig{llm: llm, model: "extractive", admit: admit, cache: cache.NewMemory(cache.MemoryOptions{})})
	if _, err := client.Compact(t.Context(), compactReq(irtest.Conversation(20))); err != nil {
		t.Fatal(err)
	}
	local := compactReq(irtest.Conversation(22))
	local.Summarizer = "extractive"
	if _, err := client.Compact(t.Context(), local); err != nil {
		t.Fatal(err)
	}
	admit.mu.Lock()
	defer admit.mu.Unlock()
	if len(admit.estimates) != 1 || len(admit.spent) != 1 || llm.Calls() != 1 {
		t.Fatalf("estimates %v, spent %v, LLM calls %d: want one admitted LLM call", admit.estimates, admit.spent, llm.Calls())
	}
	if admit.estimates[0] < 1000 || admit.spent[0] <= 0 {
		t.Errorf("estimate %d, spent %d: want an estimate of the input and the summary, and the tokens spent", admit.estimates[0], admit.spent[0])
	}
}
