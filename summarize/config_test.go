package summarize

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/compactord/compactord/engine"
)

func TestRegistry(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "anthropic")
	if err := os.WriteFile(keyFile, []byte("sk-ant-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Config{DefaultSummarizer: "mini", Summarizers: []SummarizerConfig{
		{Name: "mini", Kind: KindOpenAI, BaseURL: "http://127.0.0.1:11434/v1", Model: "gpt-4o-mini", APIKeyEnv: "OPENAI_API_KEY",
			Timeout: 30 * time.Second, MaxOutputTokens: 2048, Fallback: "extractive"},
		{Name: "claude", Kind: KindAnthropic, Model: "claude-haiku", APIKeyFile: keyFile},
		{Name: "short", Kind: KindExtractive, MaxOutputTokens: 256},
	}}
	opt := Options{
		LookupEnv: func(k string) (string, bool) {
			return map[string]string{"OPENAI_API_KEY": "sk-1"}[k], k == "OPENAI_API_KEY"
		},
	}
	r, err := NewRegistry(c, "extractive", opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), ","); got != "claude,extractive,mini,short" {
		t.Errorf("Names = %s", got)
	}
	if r.Default() != "mini" {
		t.Errorf("Default = %s, want the config's default_summarizer", r.Default())
	}
	tests := []struct {
		name string
		want Fingerprint
	}{
		{"", Fingerprint{"mini", "gpt-4o-mini", engine.PromptVersion}},
		{"claude", Fingerprint{"claude", "claude-haiku", engine.PromptVersion}},
		{"extractive", Fingerprint{"extractive", ExtractiveModel, engine.PromptVersion}},
		{"short", Fingerprint{"short", ExtractiveModel, engine.PromptVersion}},
	}
	for _, tt := range tests {
		s, err := r.Get(tt.name)
		if err != nil {
			t.Fatalf("Get(%q): %v", tt.name, err)
		}
		if s.Fingerprint() != tt.want {
			t.Errorf("Get(%q).Fingerprint() = %+v, want %+v", tt.name, s.Fingerprint(), tt.want)
		}
	}
	_, err = r.Get("nope")
	var ve *engine.ValidationError
	if !errors.Is(err, ErrUnknown) || !errors.Is(err, engine.ErrInvalid) || !errors.As(err, &ve) || ve.Violations[0].Field != "summarizer" {
		t.Errorf("Get(unknown) = %v; want ErrUnknown and a field violation on summarizer", err)
	}

	// Missing keys fail at startup, naming the variable or file but never a key.
	noKeys := Options{LookupEnv: func(string) (string, bool) { return "", false }}
	if _, err := NewRegistry(c, "", noKeys); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("missing env key: %v", err)
	}
	c.Summarizers[0].APIKeyEnv = ""
	c.Summarizers[1].APIKeyFile = keyFile + ".missing"
	if _, err := NewRegistry(c, "", noKeys); err == nil || !strings.Contains(err.Error(), "api_key_file") || strings.Contains(err.Error(), "sk-") {
		t.Errorf("missing key file: %v", err)
	}

	// Without a config: just the extractive default; --summarizer must name something.
	r, err = NewRegistry(nil, "", Options{})
	if err != nil || r.Default() != "extractive" {
		t.Fatalf("NewRegistry(nil) = %v, %v", r, err)
	}
	if _, err := NewRegistry(nil, "mini", Options{}); err == nil {
		t.Error("a --summarizer naming nothing was accepted")
	}
}

func TestFingerprintStringIsUnambiguous(t *testing.T) {
	a := Fingerprint{Name: "a,b", Model: "c"}.String()
	b := Fingerprint{Name: "a", Model: "b,c"}.String()
	if a == b {
		t.Errorf("fingerprints collide: %s", a)
	}
}

func TestExtractiveSummarizer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	s := NewExtractive("", 0, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	counted := 0
	res, err := s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}, MaxOutputTokens: 300,
		Count: func(x string) int { counted++; return ApproxTokens(x) }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "Also keep the public API stable.") || res.Model != ExtractiveModel ||
		res.PromptVersion != engine.PromptVersion || res.OutputTokens <= 0 || res.OutputTokens > 300 || res.InputTokens <= 0 {
		t.Errorf("Result = %+v", res)
	}
	if counted == 0 {
		t.Error("the request's Count was not used")
	}
	s2 := spanOf(t, exp)
	a := attrs(s2)
	if s2.Name() != "chat extractive" || a[AttrProviderName].AsString() != ProviderExtractive ||
		a[AttrRequestMaxTokens].AsInt64() != 300 || a[attribute.Key("gen_ai.usage.output_tokens")].AsInt64() != res.OutputTokens {
		t.Errorf("span %s %v", s2.Name(), a)
	}

	exp.Reset()
	if _, err := s.Summarize(context.Background(), Request{}); !errors.Is(err, ErrEmptySummary) {
		t.Errorf("nothing to summarize: %v, want ErrEmptySummary", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Summarize(ctx, Request{SummaryInput: engine.SummaryInput{Messages: testMessages()}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

func TestFallbackConfig(t *testing.T) {
	for _, tt := range []struct {
		fallback, want string
	}{
		{"a", "falls back to itself"},
		{"nope", `fallback "nope" is not defined`},
	} {
		c := &Config{Summarizers: []SummarizerConfig{{Name: "a", Kind: KindOpenAI, Model: "m", Fallback: tt.fallback}}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("fallback %q: %v, want an error saying %q", tt.fallback, err, tt.want)
		}
	}
	c := &Config{Summarizers: []SummarizerConfig{
		{Name: "a", Kind: KindOpenAI, Model: "m", BaseURL: "http://127.0.0.1:1/v1", Fallback: "extractive"},
		{Name: "b", Kind: KindOpenAI, Model: "m", BaseURL: "http://127.0.0.1:1/v1"},
	}}
	r, err := NewRegistry(c, "a", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fb, ok := r.Fallback(""); !ok || fb.Fingerprint().Name != "extractive" {
		t.Errorf("Fallback of the default a: %v, %v", fb, ok)
	}
	if _, ok := r.Fallback("b"); ok {
		t.Error("b has no fallback")
	}
}

// TestPlainHTTPBaseURL: an http:// base_url would send the API key and the conversations in
// clear, so it is refused unless it names a loopback address or allow_http says so.
func TestPlainHTTPBaseURL(t *testing.T) {
	for _, tt := range []struct {
		url   string
		allow bool
		ok    bool
	}{
		{"https://api.example.com/v1", false, true},
		{"http://127.0.0.1:11434/v1", false, true},
		{"http://localhost:8000/v1", false, true},
		{"http://[::1]:8000/v1", false, true},
		{"http://vllm.models.svc:8000/v1", false, false},
		{"http://10.0.0.5/v1", false, false},
		{"http://vllm.models.svc:8000/v1", true, true},
	} {
		err := (&Config{Summarizers: []SummarizerConfig{{Name: "a", Kind: KindOpenAI, Model: "m", BaseURL: tt.url, AllowHTTP: tt.allow}}}).Validate()
		if (err == nil) != tt.ok || !tt.ok && !strings.Contains(err.Error(), "allow_http") {
			t.Errorf("%s (allow_http %v): %v, want ok %v", tt.url, tt.allow, err, tt.ok)
		}
	}
}
