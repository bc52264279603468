package summarize

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/internal/filewatch"
)

// Summarizer kinds.
const (
	KindExtractive = "extractive"
	KindOpenAI     = "openai"
	KindAnthropic  = "anthropic"
	// KindOpenAIResponses is the OpenAI Responses API (/responses); KindOpenAI is Chat
	// Completions.
	KindOpenAIResponses = "openai-responses"
)

// DefaultName is the name of the built-in extractive summarizer, always registered.
const DefaultName = "extractive"

// Defaults for LLM summarizers.
const (
	DefaultTimeout         = 60 * time.Second
	DefaultMaxOutputTokens = 2048
	DefaultMaxInputTokens  = 100000
)

// Config is the --config YAML file: named summarizers and the default one.
type Config struct {
	// DefaultSummarizer overrides the --summarizer flag when set.
	DefaultSummarizer string `yaml:"default_summarizer"`
	// Summarizers are the named summarizers.
	Summarizers []SummarizerConfig `yaml:"summarizers"`
	// Prices is the price table the LLM summarizers estimate each call's cost from
	// (Summary.estimated_cost); empty: no estimate.
	Prices Prices `yaml:"prices"`
}

// SummarizerConfig defines one named summarizer.
type SummarizerConfig struct {
	// Name is what CompactRequest.summarizer refers to; required, unique.
	Name string `yaml:"name"`
	// Kind is openai (any OpenAI-compatible chat completions server), openai-responses (the
	// OpenAI Responses API), anthropic or extractive.
	Kind string `yaml:"kind"`
	// BaseURL is the API root (e.g. http://127.0.0.1:11434/v1 for Ollama); empty uses the
	// provider's public API.
	BaseURL string `yaml:"base_url"`
	// Model is the model name sent to the API; required for openai, openai-responses and anthropic.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKeyFile is a file holding the API key (e.g. a mounted Kubernetes secret);
	// surrounding whitespace is ignored. At most one of APIKeyEnv and APIKeyFile is set;
	// with neither, no key is sent (local servers).
	APIKeyFile string `yaml:"api_key_file"`
	// Timeout bounds each provider call ("30s"); default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxOutputTokens bounds each summary (for extractive: its token budget); default 2048.
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// MaxAttempts overrides Options.Retry.MaxAttempts for this summarizer when positive.
	MaxAttempts int `yaml:"max_attempts"`
	// MaxInputTokens bounds each call's input (the system prompt, the previous summary, the
	// transcript, the instructions), counted with the conversation's tokenizer
	// (policy.tokenizer): a range whose transcript is longer is summarized in chunks (see
	// Fit), each call anchored on the summary so far. Default 100000.
	MaxInputTokens int64 `yaml:"max_input_tokens"`
	// AllowHTTP lets an http:// base_url name a host other than a loopback address (a
	// model server beside the pod, inside the cluster's network): without it such a URL is
	// refused, since it would send the key and the conversations in clear.
	AllowHTTP bool `yaml:"allow_http"`
	// Fallback names the summarizer (e.g. "extractive") that writes the summary when this
	// one fails transiently (its retries ran out, its breaker is open, it answered an empty
	// summary). A fallback summary
	// says so in CompactResponse.summary.fallback_from and is not cached, so the next call
	// tries this summarizer again. Empty: the failure is the call's (UNAVAILABLE).
	Fallback string `yaml:"fallback"`
	// AgentCache (anthropic, openai and openai-responses; default true) sends the summary request as the
	// agent's own request when a CompactRequest carries agent_request for this summarizer's
	// provider format and model, so that the conversation is read from the provider's prompt
	// cache (docs/PERFORMANCE.md measures what it saves). false: always the summarizer's own
	// prompt.
	AgentCache *bool `yaml:"agent_cache"`
}

// Validate checks names, kinds and required fields without reading keys.
func (c *Config) Validate() error {
	seen := map[string]bool{}
	var errs []error
	for i, s := range c.Summarizers {
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("summarizers[%d]: %w", i, err))
			continue
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("summarizers[%d]: duplicate name %q", i, s.Name))
		}
		seen[s.Name] = true
	}
	for i, s := range c.Summarizers {
		switch f := s.Fallback; {
		case f == "":
		case f == s.Name:
			errs = append(errs, fmt.Errorf("summarizers[%d]: %s falls back to itself", i, s.Name))
		case !seen[f] && f != DefaultName:
			errs = append(errs, fmt.Errorf("summarizers[%d]: fallback %q is not defined", i, f))
		}
	}
	if err := c.Prices.Validate(); err != nil {
		errs = append(errs, err)
	}
	if d := c.DefaultSummarizer; d != "" && !seen[d] && d != DefaultName {
		errs = append(errs, fmt.Errorf("default_summarizer: %q is not defined", d))
	}
	if len(errs) > 0 {
		return fmt.Errorf("summarizer config: %w", errors.Join(errs...))
	}
	return nil
}

func (s SummarizerConfig) validate() error {
	if strings.TrimSpace(s.Name) == "" {
		return errors.New("name is required")
	}
	switch s.Kind {
	case KindExtractive:
		return nil
	case KindOpenAI, KindOpenAIResponses, KindAnthropic:
	case "":
		return fmt.Errorf("%s: kind is required (openai, openai-responses, anthropic or extractive)", s.Name)
	default:
		return fmt.Errorf("%s: unknown kind %q (openai, openai-responses, anthropic or extractive)", s.Name, s.Kind)
	}
	if s.Model == "" {
		return fmt.Errorf("%s: model is required for kind %s", s.Name, s.Kind)
	}
	if s.APIKeyEnv != "" && s.APIKeyFile != "" {
		return fmt.Errorf("%s: set api_key_env or api_key_file, not both", s.Name)
	}
	if s.BaseURL != "" {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: base_url %s is not an http(s) URL", s.Name, clip.Quote(s.BaseURL))
		}
		if u.Scheme == "http" && !loopback(u.Hostname()) && !s.AllowHTTP {
			return fmt.Errorf("%s: base_url %s would send the API key and the conversations in clear: use https, a loopback address, or set allow_http: true", s.Name, clip.Quote(s.BaseURL))
		}
	}
	if s.Timeout < 0 || s.MaxOutputTokens < 0 || s.MaxAttempts < 0 || s.MaxInputTokens < 0 {
		return fmt.Errorf("%s: timeout, max_output_tokens, max_input_tokens and max_attempts must not be negative", s.Name)
	}
	return nil
}

// loopback reports whether host is a loopback name or address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Options are what the process supplies to every summarizer. The zero value is usable.
type Options struct {
	// TracerProvider receives the spans; default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// HTTPClient is used for provider calls; default the SDK's.
	HTTPClient *http.Client
	// Retry and Breaker tune resilience; see their docs for defaults.
	Retry   RetryPolicy
	Breaker BreakerPolicy
	// LookupEnv resolves api_key_env; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// KeyFileInterval is how often an api_key_file is stat'ed, on use, for a new key
	// (rotation without a restart); default 5s.
	KeyFileInterval time.Duration
	// Logger receives what a failed provider call's error says beyond its summary (never
	// the provider's response body, which may echo the conversation); nil discards it.
	Logger *slog.Logger
	// Prices estimate each LLM call's cost; NewRegistry sets them from Config.Prices when
	// nil.
	Prices Prices
}

// DefaultKeyFileInterval is Options.KeyFileInterval's default.
const DefaultKeyFileInterval = 5 * time.Second

// resolve validates cfg for kind, applies defaults and reads the API key: key returns the
// key to send, re-reading api_key_file when it changed (a file that cannot be read, or
// holds no key, keeps the previous key in use).
func (s SummarizerConfig) resolve(kind string, opt Options) (_ SummarizerConfig, key func() string, err error) {
	if s.Kind == "" {
		s.Kind = kind
	}
	if s.Kind != kind {
		return s, nil, fmt.Errorf("summarizer %s: kind %q, want %q", s.Name, s.Kind, kind)
	}
	if err := s.validate(); err != nil {
		return s, nil, fmt.Errorf("summarizer config: %w", err)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxOutputTokens == 0 {
		s.MaxOutputTokens = DefaultMaxOutputTokens
	}
	if s.MaxInputTokens == 0 {
		s.MaxInputTokens = DefaultMaxInputTokens
	}
	switch {
	case s.APIKeyEnv != "":
		lookup := opt.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(s.APIKeyEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return s, nil, fmt.Errorf("summarizer %s: environment variable %s (api_key_env) is not set", s.Name, s.APIKeyEnv)
		}
		v = strings.TrimSpace(v)
		return s, func() string { return v }, nil
	case s.APIKeyFile != "":
		interval := opt.KeyFileInterval
		if interval <= 0 {
			interval = DefaultKeyFileInterval
		}
		path := s.APIKeyFile
		f, err := filewatch.New([]string{path}, filewatch.Options{Interval: interval}, func() (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", err // the error names the file, never its content
			}
			if k := strings.TrimSpace(string(b)); k != "" {
				return k, nil
			}
			return "", fmt.Errorf("%s is empty", path)
		})
		if err != nil {
			return s, nil, fmt.Errorf("summarizer %s: api_key_file: %w", s.Name, err)
		}
		return s, f.Get, nil
	}
	return s, func() string { return "" }, nil
}

func newLLM(cfg SummarizerConfig, provider string, base *url.URL, opt Options, call callFunc, apiErr apiErrorFunc) *LLM {
	retry := opt.Retry
	if cfg.MaxAttempts > 0 {
		retry.MaxAttempts = cfg.MaxAttempts
	}
	l := &LLM{
		name:      cfg.Name,
		provider:  provider,
		model:     cfg.Model,
		maxTokens: cfg.MaxOutputTokens,
		maxInput:  int(cfg.MaxInputTokens),
		timeout:   cfg.Timeout,
		retry:     retry.withDefaults(),
		breaker:   newBreaker(opt.Breaker),
		tracer:    tracerFrom(opt.TracerProvider),
		call:      call,
		apiError:  apiErr,
		sleep:     sleepCtx,
		logger:    opt.Logger,
		prices:    opt.Prices,
	}
	l.agentCache = cfg.AgentCache == nil || *cfg.AgentCache
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if base != nil {
		l.server = base.Hostname()
	}
	return l
}

// New builds the summarizer cfg describes.
func New(cfg SummarizerConfig, opt Options) (Summarizer, error) {
	switch cfg.Kind {
	case KindOpenAI:
		return NewOpenAI(cfg, opt)
	case KindOpenAIResponses:
		return NewOpenAIResponses(cfg, opt)
	case KindAnthropic:
		return NewAnthropic(cfg, opt)
	case KindExtractive:
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("summarizer config: %w", err)
		}
		return NewExtractive(cfg.Name, cfg.MaxOutputTokens, opt), nil
	}
	return nil, fmt.Errorf("summarizer config: %w", cfg.validate())
}

// Registry holds the configured summarizers by name, with a default.
type Registry struct {
	byName   map[string]Summarizer
	fallback map[string]string
	def      string
}

// NewRegistry builds every summarizer of cfg (nil: none) plus the built-in "extractive"
// (unless cfg defines that name). The default is cfg.DefaultSummarizer, else defaultName
// (the --summarizer flag), else "extractive"; it must exist.
func NewRegistry(cfg *Config, defaultName string, opt Options) (*Registry, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{byName: make(map[string]Summarizer), fallback: make(map[string]string)}
	if opt.Prices == nil {
		opt.Prices = cfg.Prices
	}
	for _, sc := range cfg.Summarizers {
		s, err := New(sc, opt)
		if err != nil {
			return nil, err
		}
		r.byName[sc.Name] = s
		if sc.Fallback != "" {
			r.fallback[sc.Name] = sc.Fallback
		}
	}
	if _, ok := r.byName[DefaultName]; !ok {
		r.byName[DefaultName] = NewExtractive(DefaultName, 0, opt)
	}
	r.def = cfg.DefaultSummarizer
	if r.def == "" {
		r.def = defaultName
	}
	if r.def == "" {
		r.def = DefaultName
	}
	if _, ok := r.byName[r.def]; !ok {
		return nil, fmt.Errorf("summarizer config: default summarizer %q is not defined (have %s)", r.def, strings.Join(r.Names(), ", "))
	}
	return r, nil
}

// Get returns the summarizer named name, the default for "". An unknown name returns an
// error wrapping ErrUnknown and a *engine.ValidationError on field "summarizer" (so it maps
// to INVALID_ARGUMENT).
func (r *Registry) Get(name string) (Summarizer, error) {
	if name == "" {
		name = r.def
	}
	if s, ok := r.byName[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrUnknown, engine.Invalid("summarizer",
		fmt.Sprintf("unknown summarizer %s (configured: %s)", clip.Quote(name), strings.Join(r.Names(), ", "))))
}

// Fallback returns the summarizer configured to stand in for the one named name when it fails
// transiently, if any.
func (r *Registry) Fallback(name string) (Summarizer, bool) {
	if name == "" {
		name = r.def
	}
	f, ok := r.fallback[name]
	if !ok {
		return nil, false
	}
	s, ok := r.byName[f]
	return s, ok
}

// Default returns the default summarizer's name.
func (r *Registry) Default() string { return r.def }

// Names lists the configured names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
