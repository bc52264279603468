package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/summarize"
	"gopkg.in/yaml.v3"
)

// docsConfig is the --config example of docs/ARCHITECTURE.md "Configuration".
const docsConfig = `
default_summarizer: mini          # overrides --summarizer
summarizers:
  - name: mini
    kind: openai                  # openai (any OpenAI-compatible chat completions server) | openai-responses (the OpenAI Responses API) | anthropic | extractive
    base_url: http://127.0.0.1:11434/v1
    model: gpt-4o-mini
    api_key_env: OPENAI_API_KEY   # read from the environment, never from the file
    timeout: 30s
    max_output_tokens: 2048
    max_input_tokens: 100000      # each call's input; a longer range is summarized in chunks
    fallback: extractive          # writes the summary (uncached) while this one is down
    agent_cache: true             # the default: see "Summary calls that read the agent's cache"
prices:                           # per million tokens; example figures, not a quote: use your provider's
  - {model: "gpt-4o-mini*", input: 0.15, cache_read: 0.075, cache_write: 0, output: 0.60}
`

// TestParseConfigFile: the documented example parses with the parser the binary uses, and
// every malformed or invalid document is refused naming what is wrong.
func TestParseConfigFile(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml"+docsConfig+"```") {
		t.Error("docs/ARCHITECTURE.md no longer shows the configuration example this test parses")
	}
	c, err := parseConfigFile([]byte(docsConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := summarize.SummarizerConfig{Name: "mini", Kind: summarize.KindOpenAI, BaseURL: "http://127.0.0.1:11434/v1", Model: "gpt-4o-mini",
		APIKeyEnv: "OPENAI_API_KEY", Timeout: 30 * time.Second, MaxOutputTokens: 2048, MaxInputTokens: 100000, Fallback: "extractive"}
	if c.DefaultSummarizer != "mini" || len(c.Summarizers) != 1 || c.Summarizers[0].AgentCache == nil || !*c.Summarizers[0].AgentCache {
		t.Errorf("parseConfigFile = %+v", c)
	} else {
		got := c.Summarizers[0]
		got.AgentCache = nil
		if got != want {
			t.Errorf("parseConfigFile = %+v", c)
		}
	}
	if p := (summarize.Price{Model: "gpt-4o-mini*", Input: 0.15, CacheRead: 0.075, Output: 0.60}); len(c.Prices) != 1 || c.Prices[0] != p {
		t.Errorf("prices = %+v", c.Prices)
	}
	if c, err := parseConfigFile(nil); err != nil || len(c.Summarizers) != 0 {
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
		{"unknown auth field", "auth:\n  mode: jwt\n  jwks: x\n", "jwks"},
		{"negative burst", "limits:\n  default:\n    burst: -1\n", "default.burst"},
		{"unknown limit", "limits:\n  default:\n    calls_per_minute: 3\n", "calls_per_minute"},
		{"negative price", "prices:\n  - {model: m, input: -1}\n", "prices[0]"},
		{"price without model", "prices:\n  - {input: 1}\n", "model is required"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfigFile([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseConfigFile = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// FuzzConfigFile: any --config document either is refused or parses into a configuration
// whose every section validates and which reads back the same after a round trip through
// YAML; it never panics.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(docsConfig))
	f.Add([]byte("summarizers:\n  - name: a\n    kind: extractive\n"))
	f.Add([]byte("default_summarizer: [1, 2]\n"))
	f.Add([]byte("summarizers: {a: b}\n"))
	f.Add([]byte("auth:\n  mode: jwt\n  gateways: [edge]\n  jwt:\n    jwks_url: https://issuer.example/jwks\n    leeway: 30s\n"))
	f.Add([]byte("limits:\n  default: {calls_per_second: 2.5, burst: 5, token_window: 1h}\n  tenants:\n    acme: {summarizer_tokens: 100}\n"))
	f.Add([]byte("limits:\n  tenants:\n    \"\": {burst: 1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConfigFile(b)
		if err != nil {
			return
		}
		if err := c.Config.Validate(); err != nil {
			t.Fatalf("accepted summarizers that do not validate: %v", err)
		}
		if err := c.Limits.Validate(); err != nil {
			t.Fatalf("accepted limits that do not validate: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("the parsed configuration does not encode: %v", err)
		}
		back, err := parseConfigFile(out)
		if err != nil {
			t.Fatalf("the parsed configuration does not parse back: %v\n%s", err, out)
		}
		if again, _ := yaml.Marshal(back); string(again) != string(out) {
			t.Fatalf("round trip changed the configuration:\n%s\nthen\n%s", out, again)
		}
	})
}
