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

// AgentModel is the model the replayed agent and the fake Anthropic summarizer both name: a
// provider's prompt cache is the model's.
const AgentModel = "claude-fake"

// Agent is the agent side of a replay against the fake provider (llmtest.Provider): it sends
// each of the agent's model requests there, as Anthropic Messages with a cache_control
// breakpoint on the last message (as Claude Code does), so that the provider's cache holds
// what a real agent's requests would have written.
type Agent struct {
	provider *llmtest.Provider
	// Request is what a CompactRequest carries for the summary request to be sent as the
	// agent's own (CompactRequest.agent_request); nil when the summarizer sends its own.
	Request *compactorv1.AgentRequest
}

// agentBase is the agent's request body besides its conversation.
const agentBase = `{"model":"` + AgentModel + `","max_tokens":4096}`

// newAnthropic is the "anthropic" and "anthropic-agent" summarizer: an Anthropic summarizer
// (official SDK) against a fresh llmtest.Provider, with agent_cache as asked.
func newAnthropic(s *Summarizer, agentCache bool) *summarize.Config {
	p := llmtest.StartProvider()
	s.close = p.Close
	s.Agent = &Agent{provider: p}
	if agentCache {
		s.Agent.Request = &compactorv1.AgentRequest{Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, Model: AgentModel, BaseBody: agentBase}
	}
	s.Name = "anthropic"
	return &summarize.Config{Summarizers: []summarize.SummarizerConfig{{
		Name: "anthropic", Kind: summarize.KindAnthropic, BaseURL: p.URL, Model: AgentModel, Timeout: oneLineTimeout, AgentCache: &agentCache,
	}}}
}

// Send sends the agent's model request of sent (the messages a model is sent) to the
// provider.
func (a *Agent) Send(ctx context.Context, sent []*compactorv1.Message) error {
	if len(sent) == 0 {
		return nil
	}
	msgs := append(sent[:len(sent)-1:len(sent)-1], summarize.WithCacheBreakpoint(sent[len(sent)-1]))
	low, err := format.Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
		Model: AgentModel, BaseBody: agentBase})
	if err != nil {
		return fmt.Errorf("agent request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.provider.URL+"/v1/messages", strings.NewReader(low.GetBody()))
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

// Billed is what a summary's input cost in input-token equivalents at Anthropic's cache
// prices: uncached input, plus 0.1 × cache reads, plus 1.25 × cache writes.
func Billed(s *compactorv1.Summary) float64 {
	read, write := s.GetCacheReadInputTokens(), s.GetCacheCreationInputTokens()
	return float64(s.GetInputTokens()-read-write) + 0.1*float64(read) + 1.25*float64(write)
}
