package summarize

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
)

// AgentPrompt is the conversation as the agent sends it to its model: what a summarizer of
// the agent's provider and model sends as the agent's own request, the summary instruction
// after it, so that the provider reads the conversation from the prompt cache the agent's
// requests wrote (CompactRequest.agent_request).
type AgentPrompt struct {
	// Request is the agent's request fields beyond the conversation.
	Request *compactorv1.AgentRequest
	// Messages are the messages the agent's model is sent (engine.Sent), in order: the whole
	// conversation the host holds, the messages after the cut included (an Anthropic summary
	// request ends where the agent's latest request ended, which may be past the cut).
	Messages []*compactorv1.Message
	// Tokens are the tokens of each of Messages, as the plan counted them.
	Tokens []int64
	// Cut is how many of Messages come before the cut: the summary replaces Messages[:Cut]
	// (but for Kept), the messages from Cut on stay verbatim after it.
	Cut int
	// Kept are the requests among Messages[:Cut] that stay verbatim after the summary (which
	// must not repeat them).
	Kept []*compactorv1.Message
}

// agentInstruction is the final user message of a summary request sent as the agent's own,
// whose last after messages come after the cut: the summarizer's system prompt cannot
// replace the agent's (the cached prefix starts with it), so its rules come first here.
func agentInstruction(p *AgentPrompt, after int, instructions string) string {
	var b strings.Builder
	b.WriteString("[Compaction request, not from the user] Stop working on the task. ")
	b.WriteString(engine.SummarySystemPrompt())
	if after == 0 {
		b.WriteString("\n\nSummarize the whole conversation above (a summary of earlier messages, if there is one, included). ")
	} else {
		fmt.Fprintf(&b, "\n\nSummarize the conversation above (a summary of earlier messages, if there is one, included) up to, "+
			"not including, its last %d messages, the first of which begins %q: they stay verbatim after the summary; "+
			"do not summarize or repeat them. ", after, opening(p.Messages[p.Cut]))
	}
	b.WriteString("Do not call any tool.")
	if len(p.Kept) > 0 {
		// Named by their openings, not repeated: they are in the conversation above, which
		// the provider reads from its cache, while this instruction is billed in full.
		named, whole := keptOpenings(p)
		b.WriteString(" These user requests above stay verbatim after the summary: do not repeat them.\n")
		for _, o := range named {
			fmt.Fprintf(&b, "- the one that begins %q\n", o)
		}
		if len(whole) > 0 {
			b.WriteString("<kept>\n")
			b.WriteString(engine.Transcript(whole, engine.TranscriptOptions{}))
			b.WriteString("</kept>\n")
		}
	}
	b.WriteString(" Use these sections:\n\n")
	writeSections(&b)
	if ins := strings.TrimSpace(instructions); ins != "" {
		b.WriteString("\nAdditional instructions for this summary:\n<instructions>\n")
		b.WriteString(ins)
		b.WriteString("\n</instructions>\n")
	}
	return b.String()
}

// writeSections writes the sections a summary has, numbered, each with what it holds.
func writeSections(b *strings.Builder) {
	for i, s := range engine.SummarySections {
		fmt.Fprintf(b, "%d. %s: %s\n", i+1, s.Heading, s.Ask)
	}
}

// AgentRules is what every summary instruction sent as the agent's own holds whatever the
// conversation: the summarizer's rules and the sections to write. It is the least such an
// instruction takes (cmd/session reports its tokens beside the instructions' own).
func AgentRules() string {
	var b strings.Builder
	b.WriteString(engine.SummarySystemPrompt())
	b.WriteString("\n\n")
	writeSections(&b)
	return b.String()
}

// openingRunes bounds the opening of a message an instruction quotes to name it.
const openingRunes = 60

// opening is the start of m as a transcript shows it (its role, then its text, tool calls
// or results), on one line, for an instruction to point at m.
func opening(m *compactorv1.Message) string {
	t := strings.Join(strings.Fields(engine.Transcript([]*compactorv1.Message{m}, engine.TranscriptOptions{})), " ")
	if r := []rune(t); len(r) > openingRunes {
		t = string(r[:openingRunes])
	}
	return t
}

// keptOpenings names each of p.Kept by the start of the user's own words in it
// (engine.UserWords, on one line: a host's blocks before them would name every request
// alike), at least openingRunes long and as much longer as it takes for no other user
// message of the conversation to start the same way. A request another message starts with
// in full, or with no words of the user's, is returned whole, to be quoted.
func keptOpenings(p *AgentPrompt) (named []string, whole []*compactorv1.Message) {
	words := func(m *compactorv1.Message) []rune {
		return []rune(strings.Join(strings.Fields(engine.UserWords(m)), " "))
	}
	var others [][]rune
	for _, m := range p.Messages {
		if m.GetRole() == compactorv1.Role_ROLE_USER {
			others = append(others, words(m))
		}
	}
	for _, k := range p.Kept {
		// k is among p.Messages: a start more than one of them has is k's and another's.
		w := words(k)
		n := min(openingRunes, len(w))
		for n < len(w) && startsWith(others, w[:n]) > 1 {
			n = min(2*n, len(w))
		}
		if n == 0 || startsWith(others, w[:n]) > 1 {
			whole = append(whole, k)
			continue
		}
		named = append(named, string(w[:n]))
	}
	return named, whole
}

// startsWith counts the texts of texts that start with prefix.
func startsWith(texts [][]rune, prefix []rune) int {
	c := 0
	for _, t := range texts {
		if len(t) >= len(prefix) && slices.Equal(t[:len(prefix)], prefix) {
			c++
		}
	}
	return c
}

// agentBody returns the body of req's summary request sent as the agent's own (see
// AgentPrompt), or ok false when the summarizer sends its own prompt: agent_cache is off, the
// request carries no agent prompt, the agent's provider or model is not the summarizer's,
// the agent has sent no request yet (no assistant message: no cache to read, and the own
// prompt, a transcript that shortens tool outputs, is the shorter), what the request would
// send exceeds the summarizer's input bound, the agent's tool_choice forces a tool call
// (forcesTool), or the lowering fails.
//
// An OpenAI request sends the messages up to the cut: OpenAI reads the longest prefix any
// earlier request of the key held. An Anthropic request reads only a prefix an earlier
// request's cache_control breakpoint wrote (or one within 20 blocks before its own
// breakpoint): it sends the messages up to the end of the agent's latest request, or to the
// cut when that is later, with its breakpoint where that request had its own
// (agentRequestEnd), so that the whole of that request is read, never written; one placed at
// the cut reads nothing when no request of the agent ended shortly before it (the cut of a
// compaction soon after another falls in the messages the first request after it sent at
// once), and writes the whole prefix at 1.25× the input price for no later reader.
func (l *LLM) agentBody(req Request, maxTokens int64) (body []byte, ok bool) {
	p := req.Agent
	if !l.agentCache || p == nil || p.Cut <= 0 || p.Cut > len(p.Messages) || len(p.Tokens) != len(p.Messages) ||
		p.Request.GetProvider() != l.agentFormat || p.Request.GetModel() != l.model {
		return nil, false
	}
	n, end := p.span(l.agentFormat)
	if n < 0 {
		return nil, false // nothing of the conversation is in the cache: the own prompt is shorter
	}
	if l.maxInput > 0 && p.tokens(n) > int64(l.maxInput) {
		return nil, false
	}
	msgs := make([]*compactorv1.Message, n, n+1)
	copy(msgs, p.Messages[:n])
	if end >= 0 {
		msgs[end] = WithCacheBreakpoint(msgs[end])
	}
	msgs = append(msgs, &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: agentInstruction(p, n-p.Cut, req.Instructions)}}}}})
	base := p.Request.GetBaseBody()
	if strings.TrimSpace(base) == "" {
		base = "{}"
	}
	low, err := format.Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: l.agentFormat, Model: l.model,
		BaseBody: base, Tools: p.Request.GetTools()})
	if err != nil {
		return nil, false
	}
	return l.agentFields(low.GetBody(), maxTokens)
}

// span returns how many of p.Messages a summary request of format f sent as the agent's own
// sends (see agentBody), and the index of its cache breakpoint (-1: none); n is -1 when the
// agent has sent no request yet.
func (p *AgentPrompt) span(f compactorv1.Provider) (n, breakpoint int) {
	end := agentRequestEnd(p.Messages)
	switch {
	case end < 0:
		return -1, -1
	case f == compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		return max(p.Cut, end+1), end
	default: // OpenAI caches with no marker
		return p.Cut, -1
	}
}

// tokens are the tokens of p.Messages[:n].
func (p *AgentPrompt) tokens(n int) int64 {
	var sum int64
	for _, t := range p.Tokens[:min(n, len(p.Tokens))] {
		sum += t
	}
	return sum
}

// MaxInputTokens are the most tokens of the conversation a summary request sent as the
// agent's own sends (Anthropic's, which may end past the cut; the instruction aside): what a
// caller reserves under a token budget for it beyond the range.
func (p *AgentPrompt) MaxInputTokens() int64 {
	n, _ := p.span(compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES)
	return p.tokens(n)
}

// agentFields sets, in a lowered body, what a summary request sends differently from the
// agent: the model, the token bound, no streaming and, for Responses, store false (a
// summary is not kept on the provider's side). The other members, prompt_cache_key among
// them, are kept byte for byte.
func (l *LLM) agentFields(body string, maxTokens int64) ([]byte, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &top); err != nil || forcesTool(top["tool_choice"]) {
		return nil, false
	}
	model, _ := json.Marshal(l.model)
	top["model"] = model
	delete(top, "stream")
	delete(top, "stream_options")
	n := json.RawMessage(fmt.Sprint(maxTokens))
	switch l.agentFormat {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		// The agent's extended thinking stays (changing it would not read the agent's cached
		// messages); the API requires max_tokens above its budget, so the summary's bound
		// comes on top of it.
		var thinking struct {
			Budget int64 `json:"budget_tokens"`
		}
		if json.Unmarshal(top["thinking"], &thinking) == nil && thinking.Budget > 0 {
			n = json.RawMessage(fmt.Sprint(maxTokens + thinking.Budget))
		}
		top["max_tokens"] = n
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		top["max_output_tokens"] = n
		top["store"] = json.RawMessage("false")
	default:
		delete(top, "max_tokens")
		delete(top, "max_completion_tokens")
		if l.official {
			top["max_completion_tokens"] = n
		} else {
			top["max_tokens"] = n
		}
	}
	out, err := json.Marshal(top)
	return out, err == nil
}

// forcesTool reports whether a body's tool_choice makes the model call a tool: its answer to
// the summary request would be a call and no text, every time. Choices that leave it to the
// model ("auto", "none", allowed tools in mode "auto") do not; any other does.
func forcesTool(choice json.RawMessage) bool {
	if len(choice) == 0 || string(choice) == "null" {
		return false
	}
	var s string
	if json.Unmarshal(choice, &s) == nil {
		return s != "auto" && s != "none"
	}
	var c struct{ Type, Mode string }
	if json.Unmarshal(choice, &c) != nil {
		return false
	}
	switch c.Type {
	case "auto", "none":
		return false
	case "allowed_tools":
		return c.Mode == "required"
	}
	return true
}

// agentRequestEnd is the index of the message of msgs where the agent's latest request
// ended, and so its cache breakpoint: the last message before the conversation's last
// assistant message (and the assistant messages right before that one) that is not the
// assistant's. An agent asks its model after a user or tool message, and the host compacts
// before it asks again, so the messages after that assistant message were never sent. It is
// -1 when no assistant message follows another message: the agent has sent nothing the
// cache could hold.
func agentRequestEnd(msgs []*compactorv1.Message) int {
	i := len(msgs) - 1
	for i >= 0 && msgs[i].GetRole() != compactorv1.Role_ROLE_ASSISTANT {
		i--
	}
	for i >= 0 && msgs[i].GetRole() == compactorv1.Role_ROLE_ASSISTANT {
		i--
	}
	return i
}

// WithCacheBreakpoint returns a copy of m with an Anthropic ephemeral cache_control on its last
// part (its other Anthropic options kept); m itself when it has no parts.
func WithCacheBreakpoint(m *compactorv1.Message) *compactorv1.Message {
	if len(m.GetParts()) == 0 {
		return m
	}
	c := proto.Clone(m).(*compactorv1.Message)
	last := c.Parts[len(c.Parts)-1]
	if last.ProviderOptions == nil {
		last.ProviderOptions = map[string]*structpb.Struct{}
	}
	opts := last.ProviderOptions["anthropic"]
	if opts == nil {
		opts = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		last.ProviderOptions["anthropic"] = opts
	}
	opts.Fields["cacheControl"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"type": structpb.NewStringValue("ephemeral")}})
	return c
}
