package measure

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/summarize"
)

// AgentModel is the model the replayed agent and the fake provider's summarizer both name: a
// provider's prompt cache is the model's.
const AgentModel = "fake-model"

// Agent is the agent side of a replay against the fake provider (llmtest.Provider): it sends
// each of the agent's model requests there in its format (Anthropic Messages with a
// cache_control breakpoint on the last message, as Claude Code does; OpenAI Chat or
// Responses, cached by prefix), so that the provider's cache holds what a real agent's
// requests would have written.
type Agent struct {
	provider *llmtest.Provider
	api      providerAPI // the wire format its requests use
	// Request is what a CompactRequest carries for the summary request to be sent as the
	// agent's own (CompactRequest.agent_request); nil when the summarizer sends its own.
	Request *compactorv1.AgentRequest
}

// providerAPI is one wire format of the fake provider: the summarizer kind that speaks it,
// where an agent posts its requests, and its request body besides the conversation.
type providerAPI struct {
	kind   string
	format compactorv1.Provider
	path   string
	base   string
}

// providerAPIs are the summarizers measured against the fake provider, by name; each also
// runs as "<name>-agent", its summary request sent as the agent's own.
var providerAPIs = map[string]providerAPI{
	"anthropic": {summarize.KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, "/v1/messages",
		`{"model":"` + AgentModel + `","max_tokens":4096}`},
	"openai-chat": {summarize.KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, "/v1/chat/completions",
		`{"model":"` + AgentModel + `","max_completion_tokens":4096}`},
	"openai-responses": {summarize.KindOpenAIResponses, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, "/v1/responses",
		`{"model":"` + AgentModel + `","max_output_tokens":4096}`},
}

// providerSummarizer returns the summarizer name, with ok false when it is not one of
// providerAPIs (with or without "-agent"): of that API against a fresh llmtest.Provider, with
// agent_cache as the name asks.
func providerSummarizer(s *Summarizer, name string) (*summarize.Config, bool) {
	api, ok := providerAPIs[strings.TrimSuffix(name, "-agent")]
	if !ok {
		return nil, false
	}
	agentCache := strings.HasSuffix(name, "-agent")
	p := llmtest.StartProvider()
	s.close = p.Close
	s.Agent = &Agent{provider: p, api: api}
	if agentCache {
		s.Agent.Request = &compactorv1.AgentRequest{Provider: api.format, Model: AgentModel, BaseBody: api.base}
	}
	s.Name = "llm"
	url := p.URL
	if api.kind != summarize.KindAnthropic {
		url += "/v1"
	}
	return &summarize.Config{Summarizers: []summarize.SummarizerConfig{{
		Name: s.Name, Kind: api.kind, BaseURL: url, Model: AgentModel, Timeout: oneLineTimeout, AgentCache: &agentCache,
	}}}, true
}

// Send sends the agent's model request of sent (the messages a model is sent) to the
// provider.
func (a *Agent) Send(ctx context.Context, sent []*compactorv1.Message) error {
	if len(sent) == 0 {
		return nil
	}
	api := a.api
	if api.format == compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES {
		sent = append(sent[:len(sent)-1:len(sent)-1], summarize.WithCacheBreakpoint(sent[len(sent)-1]))
	}
	low, err := format.Lower(&compactorv1.LowerRequest{Messages: sent, Provider: api.format, Model: AgentModel, BaseBody: api.base})
	if err != nil {
		return fmt.Errorf("agent request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.provider.URL+api.path, strings.NewReader(low.GetBody()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("agent request: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent request: %s", resp.Status)
	}
	return nil
}

// LastCall is what the provider billed its latest request.
func (a *Agent) LastCall() llmtest.Call {
	calls := a.provider.Calls()
	if len(calls) == 0 {
		return llmtest.Call{}
	}
	return calls[len(calls)-1]
}

// Billed is what a summary's input cost in input-token equivalents at the providers' cache
// prices: uncached input, plus 0.1 × cache reads (Anthropic; OpenAI's gpt-5 models), plus
// 1.25 × cache writes (Anthropic's 5-minute cache; OpenAI bills none).
func Billed(s *compactorv1.Summary) float64 {
	read, write := s.GetCacheReadInputTokens(), s.GetCacheCreationInputTokens()
	return float64(s.GetInputTokens()-read-write) + 0.1*float64(read) + 1.25*float64(write)
}
