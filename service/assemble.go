package service

import (
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// The last stage of Compact: the compacted conversation, assembled from the head, the summary,
// the requests kept verbatim and the tail.

// messages is the compacted conversation: the head (pruned; the standing instructions split
// from the messages before the cut in their place), [the compact prompt], the summary of text
// (ending with the source marker when the source is kept),
// the requests kept verbatim, then the tail (pruned). The summary stands for the messages
// before the cut that are not kept: the plan's summarized ones and those an earlier summary
// covered (its dropped ones).
func (c *compaction) messages(pruned []*compactorv1.Message, text string, sourced bool) []*compactorv1.Message {
	out := make([]*compactorv1.Message, 0, len(c.msgs)-c.cut+8)
	head := 0
	for i := range c.cut {
		if c.plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_KEEP {
			out = append(out, pruned[i]) // the head: system, prefaces, pinned, instructions
			head++
		} else if sp, ok := c.splits[i]; ok {
			out = append(out, sp.standing)
		}
	}
	folded := c.cut - head - len(c.kept)
	if c.req.GetEmitCompactPrompt() {
		out = append(out, compactPromptMessage(c.req.GetInstructions()))
	}
	sm := engine.SummaryMessage(text, folded, len(c.kept)+c.leading)
	if sourced && c.marker != "" {
		t := sm.GetParts()[0].GetText()
		t.Text = engine.WithSourceMarker(t.GetText(), c.marker)
	}
	out = append(out, sm)
	for _, k := range c.kept {
		if sp, ok := c.splits[int(k)]; ok {
			out = append(out, c.d.KeptRequest(int(k), sp.rest))
		} else {
			out = append(out, c.d.KeptRequest(int(k), pruned[k]))
		}
	}
	return append(out, pruned[c.cut:]...)
}

// compactPromptMessage is the COMPACT_PROMPT message that records what was asked of the
// summarizer. It is persisted for the record and never sent to a model.
func compactPromptMessage(instructions string) *compactorv1.Message {
	var b strings.Builder
	b.WriteString(engine.SummarySystemPrompt())
	b.WriteString("\n\nSections: ")
	for i, sec := range engine.SummarySections {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sec.Heading)
	}
	b.WriteString(".")
	if ins := strings.TrimSpace(instructions); ins != "" {
		b.WriteString("\n\nAdditional instructions for this summary:\n")
		b.WriteString(ins)
	}
	return &compactorv1.Message{
		Role: compactorv1.Role_ROLE_USER,
		Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT,
		Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{
			Text: &compactorv1.TextPart{Text: b.String()},
		}}},
	}
}
