package engine

import (
	"slices"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Carrying out a decision's pruning and cutting (Compact's PRUNE, and the tail of a
// SUMMARIZE): the conversation with the parts replaced by their markers and the cut outputs
// cut.

// PruneAndCut returns the conversation with the parts d prunes replaced by their markers and
// the tool outputs it cuts (Decision.Cuts) cut to their head and tail, in the messages whose
// disposition is DISPOSITION_PRUNE: a pruned tool result keeps its call id and tool name and
// gets the marker as its text output; a cleared tool call keeps its id and name and gets the
// marker as its input JSON; a cut output becomes its cut text (an error stays an error), a
// cut content output and a cut observation keep their parts, their texts cut (cutParts).
// Changed messages are new messages; a message counted by the caller (token_count, or
// reported_usage) carries as its token_count what the plan counted for it less what pruning
// and cutting saved, so that a plan of the result counts, in the caller's units, what this
// one did (with reported_usage, the unchanged messages of the prefix it covers are copied with
// the count the plan scaled for them); any other changed message has its token_count
// cleared. msgs must be the conversation d was planned for; it is never modified (the result
// shares unchanged messages and parts with it).
func PruneAndCut(msgs []*compactorv1.Message, d *Decision) []*compactorv1.Message {
	out := slices.Clone(msgs)
	disp := d.Response.GetDispositions()
	pruning := func(mi int) bool { return mi < len(disp) && disp[mi] == compactorv1.Disposition_DISPOSITION_PRUNE }
	for i := 0; i < len(d.Pruned); {
		j := i
		for j < len(d.Pruned) && d.Pruned[j].Message == d.Pruned[i].Message {
			j++
		}
		if mi := d.Pruned[i].Message; pruning(mi) {
			out[mi] = prunedMessage(msgs[mi], d.Pruned[i:j])
		}
		i = j
	}
	if len(d.Cuts) > 0 {
		tc, err := tokenizer.New(d.tokenizer)
		if err != nil {
			panic("engine: the tokenizer of a decision is always loaded: " + err.Error())
		}
		for _, c := range d.Cuts {
			if pruning(c.Message) {
				out[c.Message] = cutMessage(out[c.Message], c, tc)
			}
		}
	}
	d.keepCallerCounts(msgs, out)
	return out
}

// keepCallerCounts sets, in out (msgs with d carried out), the token_count of every message
// d counted in the caller's units: what the plan counted less what pruning and cutting saved.
func (d *Decision) keepCallerCounts(msgs, out []*compactorv1.Message) {
	counts := d.Response.GetMessageTokens()
	for i, counted := range d.counted {
		if !counted {
			continue
		}
		n := max(counts[i]-d.saved[i], 1)
		if out[i].GetTokenCount() == n {
			continue
		}
		if out[i] == msgs[i] {
			out[i] = withParts(msgs[i], msgs[i].GetParts())
		}
		out[i].TokenCount = n
	}
}

// cutMessage returns m with the output c names cut.
func cutMessage(m *compactorv1.Message, c CutPart, tc tokenizer.Text) *compactorv1.Message {
	var parts []*compactorv1.Part
	if c.Part < 0 {
		parts = cutParts(m.GetParts(), c, tc)
	} else {
		parts = slices.Clone(m.GetParts())
		orig := parts[c.Part]
		r := orig.GetToolResult()
		parts[c.Part] = &compactorv1.Part{ProviderOptions: orig.GetProviderOptions(), Content: &compactorv1.Part_ToolResult{
			ToolResult: &compactorv1.ToolResultPart{ToolCallId: r.GetToolCallId(), ToolName: r.GetToolName(),
				Output: cutOutput(r.GetOutput(), c, tc)},
		}}
	}
	return withParts(m, parts)
}

func prunedMessage(m *compactorv1.Message, pp []PrunedPart) *compactorv1.Message {
	if len(pp) == 1 && pp[0].Part < 0 {
		return withParts(m, []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: pp[0].Marker()}}}})
	}
	parts := slices.Clone(m.GetParts())
	for _, p := range pp {
		orig := parts[p.Part]
		np := &compactorv1.Part{ProviderOptions: orig.GetProviderOptions()}
		if p.Input {
			c := orig.GetToolCall()
			np.Content = &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
				ToolCallId: c.GetToolCallId(), ToolName: c.GetToolName(), InputJson: p.Marker(),
				ProviderExecuted: c.GetProviderExecuted(),
			}}
		} else {
			r := orig.GetToolResult()
			np.Content = &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
				ToolCallId: r.GetToolCallId(), ToolName: p.Tool,
				Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: p.Marker()}},
			}}
		}
		parts[p.Part] = np
	}
	return withParts(m, parts)
}

// WithoutSource returns d with the markers and cut notes it writes naming no source
// (Options.Source), for a caller whose source could not be kept: the same plan, parts and
// cuts, with markers no larger than the plan counted.
func (d *Decision) WithoutSource() *Decision {
	out := *d
	out.Pruned = slices.Clone(d.Pruned)
	for i := range out.Pruned {
		out.Pruned[i].Source = ""
	}
	out.Cuts = slices.Clone(d.Cuts)
	for i := range out.Cuts {
		out.Cuts[i].Source = ""
	}
	return &out
}
