package summarize

import (
	"context"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// NewOpenAIResponses returns a summarizer that calls the OpenAI Responses API (POST
// /responses) through the official SDK, configured as NewOpenAI is: the SDK's retries off
// (the RetryPolicy governs), ambient OPENAI_* variables ignored. The system prompt is sent as
// instructions, the token limit as max_output_tokens, and store is false: a summary is not
// kept on the provider's side. Its agent format is PROVIDER_OPENAI_RESPONSES
// (SummarizerConfig.AgentCache).
func NewOpenAIResponses(cfg SummarizerConfig, opt Options) (*LLM, error) {
	cfg, key, err := cfg.resolve(KindOpenAIResponses, opt)
	if err != nil {
		return nil, err
	}
	client, u := newOpenAIClient(cfg, key, opt)
	model := cfg.Model
	call := func(ctx context.Context, system, user string, maxTokens int64) (completion, error) {
		return responseCompletion(client.Responses.New(ctx, responses.ResponseNewParams{
			Model:           model,
			Instructions:    openai.String(system),
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(user)},
			MaxOutputTokens: openai.Int(maxTokens),
			Store:           openai.Bool(false),
		}, option.WithAPIKey(key()))) // a rotated key file is read again
	}
	raw := func(ctx context.Context, body []byte) (completion, error) {
		return responseCompletion(client.Responses.New(ctx, responses.ResponseNewParams{},
			option.WithRequestBody("application/json", body), option.WithAPIKey(key())))
	}
	l := newLLM(cfg, ProviderOpenAI, u, opt, call, openAIError)
	l.rawCall, l.agentFormat = raw, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
	return l, nil
}

// responseCompletion is what a Responses answer r (or err) says. Its finish reason is the
// response's status, or why it is incomplete ("max_output_tokens").
func responseCompletion(r *responses.Response, err error) (completion, error) {
	if err != nil {
		return completion{}, err
	}
	c := completion{text: r.OutputText(), model: r.Model, inputTokens: r.Usage.InputTokens,
		cacheRead: r.Usage.InputTokensDetails.CachedTokens, outputTokens: r.Usage.OutputTokens}
	switch {
	case r.IncompleteDetails.Reason != "":
		c.finishReasons = []string{r.IncompleteDetails.Reason}
	case r.Status != "":
		c.finishReasons = []string{string(r.Status)}
	}
	return c, nil
}
