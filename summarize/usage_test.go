package summarize

import (
	"context"
	"math"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/llmtest"
)

// testPrices is a price table for the tests (made-up figures, per million tokens).
var testPrices = Prices{{Model: "test-*", Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15}}

// usageFixture is an LLM summarizer of kind against a llmtest.Provider, its spans recorded.
func usageFixture(t *testing.T, kind string, cfg SummarizerConfig) (*LLM, *llmtest.Provider, *tracetest.InMemoryExporter) {
	t.Helper()
	p := llmtest.NewProvider(t)
	exp := tracetest.NewInMemoryExporter()
	opt := Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Prices: testPrices}
	cfg.Name, cfg.Kind, cfg.Model, cfg.BaseURL = "test", kind, "test-model", p.URL
	if kind == KindOpenAI {
		cfg.BaseURL += "/v1"
	}
	s, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*LLM), p, exp
}

// longMessages is a conversation of well over the providers' minimum cacheable prefix.
func longMessages() []*compactorv1.Message {
	msgs := testMessages()
	for i := range 40 {
		line := strings.Repeat("the build of pkg/x failed at step "+string(rune('a'+i%26))+"; ", 12)
		role := compactorv1.Role_ROLE_USER
		if i%2 == 1 {
			role = compactorv1.Role_ROLE_ASSISTANT
		}
		msgs = append(msgs, &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: line}}}}})
	}
	return msgs
}

// checkUsage holds res, the span and the Provider's bill of call n (1-based) to each other
// and to the price table.
func checkUsage(t *testing.T, res Result, p *llmtest.Provider, n int, exp *tracetest.InMemoryExporter) {
	t.Helper()
	bill := p.Calls()[n-1]
	if res.InputTokens != bill.Input+bill.CacheRead+bill.CacheWrite || res.CacheReadTokens != bill.CacheRead ||
		res.CacheWriteTokens != bill.CacheWrite || res.OutputTokens != bill.Output {
		t.Errorf("usage %+v, the provider billed %+v", res.Output, bill)
	}
	want := (float64(bill.Input)*3 + float64(bill.CacheRead)*0.3 + float64(bill.CacheWrite)*3.75 + float64(bill.Output)*15) / 1e6
	if math.Abs(res.Cost-want) > 1e-12 || want == 0 {
		t.Errorf("cost %g, want %g", res.Cost, want)
	}
	spans := exp.GetSpans().Snapshots()
	a := attrs(spans[len(spans)-1])
	for k, v := range map[string]int64{
		"gen_ai.usage.input_tokens": res.InputTokens, "gen_ai.usage.output_tokens": res.OutputTokens,
		"gen_ai.usage.cache_read.input_tokens": res.CacheReadTokens, "gen_ai.usage.cache_creation.input_tokens": res.CacheWriteTokens,
	} {
		if got, ok := a[attributeKey(k)]; !ok || got.AsInt64() != v {
			t.Errorf("span %s = %v, want %d", k, got.Emit(), v)
		}
	}
	if got := a[AttrCost].AsFloat64(); math.Abs(got-want) > 1e-12 {
		t.Errorf("span %s = %g, want %g", AttrCost, got, want)
	}
}

func TestOpenAIChatReportsCacheReads(t *testing.T) {
	s, p, exp := usageFixture(t, KindOpenAI, SummarizerConfig{})
	req := Request{SummaryInput: engine.SummaryInput{Messages: longMessages()}}
	for n := 1; n <= 2; n++ {
		res, err := s.Summarize(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		checkUsage(t, res, p, n, exp)
		if got := res.CacheReadTokens > 0; got != (n == 2) {
			t.Errorf("call %d: cache read %d tokens, want reads only on the second call of the same prompt", n, res.CacheReadTokens)
		}
	}
}

func TestPrices(t *testing.T) {
	if _, ok := testPrices.Lookup("other", "test-model"); !ok {
		t.Error("the configured model's price is not found by its prefix row")
	}
	if _, ok := testPrices.Lookup("gpt-x"); ok {
		t.Error("a model the table does not name has a price")
	}
	for _, bad := range []Prices{{{Model: ""}}, {{Model: "*"}}, {{Model: "m", Input: -1}}, {{Model: "m", Output: math.NaN()}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
}

func attributeKey(s string) attribute.Key { return attribute.Key(s) }
