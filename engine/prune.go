package engine

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"strconv"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Pruning old tool outputs: which parts a plan replaces by a marker (tool outputs, the
// inputs of their calls, observations), the markers that replace them and what those cost.
// PruneAndCut (prunecut.go) carries it out.

// PrunedPart is one part a plan replaces by a marker: a tool result's output, or (with
// prune.clear_inputs) the input of the call it answers, or the whole text of an observation
// (a text-protocol agent's tool output sent as a user message; Part is then −1).
type PrunedPart struct {
	// Message and Part locate the part in the request conversation; Part is −1 for an
	// observation.
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
	// MarkerTokens is the size of Marker(), at most.
	MarkerTokens int64
	// Source is the hash of the source the marker of an output names as where the full
	// output is (Options.Source), "" for none.
	Source string
}

// Marker returns what replaces the removed output (its text) or input (its JSON): a short
// note naming the tool and the tokens removed; an output's, where the full output is when
// its source is kept (Source).
func (p PrunedPart) Marker() string {
	if p.Input {
		return inputMarker(p.Tool, p.Tokens)
	}
	var m string
	if p.Part < 0 {
		m = observationMarker(p.Tokens)
	} else {
		m = outputMarker(p.Tool, p.Tokens, p.Duplicate)
	}
	if p.Source != "" {
		m += outputRef(p.Source, p.Message)
	}
	return m
}

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

// observationMarker is the text that replaces a pruned observation.
func observationMarker(tokens int64) string {
	return "[pruned: output of the command above, " + strconv.FormatInt(tokens, 10) + " tokens removed]"
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

// Marker kinds, for markerTokens.
const (
	markerOutput = 1 + iota
	markerDuplicate
	markerInput
	markerObservation
)

// markerTokens counts the tokens of a marker (PrunedPart.Marker) of the given kind, memoized in
// ct by what it says (markers repeat from one call to the next) so that the warm path builds
// no strings.
func markerTokens(ct *tokenCounts, kind int, tool string, tokens int64, id tokenizer.ID, tc tokenizer.Text) int64 {
	build := func() string {
		switch kind {
		case markerInput:
			return inputMarker(tool, tokens)
		case markerObservation:
			return observationMarker(tokens)
		}
		return outputMarker(tool, tokens, kind == markerDuplicate)
	}
	if id == tokenizer.Approx {
		return tc.Count(build())
	}
	h := maphash.String(ct.seed, tool)
	h = bits.RotateLeft64(h*0x9E3779B97F4A7C15, 29) ^ uint64(tokens)
	// n without the high bit never equals a message key's.
	k := countKey{contentKey{h * 0xBF58476D1CE4E5B9, uint64(kind)}, id}
	if v, ok := ct.memo.get(k.shard(), k); ok {
		return v.total
	}
	n := tc.Count(build())
	ct.memo.put(k.shard(), k, msgCount{total: n}, countEntryBytes)
	return n
}

// Saved is the number of tokens pruning the part saves (Tokens − MarkerTokens, before any
// scaling to caller-supplied counts).
func (p PrunedPart) Saved() int64 { return p.Tokens - p.MarkerTokens }

// selectPruneParts picks the parts to prune among the tool results of active messages (into
// sc's memory: the result is valid until sc is reused): outputs of at least
// min_output_tokens outside the keep_recent newest results, and outputs superseded by a newer
// identical call (same tool, same input) whatever their size and age; never outputs of
// excluded tools, and only where the marker is smaller than what it replaces. With
// clear_inputs, the inputs of the calls whose outputs are pruned go too. The result is in
// message and part order. Unless withTool, the parts' Tool may be left empty (a plan that
// returns no pruned parts needs only their savings), which spares reading the messages when
// the memoized counts hold the marker's size.
func selectPruneParts(msgs []*compactorv1.Message, lay *layout, counts []msgCount, pol *policy, ct *tokenCounts, tc tokenizer.Text, sc *scratch, withTool bool) []PrunedPart {
	if pol.pruneOff || len(lay.results) == 0 {
		return nil
	}
	res := lay.results
	if sc == nil {
		sc = new(scratch)
	}
	dup := duplicates(msgs, res, counts, sc)
	out := sc.pruned[:0]
	if out == nil {
		out = make([]PrunedPart, 0, len(res))
	}
	sorted := true
	for k, r := range res {
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
		if mt := int64(parts[r.part].marker); !withTool && !isDup && mt != 0 && len(pol.excludeTools) == 0 && !pol.clearInputs {
			// The output marker of the result's own (non-empty) tool name, as counted with
			// the message: what the general case below would find.
			if mt += pol.refTokens; mt < payload {
				out = append(out, PrunedPart{Message: int(r.msg), Part: int(r.part), Tokens: payload, MarkerTokens: mt, Source: pol.source})
			}
			continue
		}
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
		kind := markerOutput
		if isDup {
			kind = markerDuplicate
		}
		mt := int64(parts[r.part].marker)
		if kind != markerOutput || tool != rp.GetToolName() || mt == 0 {
			mt = markerTokens(ct, kind, tool, payload, pol.tokenizer, tc)
		}
		if mt += pol.refTokens; mt >= payload {
			continue
		}
		out = append(out, PrunedPart{Message: int(r.msg), Part: int(r.part), Tool: tool, Duplicate: isDup,
			Tokens: payload, MarkerTokens: mt, Source: pol.source})
		if !pol.clearInputs || call == nil || lay.class[r.callMsg] != classActive {
			continue
		}
		cparts := counts[r.callMsg].parts
		if cparts == nil {
			continue
		}
		in := int64(cparts[r.callPart].payload)
		imt := markerTokens(ct, markerInput, tool, in, pol.tokenizer, tc)
		if imt < in {
			out = append(out, PrunedPart{Message: int(r.callMsg), Part: int(r.callPart), Tool: tool, Input: true,
				Duplicate: isDup, Tokens: in, MarkerTokens: imt})
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(out, func(a, b PrunedPart) int {
			if a.Message != b.Message {
				return a.Message - b.Message
			}
			return a.Part - b.Part
		})
	}
	sc.pruned = out
	return out
}

// duplicates marks the results whose call has the same tool name and input as the call of a
// newer result, using an open-addressing table in sc, into sc's memory. It returns nil when
// there are none.
func duplicates(msgs []*compactorv1.Message, res []toolLink, counts []msgCount, sc *scratch) []bool {
	if len(res) < 2 {
		return nil
	}
	size := 4
	for size < 2*len(res) {
		size *= 2
	}
	sc.dupTable = resize(sc.dupTable, size) // result index + 1; 0 = empty
	table := sc.dupTable
	callOf := func(k int) *compactorv1.ToolCallPart {
		r := res[k]
		return msgs[r.callMsg].GetParts()[r.callPart].GetToolCall()
	}
	var dup []bool
	for k := len(res) - 1; k >= 0; k-- { // newest first
		r := res[k]
		if r.callMsg < 0 || counts[r.callMsg].parts == nil {
			continue
		}
		h := counts[r.callMsg].parts[r.callPart].call
		for slot := int(h) & (size - 1); ; slot = (slot + 1) & (size - 1) {
			j := int(table[slot]) - 1
			if j < 0 {
				table[slot] = int32(k + 1)
				break
			}
			if counts[res[j].callMsg].parts[res[j].callPart].call != h {
				continue
			}
			a, b := callOf(k), callOf(j)
			if a.GetToolName() == b.GetToolName() && a.GetInputJson() == b.GetInputJson() {
				if dup == nil {
					sc.dup = resize(sc.dup, len(res))
					dup = sc.dup
				}
				dup[k] = true
				break
			}
		}
	}
	return dup
}

// selectObservations appends to out the observations of the active region that pruning
// replaces by a marker, in message order: text-protocol agents' tool outputs sent as user
// messages (kinds[i] is UserObservation), outside the keep_recent newest, of at least
// min_output_tokens, where the marker is smaller than what it replaces.
func selectObservations(out []PrunedPart, msgs []*compactorv1.Message, counts []msgCount, kinds []UserKind, pol *policy, ct *tokenCounts, tc tokenizer.Text) []PrunedPart {
	n := 0
	for _, k := range kinds {
		if k == UserObservation {
			n++
		}
	}
	if n <= pol.keepResults {
		return out
	}
	seen := 0
	for i, k := range kinds {
		if k != UserObservation {
			continue
		}
		if seen++; seen > n-pol.keepResults {
			break
		}
		total := counts[i].total
		if total == 0 {
			total = tc.Message(msgs[i])
		}
		payload := total - MessageOverheadTokens
		if payload < pol.minOutput {
			continue
		}
		mt := markerTokens(ct, markerObservation, "", payload, pol.tokenizer, tc) + pol.refTokens
		if mt >= payload {
			continue
		}
		out = append(out, PrunedPart{Message: i, Part: -1, Tokens: payload, MarkerTokens: mt, Source: pol.source})
	}
	slices.SortStableFunc(out, func(a, b PrunedPart) int { return a.Message - b.Message })
	return out
}

// excluded reports whether outputs of the named tool are never pruned.
func (r *policy) excluded(tool string) bool {
	for _, x := range r.excludeTools {
		if x == tool {
			return true
		}
	}
	return false
}
