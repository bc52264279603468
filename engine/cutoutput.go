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
// coding agents do with outputs too large for their window. Tool outputs are tool results of
// every shape but a denial (text, JSON, errors, and rich content, whose text parts are cut
// and whose images, files and provider blocks are kept as they are) and the observations
// text-protocol agents send as user messages (ClassifyUsers' UserObservation); never a
// request. cutOutputs decides what a shape cuts (decide.go calls it); PruneAndCut carries the
// cuts out with cutOutput and cutParts.

// MinCutOutputTokens is the least a cut tool output keeps of its head and tail.
const MinCutOutputTokens = 100

// CutPart is one tool output a plan cuts: Part is the tool result's part, or −1 for an
// observation message. What is cut is the output's text (cutTexts): a text, JSON or error
// output, or the text parts of a content output or an observation, taken as one text; every
// other part stays.
type CutPart struct {
	Message, Part int
	// Keep is the tokens the cut output keeps of its head and tail (cutTexts' keep); Tokens
	// is the size of its text before the cut (its other parts not included).
	Keep, Tokens int64
	// Saved is the tokens cutting removes, note included, at least (see cutTexts' bound).
	Saved int64
	// Source is the hash of the source the note names as where the full output is
	// (Options.Source), "" for none: the note then says the full output is gone.
	Source string
}

// ref is where c's note says the full output is ("" when it is gone).
func (c CutPart) ref() string {
	if c.Source == "" {
		return ""
	}
	return OutputSource(c.Source, c.Message)
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
		// Pruning to the target cuts, in the message that crosses it, only what it would
		// otherwise prune (not the keep_recent newest results, nor excluded tools' outputs).
		crossing := sh.partial && i == sh.spare
		// Not a candidate: an output the shape prunes, or one pruning leaves where it crosses.
		skip := func(p bool) bool { return p && dc.prunedSaved(sh, i) > 0 || crossing && !p }
		if dc.observation(i) {
			if skip(pruned[[2]int{i, -1}]) {
				continue
			}
			if c, ok := dc.partsCandidate(i, -1, m.GetParts(), dc.counted(i)-MessageOverheadTokens); ok {
				cands = append(cands, c)
			}
			continue
		}
		for j, p := range m.GetParts() {
			r := p.GetToolResult()
			if r == nil || skip(pruned[[2]int{i, j}]) {
				continue
			}
			if c, ok := dc.outputCandidate(i, j, r.GetOutput()); ok {
				cands = append(cands, c)
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	for k := range cands {
		cands[k].counts = dc.cutCounts(cands[k])
	}
	sh.cuts = chooseCuts(cands, need, dc.pol.source, dc.noteAllowance(), dc.tc)
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

// cutCounts returns the counts of c's texts, made on the first call for its output and kept
// for the plan: each shape the plan weighs cuts the same outputs to nearly the same size.
func (dc *deciding) cutCounts(c cutCandidate) []*textCounts {
	key := [2]int{c.msg, c.part}
	if cs, ok := dc.textCounts[key]; ok {
		return cs
	}
	if dc.textCounts == nil {
		dc.textCounts = map[[2]int][]*textCounts{}
	}
	cs := countsOf(c.texts, dc.tc)
	dc.textCounts[key] = cs
	return cs
}

// cutCandidate is one tool output that cutting may shorten: a tool result's part, or a whole
// observation message (part −1).
type cutCandidate struct {
	msg, part int
	tokens    int64         // the tokens of its text now (what cutting can shorten)
	texts     []string      // its text: the output's, or its text parts' (textsOf)
	counts    []*textCounts // the counts of texts, kept for the plan (see cutCounts)
}

// outputCandidate returns the output o of the tool result at part j of message i as a cut
// candidate, and whether it is one: a text, JSON or error output, or a content output (its
// text parts), with more text than a cut keeps.
func (dc *deciding) outputCandidate(i, j int, o *compactorv1.ToolOutput) (cutCandidate, bool) {
	payload := int64(-1) // unknown: the message was not counted part by part
	if parts := dc.counts[i].parts; parts != nil {
		payload = int64(parts[j].payload)
	}
	if c := o.GetContent(); c != nil {
		return dc.partsCandidate(i, j, c.GetParts(), payload)
	}
	text, ok := outputText(o)
	if !ok {
		return cutCandidate{}, false
	}
	if payload < 0 {
		payload = dc.tc.Count(text)
	}
	if payload <= MinCutOutputTokens+dc.noteAllowance() {
		return cutCandidate{}, false
	}
	return cutCandidate{msg: i, part: j, tokens: payload, texts: []string{text}}, true
}

// partsCandidate returns parts (a content output's, or an observation's; total is their
// tokens, −1 when unknown) as a cut candidate of their text parts, and whether they have more
// text than a cut keeps. Their other parts are kept: their tokens are not cutting's to save.
func (dc *deciding) partsCandidate(i, j int, parts []*compactorv1.Part, total int64) (cutCandidate, bool) {
	if total >= 0 && total <= MinCutOutputTokens+dc.noteAllowance() {
		return cutCandidate{}, false
	}
	texts := textsOf(parts)
	var n int64
	if total >= 0 {
		n = total
		for _, p := range parts {
			if p.GetText() == nil {
				t, _ := dc.tc.Part(p)
				n -= t
			}
		}
	} else {
		for _, t := range texts {
			n += dc.tc.Count(t)
		}
	}
	if len(texts) == 0 || n <= MinCutOutputTokens+dc.noteAllowance() {
		return cutCandidate{}, false
	}
	return cutCandidate{msg: i, part: j, tokens: n, texts: texts}, true
}

// textsOf returns the texts of the text parts among parts, in order.
func textsOf(parts []*compactorv1.Part) []string {
	var texts []string
	for _, p := range parts {
		if t := p.GetText(); t != nil {
			texts = append(texts, t.GetText())
		}
	}
	return texts
}

// counted is the tokenizer's count of message i (the caller's token_count may differ).
func (dc *deciding) counted(i int) int64 {
	if n := dc.counts[i].total; n > 0 {
		return n
	}
	return dc.tc.Message(dc.msgs[i])
}

// observation reports whether message i is a tool's output posing as a user turn
// (UserObservation).
func (dc *deciding) observation(i int) bool { return dc.kinds[i] == UserObservation }

// outputText returns the text of a tool output cut as one text and whether it is one: text,
// JSON and error outputs. (A content output's text parts are cut as textsOf gives them.)
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
// with the exact tokens each saves, or as much as cutting can remove when that is less. Their
// notes name source as where the full output is ("": gone); allowance bounds a note's tokens
// for the estimates.
func chooseCuts(cands []cutCandidate, need int64, source string, allowance int64, tc tokenizer.Text) []CutPart {
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].tokens > cands[j].tokens })
	// The largest keep whose estimated saving reaches need.
	saving := func(keep int64) int64 {
		var s int64
		for _, c := range cands {
			if c.tokens > keep+allowance {
				s += c.tokens - keep - allowance
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
	refs := make([]string, len(cands)) // where each full output is: the same on every pass
	for k, c := range cands {
		refs[k] = CutPart{Message: c.msg, Source: source}.ref()
	}
	var out []CutPart
	for keep := lo; ; {
		out = out[:0]
		var saved int64
		for k, c := range cands {
			if c.tokens <= keep+allowance {
				continue
			}
			cp := CutPart{Message: c.msg, Part: c.part, Keep: keep, Tokens: c.tokens, Source: source}
			n := cutSpan(c.texts, c.counts, c.tokens, keep, tc).bound(c.tokens, refs[k], tc)
			if n >= c.tokens {
				continue
			}
			cp.Saved = c.tokens - n
			out = append(out, cp)
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

// cutNoteAllowance bounds the tokens of the note a cut output carries (cutNote) when it
// names no source, for the estimates that choose how far to cut; the final counts are exact.
const cutNoteAllowance = 40

// noteAllowance bounds the tokens of a cut note of this plan: cutNoteAllowance, and the
// source it names when it is kept.
func (dc *deciding) noteAllowance() int64 { return cutNoteAllowance + dc.pol.refTokens }

// cutNote is the note between the head and the tail of a cut output, saying where the full
// output is (ref, OutputSource) or that it is gone (ref "").
func cutNote(cut int64, ref string) string {
	if ref == "" {
		ref = "the full output is gone"
	}
	return "\n[… " + strconv.FormatInt(cut, 10) + " tokens cut from the middle of this output by compaction; " + ref + " …]\n"
}

// cutJoinMargin bounds the tokens joining the head, the note and the tail can add to their
// separate counts.
const cutJoinMargin = 4

// cutText is cutTexts of one text.
func cutText(text string, total, keep int64, ref string, tc tokenizer.Text) (string, int64) {
	out, n := cutTexts([]string{text}, total, keep, ref, tc)
	return out[0], n
}

// cutTexts returns texts (the text parts of one output, of total tokens), taken as one text
// joined by newlines, cut to about keep tokens: its head (two thirds) and tail (one third),
// at line boundaries where that costs little, around cutNote. Each text keeps what falls in
// the head or the tail, the one where the head ends gets the note, and a text wholly in the
// middle becomes "". Texts of at most keep tokens are returned as they are. The same input
// always gives the same output. It also returns a bound on the tokens of what it returns (the
// counts of the pieces kept and of the note, and cutJoinMargin), so that a plan need not count
// the cut texts again. The note says where the full output is (ref; see cutNote).
func cutTexts(texts []string, total, keep int64, ref string, tc tokenizer.Text) ([]string, int64) {
	if total <= keep || len(texts) == 0 {
		return texts, total
	}
	cut := cutSpan(texts, countsOf(texts, tc), total, keep, tc)
	out := make([]string, len(texts))
	if !cut.ok {
		out[0] = cutNote(total, ref)
		return out, cut.bound(total, ref, tc)
	}
	note := cutNote(total-cut.kept, ref)
	for k, s := 0, 0; k < len(texts); k++ {
		hk, tk := min(max(cut.h-s, 0), len(texts[k])), min(max(cut.t-s, 0), len(texts[k]))
		switch {
		case k == cut.noted:
			out[k] = texts[k][:hk] + note + texts[k][tk:]
		case hk == tk: // wholly in the head or the tail
			out[k] = texts[k]
		case tk == len(texts[k]): // ends in the middle, or lies wholly in it ("")
			out[k] = texts[k][:hk]
		default: // begins in the middle
			out[k] = texts[k][tk:]
		}
		s += len(texts[k]) + 1
	}
	return out, cut.bound(total, ref, tc)
}

// span is where cutTexts cuts texts taken as one: it keeps the bytes before h and from t on
// (kept tokens), with the note in text noted; ok is false when nothing is kept but the note.
type span struct {
	h, t, noted int
	kept        int64
	ok          bool
}

// bound is the bound cutTexts returns for a cut of texts of total tokens at sp, its note
// naming ref.
func (sp span) bound(total int64, ref string, tc tokenizer.Text) int64 {
	if !sp.ok {
		return tc.Count(cutNote(total, ref))
	}
	return sp.kept + tc.Count(cutNote(total-sp.kept, ref)) + cutJoinMargin
}

// cutSpan returns where cutTexts cuts texts (total > keep tokens; counts their textCounts)
// to about keep tokens.
func cutSpan(texts []string, counts []*textCounts, total, keep int64, tc tokenizer.Text) span {
	joined := strings.Join(texts, "\n")
	// Bytes per token of this text, to guess the byte lengths; then shrink in proportion to
	// the overshoot until it fits (one or two counts).
	n := int(float64(len(joined)) * float64(keep) / float64(total))
	for n > 0 {
		head, tail := splitKeep(joined, n)
		sp := span{h: len(head), t: len(joined) - len(tail), noted: -1, ok: true}
		for k, s := 0, 0; k < len(texts); k++ {
			hk, tk := min(max(sp.h-s, 0), len(texts[k])), min(max(sp.t-s, 0), len(texts[k]))
			sp.kept += counts[k].prefix(hk, tc) + counts[k].suffix(tk, tc)
			if sp.noted < 0 && sp.h <= s+len(texts[k]) {
				sp.noted = k
			}
			s += len(texts[k]) + 1
		}
		if sp.kept <= keep {
			return sp
		}
		n = min(n*9/10, int(float64(n)*float64(keep)/float64(sp.kept)*0.98))
	}
	return span{}
}

// countsOf returns new textCounts of texts.
func countsOf(texts []string, tc tokenizer.Text) []*textCounts {
	out := make([]*textCounts, len(texts))
	for k, s := range texts {
		out[k] = newTextCounts(s, tc)
	}
	return out
}

// splitKeep returns the head (two thirds of n bytes) and tail (the rest) of s, at rune
// boundaries, moved to a line boundary when one is near: the one head-and-tail cutter, of
// tool outputs (cutTexts) and of text a summary quotes (Truncate).
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

// cutOutput returns o cut as c says: a content output keeps its shape (cutParts); any other
// becomes a text output, or an error text for an error (cut JSON is no longer JSON).
func cutOutput(o *compactorv1.ToolOutput, c CutPart, tc tokenizer.Text) *compactorv1.ToolOutput {
	if ct := o.GetContent(); ct != nil {
		return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: cutParts(ct.GetParts(), c, tc)}}}
	}
	text, _ := outputText(o)
	cut, _ := cutText(text, c.Tokens, c.Keep, c.ref(), tc)
	switch o.GetValue().(type) {
	case *compactorv1.ToolOutput_ErrorText, *compactorv1.ToolOutput_ErrorJson:
		return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: cut}}
	}
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: cut}}
}

// cutParts returns parts (a content output's, or an observation's) with their text parts cut
// as c says (cutTexts): each keeps its provider options, and one wholly in the cut middle
// goes. Every other part (images, files, provider blocks) is kept, in its place.
func cutParts(parts []*compactorv1.Part, c CutPart, tc tokenizer.Text) []*compactorv1.Part {
	texts := textsOf(parts)
	cut, _ := cutTexts(texts, c.Tokens, c.Keep, c.ref(), tc)
	out := make([]*compactorv1.Part, 0, len(parts))
	k := 0
	for _, p := range parts {
		if p.GetText() == nil {
			out = append(out, p)
			continue
		}
		switch s := cut[k]; {
		case s == texts[k]:
			out = append(out, p)
		case s != "":
			out = append(out, &compactorv1.Part{ProviderOptions: p.GetProviderOptions(),
				Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}})
		}
		k++
	}
	return out
}
