package engine

import (
	"slices"
	"strconv"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Writing the response, the last step of a plan: the shape a decision chose (decide.go)
// becomes the PlanResponse (the action, the terms of tokens_after, each message's
// disposition, the reason quoting the numbers) and what carrying it out needs
// (Decision.Pruned and Cuts); a shape that fits nowhere becomes the *IrreducibleError saying
// by how much. Nothing here counts or decides.

// write writes the shape sh into d (d.Response a new response), or returns the
// *IrreducibleError of an irreducible shape. Unless withPruned, d.Pruned and d.Cuts are left
// nil.
func (dc *deciding) write(d *Decision, sh shape, withPruned bool) error {
	if sh.irreducible {
		return dc.irreducible(sh)
	}
	sz, pol := dc.sz, &dc.pol
	resp := &compactorv1.PlanResponse{
		Dispositions:    make([]compactorv1.Disposition, len(dc.msgs)),
		MessageTokens:   sz.tokens,
		CutIndex:        -1,
		SummaryIndex:    int32(dc.lay.summary),
		UsableTokens:    pol.usable,
		TriggerAtTokens: pol.trigger,
		TargetTokens:    pol.target,
		TokensBefore:    sz.before,
	}
	*d = Decision{Response: resp}
	resp.Action = sh.action
	if sh.action != compactorv1.Action_ACTION_SUMMARIZE {
		sh.head = sz.head // only a summary splits messages
	}
	resp.HeadTokens = sh.head
	cut := -1
	var prunedTail int64 // pruning's saving in what stays
	switch sh.action {
	case compactorv1.Action_ACTION_SUMMARIZE:
		cut = int(dc.lay.turnStarts[sh.k])
		resp.CutIndex = int32(cut)
		resp.SummaryTokens, resp.KeptRequestTokens = sh.room, sh.reqs
		for i := cut; i < len(dc.lay.class); i++ {
			if dc.lay.class[i] == classActive {
				prunedTail += dc.prunedSaved(&sh, i)
			}
		}
		d.TailTurns = len(dc.lay.turnStarts) - sh.k
		d.MarkerTokens = pol.markerTokens
		for i := cut; i < len(dc.msgs) && dc.kinds[i] == UserRequest; i++ {
			d.LeadingRequests++
		}
	default:
		resp.SummaryTokens = sz.summary
		prunedTail = dc.prunedTotal(&sh)
	}
	resp.TailTokens = sh.after - sh.head - resp.SummaryTokens - resp.KeptRequestTokens
	resp.TokensAfter = sh.after
	resp.CutTokens = sh.cut
	resp.PrunedTokens = prunedTail + sh.cut
	dc.fill(resp.Dispositions, cut, sh)
	dc.instructions(resp, sh, cut)
	resp.CachedPrefixTokens = dc.cachedPrefix(sh)
	if sh.action != compactorv1.Action_ACTION_NONE {
		resp.RewrittenTokens = max(sh.after-resp.CachedPrefixTokens, 0)
	}
	if dc.turn > 0 {
		resp.TurnTokens = dc.turn
		resp.HeadroomTurns = max(float64(pol.trigger-sh.after), 0) / float64(dc.turn)
	}
	if withPruned {
		if sh.pruned {
			d.Pruned = dc.prunedFrom(&sh, max(cut, 0))
		}
		d.Cuts = sh.cuts
		d.tokenizer = pol.tokenizer
		if sh.action == compactorv1.Action_ACTION_SUMMARIZE {
			d.splitHost = slices.Clone(dc.sp.host)
		}
		dc.callerCounts(d, sh, cut)
	}
	var buf [512]byte
	resp.Reason = string(dc.reason(reason(buf[:0]), sh, cut, prunedTail, d.TailTurns))
	return nil
}

// callerCounts records in d what carrying it out needs to keep the caller's units: which
// messages the caller counted (token_count, or reported_usage), what pruning and cutting save
// in each, and the counts of the parts of the messages a summary splits.
func (dc *deciding) callerCounts(d *Decision, sh shape, cut int) {
	var counted []bool
	for i, m := range dc.msgs {
		if m.GetTokenCount() > 0 || i < dc.pol.usageCount {
			if counted == nil {
				counted = make([]bool, len(dc.msgs))
			}
			counted[i] = true
		}
	}
	if counted == nil {
		return
	}
	d.counted = counted
	d.saved = make([]int64, len(dc.msgs))
	for i := max(cut, 0); i < len(dc.msgs); i++ {
		d.saved[i] = dc.prunedSaved(&sh, i)
	}
	for _, c := range sh.cuts {
		d.saved[c.Message] += scaleSaving(c.Saved, dc.sz.tokens[c.Message], dc.counted(c.Message))
	}
	if sh.action == compactorv1.Action_ACTION_SUMMARIZE && dc.sp.head != nil {
		d.splitHead = slices.Clone(dc.sp.head)
		d.splitRest = slices.Clone(dc.sp.rest)
	}
	d.msgs = dc.msgs
}

// instructions sets the plan's standing instructions: the head's messages of standing
// instructions alone, and, when the plan acts, the active messages that mix them with other
// parts; their tokens in the head, those split from the messages before the cut included.
func (dc *deciding) instructions(resp *compactorv1.PlanResponse, sh shape, cut int) {
	resp.InstructionTokens = dc.sz.instructions
	if sh.action == compactorv1.Action_ACTION_SUMMARIZE {
		resp.InstructionTokens += sh.head - dc.sz.head
	}
	if dc.sz.instructions == 0 && dc.sp.head == nil {
		return
	}
	for i, cl := range dc.lay.class {
		switch {
		case cl == classHead && dc.standingOnly(i), cl == classActive && dc.sp.head != nil && dc.sp.head[i] > 0:
			resp.InstructionIndexes = append(resp.InstructionIndexes, int32(i))
		}
	}
}

// standingOnly reports whether message i holds standing instructions alone.
func (dc *deciding) standingOnly(i int) bool {
	if fl := dc.counts[i].flags; fl&flagKnown != 0 {
		return fl&flagStandingOnly != 0
	}
	return standingOnly(dc.msgs[i])
}

// cachedPrefix returns the tokens of the messages sent now that stay a byte-identical prefix
// of what the shape returns: every one when nothing is done; those before the first message
// pruning or cutting changes; the leading head messages before a summary (a message split
// from its standing instructions changes).
func (dc *deciding) cachedPrefix(sh shape) int64 {
	first := len(dc.msgs) // the first message the shape changes or moves
	switch sh.action {
	case compactorv1.Action_ACTION_NONE:
	case compactorv1.Action_ACTION_SUMMARIZE:
		for i, cl := range dc.lay.class {
			if cl != classDrop && cl != classHead {
				first = i
				break
			}
		}
	default:
		for _, pp := range dc.pr.parts {
			if dc.prunedSaved(&sh, pp.Message) > 0 {
				first = min(first, pp.Message)
			}
		}
		for _, c := range sh.cuts {
			first = min(first, c.Message)
		}
	}
	var n int64
	for i := 0; i < first; i++ {
		if dc.lay.class[i] != classDrop {
			n += dc.sz.tokens[i]
		}
	}
	return n
}

// fill sets the dispositions disp: cut < 0 means no summary.
func (dc *deciding) fill(disp []compactorv1.Disposition, cut int, sh shape) {
	for i, cl := range dc.lay.class {
		var d compactorv1.Disposition
		switch {
		case cl == classDrop:
			d = compactorv1.Disposition_DISPOSITION_DROP
		case cl == classHead:
			d = compactorv1.Disposition_DISPOSITION_KEEP
		case cut >= 0 && i < cut: // the latest summary and active messages before the cut
			d = compactorv1.Disposition_DISPOSITION_SUMMARIZE
		case dc.prunedSaved(&sh, i) > 0:
			d = compactorv1.Disposition_DISPOSITION_PRUNE
		default:
			d = compactorv1.Disposition_DISPOSITION_KEEP
		}
		disp[i] = d
	}
	for _, c := range sh.cuts {
		disp[c.Message] = compactorv1.Disposition_DISPOSITION_PRUNE
	}
	if cut >= 0 {
		keptRequests(dc.reqs, cut, dc.sp.rest, sh.reqBudget, func(i int) {
			disp[i] = compactorv1.Disposition_DISPOSITION_KEEP_REQUEST
		})
	}
}

// reason appends to rs the reason of the shape: the numbers that decide whether to act, then
// what the shape does and why, quoting them.
func (dc *deciding) reason(rs reason, sh shape, cut int, prunedTail int64, tailTurns int) reason {
	pol, sz, prunable := &dc.pol, dc.sz, dc.pr.total
	rs = rs.start(pol, sz.before, dc.opt.Force)
	if !dc.acting {
		return rs.s(": nothing to do").headroom(sh, pol, dc.turn)
	}
	turns := len(dc.lay.turnStarts)
	switch sh.action {
	case compactorv1.Action_ACTION_NONE:
		if sh.smallest {
			return rs.s("; no compaction makes it smaller (the least summary, requests and turns it must keep cost more than they replace), and it fits the usable window ").d(pol.usable)
		}
		if sh.few {
			rs = rs.s("; ").onlyTurns(turns, pol)
			if prunable > 0 && !dc.opt.Force {
				rs = rs.s("; pruning would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
			}
		}
		return rs
	case compactorv1.Action_ACTION_PRUNE:
		switch {
		case sh.few:
			rs = rs.s("; ").onlyTurns(turns, pol)
		case !sh.enough:
			rs = rs.s("; a summary would cost more than the turns it replaces: keeping all ").d(int64(turns)).s(" active turns")
		}
		if prunedTail > 0 { // what pruning removes: prunedTotal, without a summary
			if sh.partial {
				n, newer := dc.prunedOutputsIn(&sh)
				if newer == 0 {
					rs = rs.s("; pruning the oldest ").d(int64(n)).s(" of ").d(int64(countOutputs(dc.pr.parts))).s(" old tool outputs")
				} else {
					rs = rs.s("; pruning ").d(int64(n)).s(" of ").d(int64(countOutputs(dc.pr.parts))).s(" old tool outputs (the oldest, and ").
						d(int64(newer)).s(" newer that a later identical call superseded)")
				}
			} else {
				rs = rs.s("; pruning ").d(int64(countOutputs(dc.pr.parts))).s(" old tool outputs")
			}
			rs = rs.s(" removes ").d(prunedTail).s(" tokens")
		}
		rs = rs.cuts(sh)
		rs = rs.s(" → ").d(sh.after)
		if sh.enough {
			rs = rs.s(" ≤ target ").d(pol.target).s(": prune only")
			if sh.partial {
				c := dc.clearAtLeast()
				rs = rs.s(", the oldest outputs first until ").d(max(sz.before-pol.target, c)).
					s(" tokens are freed (what the target needs, or clear_at_least_tokens ").d(c).s(" if more)")
			}
			return rs.headroom(sh, pol, dc.turn)
		}
		return rs.landing(sh, pol, dc.turn)
	}
	switch {
	case dc.opt.Force:
	case sz.before-prunable > pol.target:
		rs = rs.s("; pruning alone reaches ").d(sz.before - prunable).s(" > target ").d(pol.target)
	default:
		rs = rs.s("; pruning alone would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
	}
	var summarized int64 // what the summary replaces: the range, less what the head keeps of it
	for i, cl := range dc.lay.class {
		if i < cut && (cl == classActive || cl == classSummary) {
			summarized += sz.tokens[i]
		}
	}
	summarized -= sh.head - sz.head
	rs = rs.s("; summarizing ").d(summarized - sh.reqs).s(" tokens before message ").d(int64(cut)).s(" into at most ").d(sh.room).
		s(" tokens and keeping ").d(int64(tailTurns)).s(" turns verbatim from message ").d(int64(cut)).
		s(" (").d(sh.tail).s(" tokens; keep_recent_tokens ").d(pol.keepTokens).s(")")
	if prunedTail > 0 {
		rs = rs.s(", pruning ").d(prunedTail).s(" tokens of old tool outputs in the tail")
	}
	rs = rs.cuts(sh)
	if sh.reqs > 0 {
		rs = rs.s(", the user's requests before the cut kept verbatim after the summary (").d(sh.reqs).s(" tokens)")
	}
	if sh.reqBudget < dc.pol.keepRequests {
		rs = rs.folded(dc, sh, cut)
	}
	if sh.room < pol.summaryRoom {
		rs = rs.s("; to fit, the summary room is ").d(sh.room).s(" of summary_max_tokens ").d(pol.summaryRoom)
	}
	if sh.keep < pol.keepTurns {
		rs = rs.s("; to fit, fewer turns than keep_recent_turns ").d(int64(pol.keepTurns)).s(" stay verbatim")
	}
	rs = rs.s(" → head ").d(sh.head).s(" + summary ").d(sh.room).s(" + requests ").d(sh.reqs).s(" + tail ").d(sh.tail).
		s(" = ").d(sh.after)
	return rs.landing(sh, pol, dc.turn)
}

// folded appends which requests the shape folds into the summary, whole, to fit under the
// trigger: those before the cut it does not keep verbatim.
func (r reason) folded(dc *deciding, sh shape, cut int) reason {
	kept := map[int]bool{}
	keptRequests(dc.reqs, cut, dc.sp.rest, sh.reqBudget, func(i int) { kept[i] = true })
	var idx [8]int64 // the first indexes named; more are counted
	n := 0
	for _, i := range dc.reqs {
		if int(i) < cut && !kept[int(i)] {
			if n < len(idx) {
				idx[n] = int64(i)
			}
			n++
		}
	}
	switch {
	case n == 0:
		return r
	case n == 1:
		return r.s("; to fit, the request at message ").d(idx[0]).s(" goes into the summary whole")
	}
	r = r.s("; to fit, the requests at messages ")
	for k := range min(n, len(idx)) {
		if k > 0 {
			r = r.s(", ")
		}
		r = r.d(idx[k])
	}
	if n > len(idx) {
		r = r.s(" and ").d(int64(n - len(idx))).s(" more")
	}
	return r.s(" go into the summary whole, the oldest first")
}

// cuts appends what cutting tool outputs saves, if it cuts any.
func (r reason) cuts(sh shape) reason {
	if len(sh.cuts) == 0 {
		return r
	}
	return r.s(", cutting ").d(int64(len(sh.cuts))).s(" oversized tool outputs to their head and tail removes ").d(sh.cut).s(" tokens")
}

// landing appends where the shape lands against the target and the trigger, and the turns of
// headroom it leaves.
func (r reason) landing(sh shape, pol *policy, turn int64) reason {
	switch {
	case sh.after <= pol.target:
		r = r.s(" ≤ target ").d(pol.target)
	case sh.after <= pol.trigger:
		r = r.s(" > target ").d(pol.target).
			s(": the target yields to what the next turns need most (the newest turn whole, the requests kept verbatim, half the summary room), ")
		if sh.least > 0 {
			r = r.d(sh.least).s(" tokens at least, ")
		}
		r = r.s("which only the trigger takes")
	default:
		return r.s("; ").d(sh.after).s(" is above the trigger ").d(pol.trigger).
			s(": even the least this conversation can keep exceeds it, so the next turns will compact again")
	}
	return r.headroom(sh, pol, turn)
}

// headroom appends the turns of the session's median size that fit between the shape and the
// trigger, when the session has turns enough to tell.
func (r reason) headroom(sh shape, pol *policy, turn int64) reason {
	if turn <= 0 || sh.after > pol.trigger {
		return r
	}
	h := (pol.trigger - sh.after) / turn
	r = r.s("; ").d(h).s(" turn")
	if h != 1 {
		r = r.s("s")
	}
	return r.s(" of headroom before the trigger ").d(pol.trigger).s(" at the median turn of ").d(turn).s(" tokens")
}

// windowParen appends how the usable window was set.
func (r reason) windowParen(pol *policy) reason {
	if pol.window > 0 {
		return r.s(" (window ").d(pol.window).s(" − reserve ").d(pol.reserve).s(")")
	}
	return r.s(" (trigger_tokens, no window)")
}

// irreducible is the *IrreducibleError of an irreducible shape sh.
func (dc *deciding) irreducible(sh shape) error {
	pol, sz := &dc.pol, dc.sz
	excess := sh.after - pol.usable
	var r reason
	r = r.s(ErrIrreducible.Error()).s(": ")
	switch {
	case sh.neverCut:
		ins := sz.instructions + dc.sp.total
		r = r.s("what no compaction cuts, the head (system prompt, prefaces, pinned messages) ").d(sh.head - ins).
			s(", the standing instructions ").d(ins).
			s(" and the user's newest request ").d(sh.reqs).s(", alone ").d(sh.after).s(" tokens, exceeds the usable window ").d(pol.usable).
			windowParen(pol).s(" by ").d(excess).s(" tokens")
		return &IrreducibleError{Floor: sh.after, Usable: pol.usable, Excess: excess, NeverCut: true,
			Head: sh.head, Instructions: ins, NewestRequest: sh.reqs, msg: string(r)}
	case sh.action == compactorv1.Action_ACTION_SUMMARIZE:
		r = r.s("head ").d(sh.head)
		if sh.reqs > 0 {
			r = r.s(" + newest request ").d(sh.reqs)
		}
		r = r.s(" + least summary ").d(sh.room).
			s(" + last ").d(int64(sh.keep)).s(" turn")
		if sh.keep != 1 {
			r = r.s("s")
		}
		r = r.s(" ").d(sh.tail)
	default:
		if sh.few {
			r = r.s("nothing can be summarized (")
		} else {
			r = r.s("a summary costs more than it replaces, keeping all (")
		}
		r = r.d(int64(len(dc.lay.turnStarts))).s(" active turns): head ").d(sz.head).
			s(" + latest summary ").d(sz.summary).s(" + active turns ").d(sh.tail)
	}
	r = r.s(" (after pruning")
	if sh.cut > 0 {
		r = r.s(" and cutting tool outputs by ").d(sh.cut)
	}
	r = r.s(") = ").d(sh.after).s(" tokens exceed the usable window ").d(pol.usable).windowParen(pol).
		s(" by ").d(excess).s(" tokens")
	return &IrreducibleError{Floor: sh.after, Usable: pol.usable, Excess: excess, msg: string(r)}
}

// reason is a plan's human-readable reason as it is built: Decide appends to a buffer on
// its stack and allocates only the final string. Numbers read as fmt's %d prints them.
type reason []byte

// s appends text.
func (r reason) s(text string) reason { return append(r, text...) }

// d appends n in decimal.
func (r reason) d(n int64) reason { return strconv.AppendInt(r, n, 10) }

// start appends the numbers that decide whether to act: "total T > trigger X (R × usable U
// = window W − reserve V)", with "forced: " first when forced.
func (r reason) start(pol *policy, total int64, force bool) reason {
	if force {
		r = r.s("forced: ")
	}
	r = r.s("total ").d(total)
	if total > pol.trigger {
		r = r.s(" > trigger ")
	} else {
		r = r.s(" ≤ trigger ")
	}
	r = r.d(pol.trigger)
	if pol.triggerRatio > 0 {
		r = reason(strconv.AppendFloat(r.s(" ("), pol.triggerRatio, 'g', -1, 64)).s(" × usable ").d(pol.usable)
	} else {
		r = r.s(" (trigger_tokens; usable ").d(pol.usable)
	}
	if pol.window > 0 {
		return r.s(" = window ").d(pol.window).s(" − reserve ").d(pol.reserve).s(")")
	}
	return r.s(", no window)")
}

// onlyTurns appends why nothing can be summarized: too few active turns.
func (r reason) onlyTurns(turns int, pol *policy) reason {
	return r.s("only ").d(int64(turns)).s(" active turns, keep_recent_turns ").d(int64(pol.keepTurns)).s(": nothing to summarize")
}

// prunedFrom returns a copy (dc.pr lives in scratch memory) of the parts sh prunes in
// messages from index from on where pruning saves tokens (their disposition is PRUNE); nil
// when there are none.
func (dc *deciding) prunedFrom(sh *shape, from int) []PrunedPart {
	keep := func(pp PrunedPart) bool { return pp.Message >= from && dc.prunedSaved(sh, pp.Message) > 0 }
	n := 0
	for _, pp := range dc.pr.parts {
		if keep(pp) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]PrunedPart, 0, n) // one allocation, as the copy it replaces made
	for _, pp := range dc.pr.parts {
		if keep(pp) {
			out = append(out, pp)
		}
	}
	return out
}

func countOutputs(pp []PrunedPart) int {
	n := 0
	for _, p := range pp {
		if !p.Input {
			n++
		}
	}
	return n
}
