package service_test

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
)

const agentModel = "claude-test"

// agentTurns sends the agent's model requests of msgs to p as an Anthropic agent does: one
// per user or tool message that an assistant message answers, a breakpoint on its last
// message.
func agentTurns(t *testing.T, p *llmtest.Provider, msgs []*compactorv1.Message) {
	t.Helper()
	for k := 1; k < len(msgs); k++ {
		if msgs[k].GetRole() != compactorv1.Role_ROLE_ASSISTANT || msgs[k-1].GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			continue
		}
		last := proto.Clone(msgs[k-1]).(*compactorv1.Message)
		part := last.Parts[len(last.Parts)-1]
		part.ProviderOptions = map[string]*structpb.Struct{"anthropic": {Fields: map[string]*structpb.Value{
			"cacheControl": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("ephemeral")}})}}}
		sent := append(append([]*compactorv1.Message{}, msgs[:k-1]...), last)
		low, err := format.Lower(&compactorv1.LowerRequest{Messages: sent, Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
			BaseBody: `{"model":"` + agentModel + `","max_tokens":1000}`})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(p.URL+"/v1/messages", "application/json", strings.NewReader(low.GetBody()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// TestCompactReportsUsageAndReadsTheAgentsCache holds CompactResponse.summary's usage and cost
// to what the provider billed, and the summary request sent as the agent's own to a cache
// read of the conversation.
func TestCompactReportsUsageAndReadsTheAgentsCache(t *testing.T) {
	msgs := irtest.Conversation(20)
	prices := summarize.Prices{{Model: agentModel, Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15}}
	for _, agent := range []bool{false, true} {
		p := llmtest.NewProvider(t)
		agentTurns(t, p, msgs)
		exp := tracetest.NewInMemoryExporter()
		reg, err := summarize.NewRegistry(&summarize.Config{Prices: prices, Summarizers: []summarize.SummarizerConfig{{
			Name: "llm", Kind: summarize.KindAnthropic, BaseURL: p.URL, Model: agentModel, Timeout: 10 * time.Second}}},
			"", summarize.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
		if err != nil {
			t.Fatal(err)
		}
		_, conn := serveTCP(t, service.New(service.Options{Summarizers: reg, Cache: cache.NewMemory(cache.MemoryOptions{})}), service.GRPCOptions{})
		req := compactReq(msgs)
		if agent {
			req.AgentRequest = &compactorv1.AgentRequest{Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, Model: agentModel}
		}
		resp, err := compactorv1.NewCompactorServiceClient(conn).Compact(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		calls := p.Calls()
		bill, s := calls[len(calls)-1], resp.GetSummary()
		if s.GetInputTokens() != bill.Input+bill.CacheRead+bill.CacheWrite || s.GetCacheReadInputTokens() != bill.CacheRead ||
			s.GetCacheCreationInputTokens() != bill.CacheWrite || s.GetOutputTokens() != bill.Output {
			t.Errorf("agent_request %v: summary usage %d in (%d read, %d written), %d out; billed %+v", agent,
				s.GetInputTokens(), s.GetCacheReadInputTokens(), s.GetCacheCreationInputTokens(), s.GetOutputTokens(), bill)
		}
		want := (float64(bill.Input)*3 + float64(bill.CacheRead)*0.3 + float64(bill.CacheWrite)*3.75 + float64(bill.Output)*15) / 1e6
		if math.Abs(s.GetEstimatedCost()-want) > 1e-12 || want == 0 {
			t.Errorf("agent_request %v: estimated_cost %g, want %g", agent, s.GetEstimatedCost(), want)
		}
		var span sdktrace.ReadOnlySpan
		for _, sp := range exp.GetSpans().Snapshots() {
			if strings.HasPrefix(sp.Name(), "chat ") {
				span = sp
			}
		}
		got := map[string]int64{}
		for _, a := range span.Attributes() {
			got[string(a.Key)] = a.Value.AsInt64()
		}
		if got["gen_ai.usage.cache_read.input_tokens"] != bill.CacheRead || got["gen_ai.usage.cache_creation.input_tokens"] != bill.CacheWrite ||
			got["gen_ai.usage.input_tokens"] != s.GetInputTokens() {
			t.Errorf("agent_request %v: span usage %v, billed %+v", agent, got, bill)
		}
		if read := s.GetCacheReadInputTokens(); agent != (read > s.GetInputTokens()/2) {
			t.Errorf("agent_request %v: %d of %d input tokens read from the agent's cache", agent, read, s.GetInputTokens())
		}
	}
}
