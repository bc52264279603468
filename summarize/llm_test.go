package summarize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summary"
)

// secret appears in the test conversation; it must never reach a span.
const secret = "SECRET-CONVERSATION-TEXT"

func testMessages() []*compactorv1.Message {
	text := func(role compactorv1.Role, s string) *compactorv1.Message {
		return &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	return []*compactorv1.Message{
		text(compactorv1.Role_ROLE_USER, "Please fix the flaky test in pkg/x_test.go. "+secret),
		text(compactorv1.Role_ROLE_ASSISTANT, "Looking at pkg/x_test.go now."),
		text(compactorv1.Role_ROLE_USER, "Also keep the public API stable."),
	}
}

// reply is one scripted answer of the fake provider.
type reply struct {
	status int
	header map[string]string
	text   string // completion text for 200s
	hang   bool   // block until the client gives up
}

// fakeProvider speaks one provider's wire protocol from a script; the last reply repeats.
type fakeProvider struct {
	t       *testing.T
	srv     *httptest.Server
	kind    string
	mu      sync.Mutex
	script  []reply
	hits    atomic.Int32
	bodies  []map[string]any
	headers []http.Header
}

func newFakeProvider(t *testing.T, kind string, script ...reply) *fakeProvider {
	f := &fakeProvider{t: t, kind: kind, script: script}
	done := make(chan struct{})
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve(done)))
	t.Cleanup(func() { close(done); f.srv.Close() })
	return f
}

func (f *fakeProvider) setScript(script ...reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = script
}

func (f *fakeProvider) serve(done chan struct{}) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		n := int(f.hits.Add(1))
		wantPath := map[string]string{KindOpenAI: "/v1/chat/completions", KindOpenAIResponses: "/v1/responses",
			KindAnthropic: "/v1/messages"}[f.kind]
		if r.Method != http.MethodPost || r.URL.Path != wantPath {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		rp := f.script[min(n, len(f.script))-1]
		f.mu.Unlock()
		if rp.hang {
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		if rp.status != http.StatusOK {
			w.WriteHeader(rp.status)
			if f.kind == KindAnthropic {
				fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"status %d, echoing %s"}}`, rp.status, secret)
			} else {
				fmt.Fprintf(w, `{"error":{"message":"status %d, echoing %s","type":"server_error","code":null,"param":null}}`, rp.status, secret)
			}
			return
		}
		txt, _ := json.Marshal(rp.text)
		switch f.kind {
		case KindAnthropic:
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-20250101","content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":321,"output_tokens":45}}`, txt)
		case KindOpenAIResponses:
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","model":"gpt-test-2025","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":%s,"annotations":[]}]}],"usage":{"input_tokens":321,"input_tokens_details":{"cached_tokens":0},"output_tokens":45,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":366}}`, txt)
		default:
			fmt.Fprintf(w, `{"id":"cc_1","object":"chat.completion","created":1700000000,"model":"gpt-test-2025","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":321,"completion_tokens":45,"total_tokens":366}}`, txt)
		}
	}
}

type provider struct {
	kind         string
	genAIName    string
	respModel    string
	finishReason string
}

var providers = []provider{
	{KindOpenAI, "openai", "gpt-test-2025", "stop"},
	{KindOpenAIResponses, "openai", "gpt-test-2025", "completed"},
	{KindAnthropic, "anthropic", "claude-test-20250101", "end_turn"},
}

type fixture struct {
	f   *fakeProvider
	s   *LLM
	exp *tracetest.InMemoryExporter
}

func newFixture(t *testing.T, p provider, cfg SummarizerConfig, opt Options, script ...reply) fixture {
	t.Helper()
	f := newFakeProvider(t, p.kind, script...)
	exp := tracetest.NewInMemoryExporter()
	opt.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	if opt.Retry.BaseDelay == 0 {
		opt.Retry.BaseDelay = time.Millisecond
	}
	opt.LookupEnv = func(k string) (string, bool) {
		if k == "TEST_API_KEY" {
			return "sk-test-123", true
		}
		return "", false
	}
	cfg.Name, cfg.Kind, cfg.Model, cfg.APIKeyEnv = "test", p.kind, "test-model", "TEST_API_KEY"
	cfg.BaseURL = baseURL(p.kind, f.srv.URL)
	s, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{f: f, s: s.(*LLM), exp: exp}
}

// baseURL is the base_url of a summarizer of kind served at srv: the OpenAI kinds' SDK
// paths are relative to /v1, Anthropic's include it.
func baseURL(kind, srv string) string {
	if kind == KindAnthropic {
		return srv
	}
	return srv + "/v1"
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range s.Attributes() {
		m[a.Key] = a.Value
	}
	return m
}

func spanOf(t *testing.T, exp *tracetest.InMemoryExporter) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1 per Summarize", len(spans))
	}
	s := spans[0]
	if strings.Contains(s.Status().Description, secret) {
		t.Error("span status carries conversation text")
	}
	for _, a := range s.Attributes() {
		if strings.Contains(a.Value.String(), secret) {
			t.Errorf("span attribute %s carries conversation text", a.Key)
		}
	}
	for _, e := range s.Events() {
		for _, a := range e.Attributes {
			if strings.Contains(a.Value.String(), secret) {
				t.Errorf("span event %s attribute %s carries conversation text", e.Name, a.Key)
			}
		}
	}
	return s
}

func TestLLMSuccess(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			fx := newFixture(t, p, SummarizerConfig{MaxOutputTokens: 777}, Options{}, reply{status: 200, text: "  ## User requests\n- fix it\n"})
			res, err := fx.s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages(), Anchor: "earlier summary", Instructions: "focus on tests"}})
			if err != nil {
				t.Fatal(err)
			}
			want := Result{Output: summary.Output{Text: "## User requests\n- fix it", Model: p.respModel, PromptVersion: engine.PromptVersion,
				InputTokens: 321, OutputTokens: 45}, FinishReasons: []string{p.finishReason}, Attempts: 1}
			if fmt.Sprint(res) != fmt.Sprint(want) {
				t.Errorf("Result = %+v\nwant     %+v", res, want)
			}
			if got := fx.f.hits.Load(); got != 1 {
				t.Errorf("%d requests, want 1", got)
			}

			// What went over the wire.
			body, hdr := fx.f.bodies[0], fx.f.headers[0]
			if body["model"] != "test-model" {
				t.Errorf("model = %v", body["model"])
			}
			raw, _ := json.Marshal(body)
			for _, s := range []string{secret, "earlier summary", "focus on tests", "Next step"} {
				if !strings.Contains(string(raw), s) {
					t.Errorf("request lacks %q", s)
				}
			}
			switch p.kind {
			case KindOpenAI:
				if body["max_tokens"] != float64(777) {
					t.Errorf("max_tokens = %v, want 777 (a non-OpenAI server)", body["max_tokens"])
				}
				if got := hdr.Get("Authorization"); got != "Bearer sk-test-123" {
					t.Errorf("Authorization = %q", got)
				}
			case KindOpenAIResponses:
				if body["max_output_tokens"] != float64(777) || body["store"] != false {
					t.Errorf("max_output_tokens = %v, store = %v, want 777 and false", body["max_output_tokens"], body["store"])
				}
				if ins, _ := body["instructions"].(string); !strings.Contains(ins, "You write the summary") {
					t.Errorf("instructions %q are not the summary system prompt", ins)
				}
				if got := hdr.Get("Authorization"); got != "Bearer sk-test-123" {
					t.Errorf("Authorization = %q", got)
				}
			case KindAnthropic:
				if body["max_tokens"] != float64(777) {
					t.Errorf("max_tokens = %v", body["max_tokens"])
				}
				if got := hdr.Get("X-Api-Key"); got != "sk-test-123" {
					t.Errorf("X-Api-Key = %q", got)
				}
			}

			s := spanOf(t, fx.exp)
			if s.Name() != "chat test-model" || s.SpanKind() != trace.SpanKindClient || s.Status().Code == codes.Error {
				t.Errorf("span %q kind %v status %v", s.Name(), s.SpanKind(), s.Status())
			}
			a := attrs(s)
			wantAttrs := map[attribute.Key]any{
				AttrOperationName:      "chat",
				AttrProviderName:       p.genAIName,
				AttrRequestModel:       "test-model",
				AttrRequestMaxTokens:   int64(777),
				AttrResponseModel:      p.respModel,
				AttrUsageInputTokens:   int64(321),
				AttrUsageOutputTokens:  int64(45),
				AttrFinishReasons:      []string{p.finishReason},
				AttrMessagesSummarized: int64(3),
				AttrServerAddress:      "127.0.0.1",
				AttrAttempts:           int64(1),
			}
			for k, v := range wantAttrs {
				if got, ok := a[k]; !ok || fmt.Sprint(got.AsInterface()) != fmt.Sprint(v) {
					t.Errorf("span %s = %v, want %v", k, got.AsInterface(), v)
				}
			}
		})
	}
}

func TestLLMRetries(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			tests := []struct {
				name       string
				retry      RetryPolicy
				script     []reply
				deadline   time.Duration
				wantHits   int32
				wantErr    []error
				notErr     []error
				wantTextOK bool
				wantStatus int
			}{
				{
					name:       "429 then success honours Retry-After",
					retry:      RetryPolicy{BaseDelay: time.Hour, MaxDelay: time.Hour}, // only Retry-After: 0 makes this finish in time
					script:     []reply{{status: 429, header: map[string]string{"Retry-After": "0"}}, {status: 200, text: "ok"}},
					deadline:   30 * time.Second,
					wantHits:   2,
					wantTextOK: true,
				},
				{
					name:       "503 twice then success with backoff",
					script:     []reply{{status: 503}, {status: 503}, {status: 200, text: "ok"}},
					deadline:   30 * time.Second,
					wantHits:   3,
					wantTextOK: true,
				},
				{
					name:       "retries run out",
					retry:      RetryPolicy{MaxAttempts: 2},
					script:     []reply{{status: 502}},
					deadline:   30 * time.Second,
					wantHits:   2,
					wantErr:    []error{ErrUnavailable},
					notErr:     []error{context.DeadlineExceeded, ErrCircuitOpen},
					wantStatus: 502,
				},
				{
					name:     "Retry-After past the deadline fails at once",
					script:   []reply{{status: 429, header: map[string]string{"Retry-After": "20"}}, {status: 200, text: "ok"}},
					deadline: 5 * time.Second,
					wantHits: 1,
					wantErr:  []error{context.DeadlineExceeded},
				},
				{
					name:       "bad request is not retried",
					script:     []reply{{status: 400}, {status: 200, text: "ok"}},
					deadline:   30 * time.Second,
					wantHits:   1,
					wantErr:    []error{ErrRejected},
					notErr:     []error{ErrUnavailable},
					wantStatus: 400,
				},
				{
					name:       "a refused key is not retried",
					script:     []reply{{status: 401}, {status: 200, text: "ok"}},
					deadline:   30 * time.Second,
					wantHits:   1,
					wantErr:    []error{ErrRejected},
					notErr:     []error{ErrUnavailable},
					wantStatus: 401,
				},
				{
					name:     "empty completion is an error, not retried",
					script:   []reply{{status: 200, text: " \n\t "}, {status: 200, text: "ok"}},
					deadline: 30 * time.Second,
					wantHits: 1,
					wantErr:  []error{ErrEmptySummary},
					notErr:   []error{ErrUnavailable},
				},
				{
					name:     "slow response past the caller's deadline",
					script:   []reply{{hang: true}},
					deadline: 200 * time.Millisecond,
					wantHits: 1,
					wantErr:  []error{context.DeadlineExceeded},
					notErr:   []error{ErrUnavailable},
				},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					fx := newFixture(t, p, SummarizerConfig{}, Options{Retry: tt.retry}, tt.script...)
					ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
					defer cancel()
					res, err := fx.s.Summarize(ctx, Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}})
					if got := fx.f.hits.Load(); got != tt.wantHits {
						t.Errorf("%d requests, want %d", got, tt.wantHits)
					}
					if tt.wantTextOK {
						if err != nil || res.Text != "ok" || res.Attempts != int(tt.wantHits) {
							t.Fatalf("Summarize = %+v, %v", res, err)
						}
						if a := attrs(spanOf(t, fx.exp)); a[AttrAttempts].AsInt64() != int64(tt.wantHits) {
							t.Errorf("span attempts = %v", a[AttrAttempts].AsInterface())
						}
						return
					}
					if err == nil {
						t.Fatalf("Summarize = %+v, want an error", res)
					}
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error message carries the provider's response body: %v", err)
					}
					var pe *ProviderError
					if tt.wantStatus != 0 && (!errors.As(err, &pe) || pe.Status != tt.wantStatus) {
						t.Errorf("error %v: ProviderError %+v, want status %d", err, pe, tt.wantStatus)
					}
					for _, e := range tt.wantErr {
						if !errors.Is(err, e) {
							t.Errorf("error %q does not wrap %v", err, e)
						}
					}
					for _, e := range tt.notErr {
						if errors.Is(err, e) {
							t.Errorf("error %q wraps %v", err, e)
						}
					}
					s := spanOf(t, fx.exp)
					if s.Status().Code != codes.Error || len(s.Events()) == 0 || attrs(s)[AttrErrorType].AsString() == "" {
						t.Errorf("span status %v, %d events, error.type %q: error not recorded", s.Status(), len(s.Events()), attrs(s)[AttrErrorType].AsString())
					}
				})
			}
		})
	}
}

func TestLLMAttemptTimeoutIsUnavailableNotDeadline(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			fx := newFixture(t, p, SummarizerConfig{Timeout: 50 * time.Millisecond}, Options{Retry: RetryPolicy{MaxAttempts: 2}}, reply{hang: true})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := fx.s.Summarize(ctx, Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}})
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v; want ErrUnavailable and not the caller's DeadlineExceeded", err)
			}
			if got := fx.f.hits.Load(); got != 2 {
				t.Errorf("%d requests, want 2", got)
			}
		})
	}
}

// breakerCooldown is the breakers' cooldown in the tests that wait it out (gobreaker keeps
// time with time.Now): long enough that the calls meant to meet an open breaker do.
const breakerCooldown = 300 * time.Millisecond

func TestLLMCircuitBreaker(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			fx := newFixture(t, p, SummarizerConfig{},
				Options{Retry: RetryPolicy{MaxAttempts: 5}, Breaker: BreakerPolicy{Failures: 3, Cooldown: breakerCooldown}},
				reply{status: 500})
			ctx := context.Background()
			req := Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}}

			// Three failed attempts open the breaker in the middle of the first call.
			_, err := fx.s.Summarize(ctx, req)
			if !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("first call: %v, want ErrCircuitOpen", err)
			}
			if got := fx.f.hits.Load(); got != 3 {
				t.Fatalf("%d requests, want 3 before the breaker opened", got)
			}
			if !fx.s.breaker.isOpen() {
				t.Fatal("breaker not open")
			}

			// While open: fail fast, the server sees nothing.
			for range 3 {
				if _, err := fx.s.Summarize(ctx, req); !errors.Is(err, ErrCircuitOpen) {
					t.Fatalf("open breaker: %v, want ErrCircuitOpen", err)
				}
			}
			if got := fx.f.hits.Load(); got != 3 {
				t.Fatalf("open breaker let %d requests through", got-3)
			}

			// After the cooldown one probe goes through; a failed probe reopens at once.
			time.Sleep(breakerCooldown)
			if _, err := fx.s.Summarize(ctx, req); !errors.Is(err, ErrCircuitOpen) {
				t.Fatalf("failed probe: %v, want ErrCircuitOpen after one attempt", err)
			}
			if got := fx.f.hits.Load(); got != 4 {
				t.Fatalf("%d requests, want 4 (one probe)", got)
			}

			// A successful probe closes it.
			time.Sleep(breakerCooldown)
			fx.f.setScript(reply{status: 200, text: "recovered"})
			res, err := fx.s.Summarize(ctx, req)
			if err != nil || res.Text != "recovered" {
				t.Fatalf("probe after recovery: %+v, %v", res, err)
			}
			if fx.s.breaker.isOpen() {
				t.Error("breaker still open after a successful probe")
			}
			if _, err := fx.s.Summarize(ctx, req); err != nil {
				t.Errorf("closed breaker: %v", err)
			}
			if got := fx.f.hits.Load(); got != 6 {
				t.Errorf("%d requests, want 6", got)
			}
		})
	}
}

func TestLLMRateLimitsDoNotTripTheBreaker(t *testing.T) {
	p := providers[0]
	fx := newFixture(t, p, SummarizerConfig{}, Options{Retry: RetryPolicy{MaxAttempts: 4}, Breaker: BreakerPolicy{Failures: 2}},
		reply{status: 429, header: map[string]string{"Retry-After": "0"}})
	_, err := fx.s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("err = %v, want ErrUnavailable without the breaker", err)
	}
	if got := fx.f.hits.Load(); got != 4 || fx.s.breaker.isOpen() {
		t.Errorf("%d requests (want 4), breaker open %v", got, fx.s.breaker.isOpen())
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{nil, 0, false},
		{map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-1"}, 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		got, ok := retryAfter(h)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond}.withDefaults()
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{10, 200 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		for range 50 {
			if d := p.backoff(tt.attempt); d < tt.min || d > tt.max {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", tt.attempt, d, tt.min, tt.max)
			}
		}
	}
}

func TestKeylessServerGetsNoCredentials(t *testing.T) {
	// Ambient credentials must never leak to a configured server.
	t.Setenv("OPENAI_API_KEY", "sk-ambient")
	t.Setenv("OPENAI_ORG_ID", "org-ambient")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-ambient")
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			f := newFakeProvider(t, p.kind, reply{status: 200, text: "ok"})
			cfg := SummarizerConfig{Name: "local", Kind: p.kind, Model: "m", BaseURL: baseURL(p.kind, f.srv.URL)}
			s, err := New(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}}); err != nil {
				t.Fatal(err)
			}
			for k, v := range f.headers[0] {
				for _, x := range v {
					if x == "Bearer sk-ambient" || x == "org-ambient" || x == "sk-ant-ambient" {
						t.Errorf("header %s carries an ambient credential", k)
					}
				}
			}
		})
	}
}

func TestLLMBreakerClosesWhenTheProviderAnswers(t *testing.T) {
	fx := newFixture(t, providers[1], SummarizerConfig{},
		Options{Retry: RetryPolicy{MaxAttempts: 1}, Breaker: BreakerPolicy{Failures: 2, Cooldown: breakerCooldown}},
		reply{status: 503})
	ctx := context.Background()
	req := Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}}
	for range 2 {
		_, _ = fx.s.Summarize(ctx, req)
	}
	if !fx.s.breaker.isOpen() {
		t.Fatal("breaker not open after 2 failures")
	}
	time.Sleep(breakerCooldown)
	fx.f.setScript(reply{status: 400}) // the probe reaches a live provider that rejects the request
	if _, err := fx.s.Summarize(ctx, req); !errors.Is(err, ErrRejected) || errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("probe: %v", err)
	}
	if fx.s.breaker.isOpen() {
		t.Error("a provider that answers 400 is up: the breaker should close")
	}
	if got := fx.f.hits.Load(); got != 3 {
		t.Errorf("%d requests, want 3", got)
	}
}

func TestLLMPromptFitsMaxInputTokens(t *testing.T) {
	big := testMessages()
	for range 200 {
		big = append(big, &compactorv1.Message{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ToolResult{
			ToolResult: &compactorv1.ToolResultPart{ToolCallId: "x", Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: strings.Repeat("log line\n", 500)}}}}}}})
	}
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			fx := newFixture(t, p, SummarizerConfig{MaxInputTokens: 8000}, Options{}, reply{status: 200, text: "ok"})
			if _, err := fx.s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: big}}); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(fx.f.bodies[0])
			if n := longestString(fx.f.bodies[0]); n > 8000*3-len(engine.SummarySystemPrompt()) {
				t.Errorf("prompt is %d bytes for max_input_tokens 8000", n)
			}
			if !strings.Contains(string(raw), secret) {
				t.Error("the first request was cut from the prompt")
			}
		})
	}
}

// longestString returns the length of the longest string in a decoded JSON value.
func longestString(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n = max(n, longestString(e))
		}
		return n
	case map[string]any:
		n := 0
		for _, e := range x {
			n = max(n, longestString(e))
		}
		return n
	}
	return 0
}

// rewriteTransport sends every request to target, whatever its URL says.
type rewriteTransport struct{ target *url.URL }

func (rt rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = rt.target.Scheme, rt.target.Host
	return http.DefaultTransport.RoundTrip(r)
}

func TestOpenAIOfficialAPIGetsMaxCompletionTokens(t *testing.T) {
	f := newFakeProvider(t, KindOpenAI, reply{status: 200, text: "ok"})
	target, _ := url.Parse(f.srv.URL)
	s, err := NewOpenAI(SummarizerConfig{Name: "gpt", Model: "gpt-5-mini", MaxOutputTokens: 999},
		Options{HTTPClient: &http.Client{Transport: rewriteTransport{target}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}}); err != nil {
		t.Fatal(err)
	}
	body := f.bodies[0]
	if body["max_completion_tokens"] != float64(999) || body["max_tokens"] != nil {
		t.Errorf("api.openai.com got max_completion_tokens=%v max_tokens=%v", body["max_completion_tokens"], body["max_tokens"])
	}
	if s.Fingerprint().Model != "gpt-5-mini" || s.server != "api.openai.com" {
		t.Errorf("fingerprint %+v server %q", s.Fingerprint(), s.server)
	}
}

// TestLLMRereadsItsKeyFile: an api_key_file that changes (a rotated Kubernetes secret) is
// read again, and the next call sends the new key, without a restart.
func TestLLMRereadsItsKeyFile(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			f := newFakeProvider(t, p.kind, reply{status: 200, text: "ok"})
			keyFile := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(keyFile, []byte("sk-old\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := SummarizerConfig{Name: "test", Kind: p.kind, Model: "m", BaseURL: baseURL(p.kind, f.srv.URL), APIKeyFile: keyFile}
			s, err := New(cfg, Options{KeyFileInterval: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			sent := func() string {
				if _, err := s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}}); err != nil {
					t.Fatal(err)
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				h := f.headers[len(f.headers)-1]
				if p.kind != KindAnthropic {
					return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
				}
				return h.Get("X-Api-Key")
			}
			if got := sent(); got != "sk-old" {
				t.Fatalf("key sent %q, want sk-old", got)
			}
			if err := os.WriteFile(keyFile, []byte("sk-rotated\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := sent(); got != "sk-rotated" {
				t.Errorf("key sent after the file changed %q, want sk-rotated", got)
			}
		})
	}
}

// TestLLMNetworkErrorsNameNoHost: a provider that cannot be reached fails with the kind of
// failure only; the base URL (possibly an internal host) goes to the server log, not to the
// caller.
func TestLLMNetworkErrorsNameNoHost(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var log bytes.Buffer
	s, err := NewOpenAI(SummarizerConfig{Name: "test", Model: "m", BaseURL: "http://" + addr + "/v1"},
		Options{Retry: RetryPolicy{MaxAttempts: 1}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}})
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q: want UNAVAILABLE saying the connection was refused, without %s", err, addr)
	}
	if !strings.Contains(log.String(), addr) {
		t.Errorf("the log does not have the failure's detail:\n%s", log.String())
	}
}
