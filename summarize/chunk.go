package summarize

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// Incremental summaries: a range larger than what one call of a summarizer reads is summarized
// in chunks, oldest first, each call given the summary so far as its anchor. Fit says where
// the next chunk ends; the caller (package service) makes the calls, so that each chunk's
// summary is admitted, checked and cached under its own prefix.

// keptLabelTokens bounds what the transcript adds to a message kept verbatim after the
// summary (its role line says so), and joinTokens what joining two messages' transcripts may
// add to their tokens counted apart.
const (
	keptLabelTokens = 16
	joinTokens      = 1
)

// fitter is a Summarizer whose calls read a bounded input.
type fitter interface {
	Fit(req Request) int
}

// Fit returns how many of req.Messages, from the first, one call of s reads whole, together
// with req.Anchor, req.Instructions and the prompt: all of them when s reads any input (the
// extractive summarizer) or when they fit its input bound (max_input_tokens, counted with
// req.Count); otherwise the most that fit and end at a turn boundary (no tool call or
// approval request apart from its answer), and at least the first turn (which the call then
// shortens to fit, as engine.FitSummaryPrompt does). The rest is for the next call, anchored
// on this one's summary.
func Fit(s Summarizer, req Request) int {
	if f, ok := s.(fitter); ok {
		return f.Fit(req)
	}
	return len(req.Messages)
}

// Fit implements Fit for an LLM summarizer: the prompt is measured as the call renders it
// (engine.SummaryPrompt with the default transcript caps), each message's part of the
// transcript counted apart.
func (l *LLM) Fit(req Request) int {
	msgs := req.Messages
	if l.maxInput <= 0 || len(msgs) == 0 {
		return len(msgs)
	}
	count := counter(req.Count)
	frame := count(engine.SummarySystemPrompt()) +
		count(engine.SummaryPrompt(engine.SummaryInput{Anchor: req.Anchor, Instructions: req.Instructions}, engine.TranscriptOptions{}))
	room := l.maxInput - frame
	kept := make(map[*compactorv1.Message]bool, len(req.Kept))
	for _, m := range req.Kept {
		kept[m] = true
	}
	ends := TurnEnds(msgs)
	size, fit := 0, 0
	for i, m := range msgs {
		if !engine.InHead(m) {
			p := i
			if len(req.Positions) == len(msgs) {
				p = req.Positions[i]
			}
			one := engine.SummaryInput{Messages: []*compactorv1.Message{m}, Positions: []int{p}}
			if t := engine.NumberedTranscript(one, engine.TranscriptOptions{}); t != "" {
				size += count(t) + joinTokens
			}
			if kept[m] {
				size += keptLabelTokens
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

// counter is count, or, for nil, an estimate of 3 bytes a token (fewer than English text or
// code take).
func counter(count func(string) int) func(string) int {
	if count != nil {
		return count
	}
	return func(s string) int { return (len(s) + 2) / 3 }
}

// prompt returns the user prompt of req, within the input bound with system: the whole
// transcript when it fits, else shortened by engine.FitSummaryPrompt until it does.
func (l *LLM) prompt(req Request, system string) string {
	count := counter(req.Count)
	p := engine.SummaryPrompt(req.SummaryInput, engine.TranscriptOptions{})
	limit := l.maxInput - count(system)
	for range 8 {
		n := count(p)
		if l.maxInput <= 0 || n <= limit {
			break
		}
		// Aim below the bound by the share the prompt is over it, and a little more.
		p = engine.FitSummaryPrompt(req.SummaryInput, int(int64(len(p))*int64(max(limit, 1))/int64(n))*15/16)
	}
	return p
}

// TurnEnds reports, for each message, whether a chunk may end after it: no tool call or
// approval request at or before it is answered after it.
func TurnEnds(msgs []*compactorv1.Message) []bool {
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
