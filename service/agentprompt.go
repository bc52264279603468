package service

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summarize"
)

// agentPrompt is the conversation as the agent sends it to its model, for a summarizer that
// sends the summary request as the agent's own (summarize.AgentPrompt); nil when the request
// carries no agent_request. The messages are the request's own (with their standing
// instructions: the agent sent them so), those a model is sent (engine.Sent), the ones after
// the cut included.
func (c *compaction) agentPrompt(kept []*compactorv1.Message) *summarize.AgentPrompt {
	ar := c.req.GetAgentRequest()
	if ar == nil {
		return nil
	}
	p := &summarize.AgentPrompt{Request: ar, Kept: kept}
	tokens := c.plan.GetMessageTokens()
	for i, sent := range engine.Sent(c.msgs) {
		if !sent {
			continue
		}
		if i < c.cut {
			p.Cut++
		}
		p.Messages, p.Tokens = append(p.Messages, c.msgs[i]), append(p.Tokens, tokens[i])
	}
	return p
}
