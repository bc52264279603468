package summarize

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// DefaultAnthropicBaseURL is used when an anthropic summarizer has no base_url.
const DefaultAnthropicBaseURL = "https://api.anthropic.com/"

// NewAnthropic returns a summarizer that calls the Anthropic Messages API through the
// official SDK, with the SDK's retries off (the RetryPolicy governs) and without the SDK's
// environment defaults (ANTHROPIC_* variables, profiles): cfg alone configures it.
func NewAnthropic(cfg SummarizerConfig, opt Options) (*LLM, error) {
	cfg, key, err := cfg.resolve(KindAnthropic, opt)
	if err != nil {
		return nil, err
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(key()),
		option.WithMaxRetries(0),
	}
	if opt.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(opt.HTTPClient))
	}
	client := anthropic.NewClient(opts...)
	u, _ := url.Parse(base)
	model := cfg.Model
	call := func(ctx context.Context, system, user string, maxTokens int64) (completion, error) {
		return anthropicCompletion(client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     anthropic.Model(model),
			MaxTokens: maxTokens,
			System:    []anthropic.TextBlockParam{{Text: system}},
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))},
		}, option.WithAPIKey(key()))) // a rotated key file is read again
	}
	raw := func(ctx context.Context, body []byte) (completion, error) {
		return anthropicCompletion(client.Messages.New(ctx, anthropic.MessageNewParams{},
			option.WithRequestBody("application/json", body), option.WithAPIKey(key())))
	}
	l := newLLM(cfg, ProviderAnthropic, u, opt, call, func(err error) (*ProviderError, http.Header, bool) {
		var e *anthropic.Error
		if errors.As(err, &e) {
			var h http.Header
			if e.Response != nil {
				h = e.Response.Header
			}
			return &ProviderError{Status: e.StatusCode, Type: string(e.Type()), err: err}, h, true
		}
		return nil, nil, false
	})
	l.rawCall, l.agentFormat = raw, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES
	return l, nil
}

// anthropicCompletion is what a Messages answer r (or err) says.
func anthropicCompletion(r *anthropic.Message, err error) (completion, error) {
	if err != nil {
		return completion{}, err
	}
	var b strings.Builder
	for _, blk := range r.Content {
		if blk.Type == "text" {
			b.WriteString(blk.Text)
		}
	}
	c := completion{
		text:         b.String(),
		model:        string(r.Model),
		inputTokens:  r.Usage.InputTokens + r.Usage.CacheReadInputTokens + r.Usage.CacheCreationInputTokens,
		cacheRead:    r.Usage.CacheReadInputTokens,
		cacheWrite:   r.Usage.CacheCreationInputTokens,
		outputTokens: r.Usage.OutputTokens,
	}
	if r.StopReason != "" {
		c.finishReasons = []string{string(r.StopReason)}
	}
	return c, nil
}
