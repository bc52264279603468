package engine

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"strconv"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// PrunedPart is one part a plan replaces by a marker: a tool result's output, or (with
// prune.clear_inputs) the input of the call it answers.
type PrunedPart struct {
	// Message and Part locate the part in the request conversation.
	Message, Part int
	// Tool is the tool's name (from the result, or from its call).
	Tool string
	// Input is set for a tool call whose input_json is cleared; otherwise the part is a tool
	// result whose output is replaced.
	Input bool
	// Duplicate is set when the output is superseded by a newer call of the same tool with
	// the same input.
	Duplicate bool
	// Tokens is the estimated size of the output (or input) removed.
	Tokens int64
	// Marker replaces what was removed: the output text, or the input JSON.
	Marker string
	// MarkerTokens is the size of Marker.
	MarkerTokens int64
}

// Saved is the number of tokens pruning the part saves (Tokens − MarkerTokens, before any
// scaling to caller-supplied counts).
func (p PrunedPart) Saved() int64 { return p.Tokens - p.MarkerTokens }

// outputMarker is the text that replaces a pruned tool output.
func outputMarker(tool string, tokens int64, dup bool) string {
	b := make([]byte, 0, 64+len(tool))
	b = append(b, "[pruned: output of tool "...)
	b = append(b, tool...)
	if dup {
		b = append(b, ", superseded by a later identical call"...)
	}
	b = append(b, ", "...)
	b = strconv.AppendInt(b, tokens, 10)
	b = append(b, " tokens removed]"...)
	return string(b)
}

// inputMarker is the JSON object that replaces a cleared tool input.
func inputMarker(tool string, tokens int64) string {
	b := make([]byte, 0, 64+len(tool))
	b = append(b, `{"pruned":"input of tool `...)
	b = appendJSONStringBody(b, tool)
	b = append(b, ", "...)
	b = strconv.AppendInt(b, tokens, 10)
	b = append(b, ` tokens removed"}`...)
	return string(b)
}

// appendJSONStringBody appends s escaped for the inside of a JSON string.
func appendJSONStringBody(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

// markerTokens counts a marker's tokens, memoized: markers repeat from one call to the next.
func (c *Counter) markerTokens(s string, id tokenizerID, tc textCounter) int64 {
	if id == tokApprox {
		return tc.text(s)
	}
	k := countKey{contentKey{maphash.String(c.seed, s), uint64(len(s)) | 1<<63}, id}
	if v, ok := c.counts.get(k.shard(), k); ok {
		return v.total
	}
	n := tc.text(s)
	c.counts.put(k.shard(), k, msgCount{total: n}, countEntryBytes)
	return n
}

// selectPrune picks the parts to prune among the tool results of active messages: outputs of
// at least min_output_tokens outside the keep_recent newest results, and outputs superseded by
// a newer identical call (same tool, same input) whatever their size and age; never outputs of
// excluded tools, and only where the marker is smaller than what it replaces. With
// clear_inputs, the inputs of the calls whose outputs are pruned go too. The result is in
// message and part order.
func selectPrune(msgs []*compactorv1.Message, lay *layout, counts []msgCount, pol *policy, c *Counter, tc textCounter) []PrunedPart {
	if pol.pruneOff || len(lay.results) == 0 {
		return nil
	}
	res := lay.results
	dup := duplicates(msgs, res, c.seed)
	var out []PrunedPart
	for k, r := range res {
		rp := msgs[r.msg].GetParts()[r.part].GetToolResult()
		var call *compactorv1.ToolCallPart
		if r.callMsg >= 0 {
			call = msgs[r.callMsg].GetParts()[r.callPart].GetToolCall()
		}
		tool := rp.GetToolName()
		if tool == "" {
			tool = call.GetToolName()
		}
		if pol.excluded(tool) {
			continue
		}
		parts := counts[r.msg].parts
		if parts == nil {
			continue
		}
		payload := int64(parts[r.part].payload)
		isDup := dup != nil && dup[k]
		protected := k >= len(res)-pol.keepResults
		if payload == 0 || !isDup && (protected || payload < pol.minOutput) {
			continue
		}
		marker := outputMarker(tool, payload, isDup)
		mt := c.markerTokens(marker, pol.tokenizer, tc)
		if mt >= payload {
			continue
		}
		out = append(out, PrunedPart{Message: int(r.msg), Part: int(r.part), Tool: tool, Duplicate: isDup,
			Tokens: payload, Marker: marker, MarkerTokens: mt})
		if !pol.clearInputs || call == nil || lay.class[r.callMsg] != classActive {
			continue
		}
		cparts := counts[r.callMsg].parts
		if cparts == nil {
			continue
		}
		in := int64(cparts[r.callPart].payload)
		im := inputMarker(tool, in)
		imt := c.markerTokens(im, pol.tokenizer, tc)
		if imt < in {
			out = append(out, PrunedPart{Message: int(r.callMsg), Part: int(r.callPart), Tool: tool, Input: true,
				Duplicate: isDup, Tokens: in, Marker: im, MarkerTokens: imt})
		}
	}
	slices.SortFunc(out, func(a, b PrunedPart) int {
		if a.Message != b.Message {
			return a.Message - b.Message
		}
		return a.Part - b.Part
	})
	return out
}

// duplicates marks the results whose call has the same tool name and input as the call of a
// newer result. It returns nil when there are none.
func duplicates(msgs []*compactorv1.Message, res []toolLink, seed maphash.Seed) []bool {
	if len(res) < 2 {
		return nil
	}
	type seen struct {
		h   uint64
		idx int32
	}
	calls := make([]*compactorv1.ToolCallPart, len(res))
	hs := make([]seen, 0, len(res))
	for k, r := range res {
		if r.callMsg < 0 {
			continue
		}
		call := msgs[r.callMsg].GetParts()[r.callPart].GetToolCall()
		calls[k] = call
		h := maphash.String(seed, call.GetToolName())
		h = bits.RotateLeft64(h*0x9E3779B97F4A7C15, 31) ^ maphash.String(seed, call.GetInputJson())
		hs = append(hs, seen{h, int32(k)})
	}
	// Sort by hash, newest first within equal hashes; every entry after the first of a run
	// of identical calls is an older duplicate.
	slices.SortFunc(hs, func(a, b seen) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return int(b.idx - a.idx)
	})
	var dup []bool
	for i := 1; i < len(hs); i++ {
		if hs[i].h != hs[i-1].h {
			continue
		}
		// Find the newest identical call in this run (hash collisions are compared exactly).
		for j := i - 1; j >= 0 && hs[j].h == hs[i].h; j-- {
			a, b := calls[hs[i].idx], calls[hs[j].idx]
			if a.GetToolName() == b.GetToolName() && a.GetInputJson() == b.GetInputJson() {
				if dup == nil {
					dup = make([]bool, len(res))
				}
				dup[hs[i].idx] = true
				break
			}
		}
	}
	return dup
}

// ApplyPrune returns the conversation with the parts d prunes replaced by their markers, in
// the messages whose disposition is DISPOSITION_PRUNE: a pruned tool result keeps its call id
// and tool name and gets the marker as its text output; a cleared tool call keeps its id and
// name and gets the marker as its input JSON. Pruned messages are new messages with
// token_count cleared; every other message is returned as is. msgs must be the conversation
// d was planned for; it is never modified (the result shares unchanged messages and parts
// with it).
func ApplyPrune(msgs []*compactorv1.Message, d *Decision) []*compactorv1.Message {
	out := slices.Clone(msgs)
	disp := d.Response.GetDispositions()
	for i := 0; i < len(d.Pruned); {
		j := i
		for j < len(d.Pruned) && d.Pruned[j].Message == d.Pruned[i].Message {
			j++
		}
		mi := d.Pruned[i].Message
		if mi < len(disp) && disp[mi] == compactorv1.Disposition_DISPOSITION_PRUNE {
			out[mi] = prunedMessage(msgs[mi], d.Pruned[i:j])
		}
		i = j
	}
	return out
}

func prunedMessage(m *compactorv1.Message, pp []PrunedPart) *compactorv1.Message {
	parts := slices.Clone(m.GetParts())
	for _, p := range pp {
		orig := parts[p.Part]
		np := &compactorv1.Part{ProviderOptions: orig.GetProviderOptions()}
		if p.Input {
			c := orig.GetToolCall()
			np.Content = &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
				ToolCallId: c.GetToolCallId(), ToolName: c.GetToolName(), InputJson: p.Marker,
				ProviderExecuted: c.GetProviderExecuted(),
			}}
		} else {
			r := orig.GetToolResult()
			np.Content = &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
				ToolCallId: r.GetToolCallId(), ToolName: p.Tool,
				Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: p.Marker}},
			}}
		}
		parts[p.Part] = np
	}
	nm := &compactorv1.Message{
		Id:              m.GetId(),
		Role:            m.GetRole(),
		Parts:           parts,
		Kind:            m.GetKind(),
		Lifecycle:       m.GetLifecycle(),
		Pinned:          m.GetPinned(),
		ProviderOptions: m.GetProviderOptions(),
	}
	if u := m.ProtoReflect().GetUnknown(); len(u) > 0 {
		nm.ProtoReflect().SetUnknown(u)
	}
	return nm
}
