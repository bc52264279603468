package engine

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Cutting oversized tool outputs: when a conversation cannot fit under its target even with
// the smallest summary room, the tool outputs it keeps (the protected tail included) are cut
// to their head and tail, with a note saying how much was cut and that the rest is gone, as
// coding agents do with outputs too large for their window. Tool outputs are tool results
// with a text or JSON output and the observations text-protocol agents send as user messages
// (ClassifyUsers' UserObservation); never a request. cutOutputs decides what a shape cuts (decide.go calls
// it); ApplyPrune carries the cuts out with cutOutput.

// MinCutOutputTokens is the least a cut tool output keeps of its head and tail.
const MinCutOutputTokens = 100

// CutPart is one tool output a plan cuts: Part is the tool result's part, or −1 for an
// observation message, whose text parts become one cut text.
type CutPart struct {
	Message, Part int
	// Keep is the tokens the cut output keeps of its head and tail (cutText's keep); Tokens
	// is its size before the cut.
	Keep, Tokens int64
	// Saved is the tokens cutting removes, note included, at least (see cutText's bound).
	Saved int64
}

// cutOutputs cuts the tool outputs of the active messages from message from up to message to
// that are not pruned (nor requests) until sh fits under goal, or as far as cutting goes. It
// replaces the cuts sh had.
func (dc *deciding) cutOutputs(sh *shape, from, to int, goal int64) {
	sh.tail, sh.after = sh.tail+sh.cut, sh.after+sh.cut // without the cuts sh had
	sh.cuts, sh.cut = nil, 0
	need := sh.after - goal
	if need <= 0 {
		return
	}
	var cands []cutCandidate
	pruned := dc.prunedOutputs()
	for i := from; i < to; i++ {
		if dc.lay.class[i] != classActive {
			continue
		}
		m := dc.msgs[i]
		if dc.observation(i) {
			if pruned[[2]int{i, -1}] {
				continue
			}
			if n := dc.counted(i) - MessageOverheadTokens; n > MinCutOutputTokens+cutNoteAllowance {
				cands = append(cands, cutCandidate{msg: i, part: -1, tokens: n})
			}
			continue
		}
		for j, p := range m.GetParts() {
			r := p.GetToolResult()
			if r == nil || pruned[[2]int{i, j}] {
				continue
			}
			if _, ok := outputText(r.GetOutput()); !ok {
				continue
			}
			n := dc.outputTokens(i, j, r)
			if n > MinCutOutputTokens+cutNoteAllowance {
				cands = append(cands, cutCandidate{msg: i, part: j, tokens: n})
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	sh.cuts = chooseCuts(cands, need, dc.tc, func(c cutCandidate) string { return dc.cutSource(c.msg, c.part) })
	var saved int64
	for _, c := range sh.cuts {
		saved += scaleSaving(c.Saved, dc.sz.tokens[c.Message], dc.counted(c.Message))
	}
	sh.cut, sh.tail, sh.after = saved, sh.tail-saved, sh.after-saved
}

// prunedOutputs returns the set of tool outputs (message, part; part −1 for an observation)
// that pruning replaces in messages where it saves tokens. It depends only on dc.pr, fixed
// for the plan, so it is built once, on the first call: cutOutputs runs once per shape the
// plan tries.
func (dc *deciding) prunedOutputs() map[[2]int]bool {
	if dc.prunedSet == nil {
		dc.prunedSet = map[[2]int]bool{}
		for _, pp := range dc.pr.parts {
			if !pp.Input && dc.pr.saved[pp.Message] > 0 {
				dc.prunedSet[[2]int{pp.Message, pp.Part}] = true
			}
		}
	}
	return dc.prunedSet
}

// cutCandidate is one tool output that cutting may shorten: a tool result's part, or a whole
// observation message (part −1).
type cutCandidate struct {
	msg, part int
	tokens    int64 // its tokens now (the output's, or the observation's text)
}

// outputTokens is the tokens of the output of the tool result at part j of message i.
func (dc *deciding) outputTokens(i, j int, r *compactorv1.ToolResultPart) int64 {
	if parts := dc.counts[i].parts; parts != nil {
		return int64(parts[j].payload)
	}
	text, _ := outputText(r.GetOutput())
	return dc.tc.Count(text)
}

// counted is the tokenizer's count of message i (the caller's token_count may differ).
func (dc *deciding) counted(i int) int64 {
	if n := dc.counts[i].total; n > 0 {
		return n
	}
	return dc.tc.Message(dc.msgs[i])
}

// cutSource is the text a cut of message i, part j (−1: the observation) shortens.
func (dc *deciding) cutSource(i, j int) string {
	m := dc.msgs[i]
	if j < 0 {
		text, _ := UserText(m)
		return text
	}
	text, _ := outputText(m.GetParts()[j].GetToolResult().GetOutput())
	return text
}

// observation reports whether message i is a tool's output posing as a user turn
// (UserObservation).
func (dc *deciding) observation(i int) bool { return dc.kinds[i] == UserObservation }

// outputText returns the text of a cuttable tool output and whether it is one: text, JSON
// and error outputs.
func outputText(o *compactorv1.ToolOutput) (string, bool) {
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return v.Text, true
	case *compactorv1.ToolOutput_Json:
		return v.Json, true
	case *compactorv1.ToolOutput_ErrorText:
		return v.ErrorText, true
	case *compactorv1.ToolOutput_ErrorJson:
		return v.ErrorJson, true
	}
	return "", false
}

// chooseCuts returns the cuts that remove at least need tokens from cands, cutting the
// largest outputs first and all of them to the same size (never below MinCutOutputTokens),
// with the exact tokens each saves, or as much as cutting can remove when that is less.
// text returns a candidate's text.
func chooseCuts(cands []cutCandidate, need int64, tc tokenizer.Text, text func(cutCandidate) string) []CutPart {
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].tokens > cands[j].tokens })
	// The largest keep whose estimated saving reaches need.
	saving := func(keep int64) int64 {
		var s int64
		for _, c := range cands {
			if c.tokens > keep+cutNoteAllowance {
				s += c.tokens - keep - cutNoteAllowance
			}
		}
		return s
	}
	lo, hi := int64(MinCutOutputTokens), int64(MinCutOutputTokens)
	for _, c := range cands {
		hi = max(hi, c.tokens)
	}
	if saving(lo) < need {
		hi = lo
	}
	for lo < hi { // the largest keep with saving(keep) ≥ need
		mid := lo + (hi-lo+1)/2
		if saving(mid) >= need {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	var out []CutPart
	for keep := lo; ; {
		out = out[:0]
		var saved int64
		for _, c := range cands {
			if c.tokens <= keep+cutNoteAllowance {
				continue
			}
			_, n := cutText(text(c), c.tokens, keep, tc)
			if n >= c.tokens {
				continue
			}
			out = append(out, CutPart{Message: c.msg, Part: c.part, Keep: keep, Tokens: c.tokens, Saved: c.tokens - n})
			saved += c.tokens - n
		}
		if saved >= need || keep <= MinCutOutputTokens {
			break
		}
		keep = max(MinCutOutputTokens, keep-(need-saved)/int64(max(1, len(out)))-1)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Message != out[j].Message {
			return out[i].Message < out[j].Message
		}
		return out[i].Part < out[j].Part
	})
	return out
}

// cutNoteAllowance bounds the tokens of the note a cut output carries (cutNote), for the
// estimates that choose how far to cut; the final counts are exact.
const cutNoteAllowance = 40

// cutNote is the note between the head and the tail of a cut output.
func cutNote(cut int64) string {
	return "\n[… " + strconv.FormatInt(cut, 10) + " tokens cut from the middle of this output by compaction; the full output is gone …]\n"
}

// cutJoinMargin bounds the tokens joining the head, the note and the tail can add to their
// separate counts.
const cutJoinMargin = 4

// cutText returns text, of total tokens, cut to about keep tokens: its head (two thirds) and
// tail (one third), at line boundaries where that costs little, around cutNote. Text of at
// most keep tokens is returned as it is. The same input always gives the same output. It also
// returns a bound on the tokens of what it returns (the counts of the head, the note and the
// tail, and cutJoinMargin), so that a plan need not count the cut text again.
func cutText(text string, total, keep int64, tc tokenizer.Text) (string, int64) {
	if total <= keep {
		return text, total
	}
	// Bytes per token of this text, to guess the byte lengths; then shrink in proportion to
	// the overshoot until it fits (one or two counts).
	n := int(float64(len(text)) * float64(keep) / float64(total))
	for n > 0 {
		head, tail := splitKeep(text, n)
		kept := tc.Count(head) + tc.Count(tail)
		if kept <= keep {
			note := cutNote(total - kept)
			return head + note + tail, kept + tc.Count(note) + cutJoinMargin
		}
		n = min(n*9/10, int(float64(n)*float64(keep)/float64(kept)*0.98))
	}
	note := cutNote(total)
	return note, tc.Count(note)
}

// splitKeep returns the head (two thirds of n bytes) and tail (the rest) of s, at rune
// boundaries, moved to a line boundary when one is near.
func splitKeep(s string, n int) (head, tail string) {
	h := n * 2 / 3
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	head = s[:h]
	if i := strings.LastIndexByte(head, '\n'); i > len(head)*3/4 {
		head = head[:i]
	}
	t := len(s) - (n - h)
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	tail = s[t:]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/4 {
		tail = tail[i+1:]
	}
	return head, tail
}

// cutOutput returns o cut to keep tokens: a text output, or an error text for an error (cut
// JSON is no longer JSON).
func cutOutput(o *compactorv1.ToolOutput, c CutPart, tc tokenizer.Text) *compactorv1.ToolOutput {
	text, _ := outputText(o)
	cut, _ := cutText(text, c.Tokens, c.Keep, tc)
	switch o.GetValue().(type) {
	case *compactorv1.ToolOutput_ErrorText, *compactorv1.ToolOutput_ErrorJson:
		return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: cut}}
	}
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: cut}}
}
