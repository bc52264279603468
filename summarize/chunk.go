package summarize

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// Incremental summaries: a range larger than what one call of a summarizer reads is summarized
// in chunks, oldest first, each call given the summary so far as its anchor. Fit says where
// the next chunk ends; the caller (package service) makes the calls, so that each chunk's
// summary is admitted, checked and cached under its own prefix.

// keptLabelBytes bounds what the transcript adds to a message kept verbatim after the summary
// (its role line says so).
const keptLabelBytes = 64

// fitter is a Summarizer whose calls read a bounded input.
type fitter interface {
	Fit(in engine.SummaryInput) int
}

// Fit returns how many of in.Messages, from the first, one call of s reads whole, together
// with in.Anchor, in.Instructions and the prompt: all of them when s reads any input (the
// extractive summarizer) or when they fit its input bound (max_input_tokens); otherwise the
// most that fit and end at a turn boundary (no tool call or approval request apart from its
// answer), and at least the first turn (which the call then shortens to fit, as
// engine.FitSummaryPrompt does). The rest is for the next call, anchored on this one's summary.
func Fit(s Summarizer, in engine.SummaryInput) int {
	if f, ok := s.(fitter); ok {
		return f.Fit(in)
	}
	return len(in.Messages)
}

// Fit implements Fit for an LLM summarizer: the prompt is measured as the call renders it
// (engine.SummaryPrompt with the default transcript caps), in bytes against max_input_tokens
// at 3 bytes per token.
func (l *LLM) Fit(in engine.SummaryInput) int {
	msgs := in.Messages
	if l.maxInput <= 0 || len(msgs) == 0 {
		return len(msgs)
	}
	frame := len(engine.SummarySystemPrompt()) +
		len(engine.SummaryPrompt(engine.SummaryInput{Anchor: in.Anchor, Instructions: in.Instructions}, engine.TranscriptOptions{}))
	room := l.maxInput - frame
	kept := make(map[*compactorv1.Message]bool, len(in.Kept))
	for _, m := range in.Kept {
		kept[m] = true
	}
	ends := turnEnds(msgs)
	size, fit := 0, 0
	for i, m := range msgs {
		if !engine.InHead(m) {
			size += len(engine.Transcript([]*compactorv1.Message{m}, engine.TranscriptOptions{}))
			if kept[m] {
				size += keptLabelBytes
			}
		}
		if size > room {
			break
		}
		if ends[i] {
			fit = i + 1
		}
	}
	if fit > 0 {
		return fit
	}
	for i, end := range ends { // not even the first turn fits: it alone
		if end {
			return i + 1
		}
	}
	return len(msgs)
}

// turnEnds reports, for each message, whether a chunk may end after it: no tool call or
// approval request at or before it is answered after it.
func turnEnds(msgs []*compactorv1.Message) []bool {
	answer := map[string]int{} // call id → the last message answering it
	for i, m := range msgs {
		for _, p := range m.GetParts() {
			switch c := p.GetContent().(type) {
			case *compactorv1.Part_ToolResult:
				answer[c.ToolResult.GetToolCallId()] = i
			case *compactorv1.Part_ApprovalResponse:
				answer["approval:"+c.ApprovalResponse.GetApprovalId()] = i
			}
		}
	}
	ends := make([]bool, len(msgs))
	reach := -1 // the last message answering a call made so far
	for i, m := range msgs {
		for _, p := range m.GetParts() {
			id := ""
			switch c := p.GetContent().(type) {
			case *compactorv1.Part_ToolCall:
				id = c.ToolCall.GetToolCallId()
			case *compactorv1.Part_ApprovalRequest:
				id = "approval:" + c.ApprovalRequest.GetApprovalId()
			default:
				continue
			}
			if a, ok := answer[id]; ok {
				reach = max(reach, a)
			}
		}
		ends[i] = reach <= i
	}
	return ends
}
