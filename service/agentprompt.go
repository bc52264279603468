package service

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summarize"
)

// agentPrompt is the conversation as the agent sent it to its model up to the cut, for a
// summarizer that sends the summary request as the agent's own (summarize.AgentPrompt); nil
// when the request carries no agent_request. The messages are the request's own (with their
// standing instructions: the agent sent them so), those a model is sent (engine.Sent).
func (c *compaction) agentPrompt(kept []*compactorv1.Message) *summarize.AgentPrompt {
	ar := c.req.GetAgentRequest()
	if ar == nil {
		return nil
	}
	p := &summarize.AgentPrompt{Request: ar, Kept: kept}
	sent := engine.Sent(c.msgs)
	tokens := c.plan.GetMessageTokens()
	for i := 0; i < c.cut && i < len(sent); i++ {
		if !sent[i] {
			continue
		}
		p.Messages = append(p.Messages, c.msgs[i])
		if i < len(tokens) {
			p.Tokens += tokens[i]
		}
	}
	return p
}
