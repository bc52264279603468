package summarize

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// DefaultOpenAIBaseURL is used when an openai or openai-responses summarizer has no base_url.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1/"

// NewOpenAI returns a summarizer that calls an OpenAI-compatible chat completions API
// (OpenAI, Ollama, vLLM, OpenRouter, LiteLLM) through the official SDK. The SDK's retries
// are off (the RetryPolicy governs) and ambient OPENAI_* variables never override cfg. The
// token limit is sent as max_completion_tokens to api.openai.com and as max_tokens to other
// servers, which widely support only that.
func NewOpenAI(cfg SummarizerConfig, opt Options) (*LLM, error) {
	cfg, key, err := cfg.resolve(KindOpenAI, opt)
	if err != nil {
		return nil, err
	}
	client, u := newOpenAIClient(cfg, key, opt)
	official := u != nil && u.Hostname() == "api.openai.com"
	model := cfg.Model
	call := func(ctx context.Context, system, user string, maxTokens int64) (completion, error) {
		p := openai.ChatCompletionNewParams{
			Model: openai.ChatModel(model),
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage(system),
				openai.UserMessage(user),
			},
		}
		if official {
			p.MaxCompletionTokens = openai.Int(maxTokens)
		} else {
			p.MaxTokens = openai.Int(maxTokens)
		}
		return chatCompletion(client.Chat.Completions.New(ctx, p, option.WithAPIKey(key()))) // a rotated key file is read again
	}
	raw := func(ctx context.Context, body []byte) (completion, error) {
		return chatCompletion(client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{},
			option.WithRequestBody("application/json", body), option.WithAPIKey(key())))
	}
	l := newLLM(cfg, ProviderOpenAI, u, opt, call, openAIError)
	l.rawCall, l.agentFormat, l.official = raw, compactorv1.Provider_PROVIDER_OPENAI_CHAT, official
	return l, nil
}

// newOpenAIClient is the official SDK's client for cfg (resolved, its key read by key) and
// the API root it calls: the SDK's retries off, ambient OPENAI_* variables ignored.
func newOpenAIClient(cfg SummarizerConfig, key func() string, opt Options) (openai.Client, *url.URL) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(key()),
		// Ambient OPENAI_ORG_ID / OPENAI_PROJECT_ID belong to whoever runs the process, not
		// to this summarizer's server.
		option.WithHeaderDel("OpenAI-Organization"),
		option.WithHeaderDel("OpenAI-Project"),
		option.WithMaxRetries(0),
	}
	if opt.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(opt.HTTPClient))
	}
	u, _ := url.Parse(base)
	return openai.NewClient(opts...), u
}

// openAIError recognizes an OpenAI API error answer (an apiErrorFunc): its status, headers
// and error code, or type when it has no code.
func openAIError(err error) (*ProviderError, http.Header, bool) {
	var e *openai.Error
	if !errors.As(err, &e) {
		return nil, nil, false
	}
	var h http.Header
	if e.Response != nil {
		h = e.Response.Header
	}
	kind := e.Type
	if e.Code != "" {
		kind = e.Code
	}
	return &ProviderError{Status: e.StatusCode, Type: kind, err: err}, h, true
}

// chatCompletion is what a chat completion r (or err) says.
func chatCompletion(r *openai.ChatCompletion, err error) (completion, error) {
	if err != nil {
		return completion{}, err
	}
	c := completion{model: r.Model, inputTokens: r.Usage.PromptTokens, outputTokens: r.Usage.CompletionTokens,
		cacheRead: r.Usage.PromptTokensDetails.CachedTokens}
	for _, ch := range r.Choices {
		if ch.Index == 0 || len(r.Choices) == 1 {
			c.text = ch.Message.Content
		}
		c.finishReasons = append(c.finishReasons, ch.FinishReason)
	}
	return c, nil
}
