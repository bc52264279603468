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

// The example from docs/ARCHITECTURE.md "Configuration".
const designConfig = `
default_summarizer: mini          # overrides --summarizer
summarizers:
  - name: mini
    kind: openai                  # openai (any OpenAI-compatible server) | anthropic | extractive
    base_url: http://127.0.0.1:11434/v1
    model: gpt-4o-mini
    api_key_env: OPENAI_API_KEY   # read from the environment, never from the file
    timeout: 30s
    max_output_tokens: 2048
    fallback: extractive          # writes the summary (uncached) while this one is down
`

func TestParseConfig(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml"+designConfig+"```") {
		t.Error("docs/ARCHITECTURE.md no longer shows the configuration example this test parses")
	}
	c, err := ParseConfig([]byte(designConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := SummarizerConfig{Name: "mini", Kind: KindOpenAI, BaseURL: "http://127.0.0.1:11434/v1", Model: "gpt-4o-mini",
		APIKeyEnv: "OPENAI_API_KEY", Timeout: 30 * time.Second, MaxOutputTokens: 2048, Fallback: "extractive"}
	if c.DefaultSummarizer != "mini" || len(c.Summarizers) != 1 || c.Summarizers[0] != want {
		t.Errorf("ParseConfig = %+v", c)
	}
	if c, err := ParseConfig(nil); err != nil || len(c.Summarizers) != 0 {
		t.Errorf("empty config: %+v, %v", c, err)
	}

	bad := []struct {
		name, yaml, want string
	}{
		{"unknown field", "summarizers:\n  - name: a\n    kind: extractive\n    modle: x\n", "modle"},
		{"unknown top-level field", "default: a\n", "default"},
		{"unknown kind", "summarizers:\n  - name: a\n    kind: gemini\n    model: m\n", `unknown kind "gemini"`},
		{"missing kind", "summarizers:\n  - name: a\n    model: m\n", "kind is required"},
		{"missing name", "summarizers:\n  - kind: extractive\n", "name is required"},
		{"missing model", "summarizers:\n  - name: a\n    kind: anthropic\n", "model is required"},
		{"two key sources", "summarizers:\n  - name: a\n    kind: openai\n    model: m\n    api_key_env: K\n    api_key_file: /k\n", "not both"},
		{"bad base url", "summarizers:\n  - name: a\n    kind: openai\n    model: m\n    base_url: localhost:11434\n", "not an http(s) URL"},
		{"bad duration", "summarizers:\n  - name: a\n    kind: openai\n    model: m\n    timeout: soon\n", "soon"},
		{"duplicate", "summarizers:\n  - name: a\n    kind: extractive\n  - name: a\n    kind: extractive\n", "duplicate name"},
		{"undefined default", "default_summarizer: big\n", `"big" is not defined`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseConfig = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	c, err := ParseConfig([]byte(designConfig + `
  - name: claude
    kind: anthropic
    model: claude-haiku
    api_key_file: /secrets/anthropic
  - name: short
    kind: extractive
    max_output_tokens: 256
`))
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{
		LookupEnv: func(k string) (string, bool) {
			return map[string]string{"OPENAI_API_KEY": "sk-1"}[k], k == "OPENAI_API_KEY"
		},
		ReadFile: func(p string) ([]byte, error) {
			if p == "/secrets/anthropic" {
				return []byte("sk-ant-2\n"), nil
			}
			return nil, os.ErrNotExist
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
	noKeys := Options{LookupEnv: func(string) (string, bool) { return "", false },
		ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }}
	if _, err := NewRegistry(c, "", noKeys); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("missing env key: %v", err)
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
	res, err := s.Summarize(context.Background(), Request{Messages: testMessages(), MaxOutputTokens: 300,
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
	if _, err := s.Summarize(ctx, Request{Messages: testMessages()}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

// FuzzParseConfig: any document either parses into a config that validates or is an error;
// it never panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(designConfig))
	f.Add([]byte("summarizers:\n  - name: a\n    kind: extractive\n"))
	f.Add([]byte("default_summarizer: [1, 2]\n"))
	f.Add([]byte("summarizers: {a: b}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that does not validate: %v", err)
		}
	})
}

func TestFallbackConfig(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"summarizers:\n  - {name: a, kind: openai, model: m, fallback: a}\n", "falls back to itself"},
		{"summarizers:\n  - {name: a, kind: openai, model: m, fallback: nope}\n", `fallback "nope" is not defined`},
	} {
		if _, err := ParseConfig([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error saying %q", tt.yaml, err, tt.want)
		}
	}
	c, err := ParseConfig([]byte("summarizers:\n  - {name: a, kind: openai, model: m, base_url: 'http://127.0.0.1:1/v1', fallback: extractive}\n  - {name: b, kind: openai, model: m, base_url: 'http://127.0.0.1:1/v1'}\n"))
	if err != nil {
		t.Fatal(err)
	}
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
