package engine

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Writing the plan a decision chose (decide.go) into the PlanResponse: the action, the terms
// of tokens_after, each message's disposition, the reason quoting the numbers, and what
// carrying it out needs (Decision.Pruned and Cuts). Nothing here counts or decides.

// newPlanResponse returns a response for n messages with the policy's figures set and no
// cut yet.
func newPlanResponse(n int, pol *policy, summary int) *compactorv1.PlanResponse {
	return &compactorv1.PlanResponse{
		Dispositions:    make([]compactorv1.Disposition, n),
		MessageTokens:   make([]int64, n),
		CutIndex:        -1,
		SummaryIndex:    int32(summary),
		UsableTokens:    pol.usable,
		TriggerAtTokens: pol.trigger,
		TargetTokens:    pol.target,
	}
}

// write writes the shape sh into the response, continuing the reason rs.
func (dc *deciding) write(rs reason, sh shape) {
	resp, sz, pol := dc.d.Response, dc.sz, dc.pol
	resp.Action = sh.action
	resp.HeadTokens = sz.head
	cut := -1
	var prunedTail int64 // pruning's saving in what stays
	switch sh.action {
	case compactorv1.Action_ACTION_SUMMARIZE:
		cut = int(dc.lay.turnStarts[sh.k])
		resp.CutIndex = int32(cut)
		resp.SummaryTokens, resp.KeptRequestTokens = sh.room, sh.reqs
		for i := cut; i < len(dc.lay.class); i++ {
			if dc.lay.class[i] == classActive {
				prunedTail += dc.pr.saved[i]
			}
		}
		dc.d.TailTurns = len(dc.lay.turnStarts) - sh.k
	default:
		resp.SummaryTokens = sz.summary
		if sh.pruned {
			prunedTail = dc.pr.total
		}
	}
	resp.TailTokens = sh.after - sz.head - resp.SummaryTokens - resp.KeptRequestTokens
	resp.TokensAfter = sh.after
	resp.CutTokens = sh.cut
	resp.PrunedTokens = prunedTail + sh.cut
	dc.fill(cut, sh)
	if dc.withPruned {
		if sh.pruned {
			dc.d.Pruned = prunedCopy(keepSaving(dc.pr.parts, dc.pr.saved, max(cut, 0)))
		}
		dc.d.Cuts = sh.cuts
		dc.d.tokenizer = pol.tokenizer
	}
	resp.Reason = string(dc.reason(rs, sh, cut, prunedTail))
}

// fill sets the dispositions: cut < 0 means no summary.
func (dc *deciding) fill(cut int, sh shape) {
	disp := dc.d.Response.Dispositions
	for i, cl := range dc.lay.class {
		var d compactorv1.Disposition
		switch {
		case cl == classDrop:
			d = compactorv1.Disposition_DISPOSITION_DROP
		case cl == classHead:
			d = compactorv1.Disposition_DISPOSITION_KEEP
		case cut >= 0 && i < cut: // the latest summary and active messages before the cut
			d = compactorv1.Disposition_DISPOSITION_SUMMARIZE
		case sh.pruned && dc.pr.saved != nil && dc.pr.saved[i] > 0:
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
		keptRequests(dc.reqs, cut, dc.sz.tokens, dc.pol.keepRequests, sh.optional, func(i int) {
			disp[i] = compactorv1.Disposition_DISPOSITION_KEEP_REQUEST
		})
	}
}

// reason ends the reason rs with what the shape does and why, quoting the numbers.
func (dc *deciding) reason(rs reason, sh shape, cut int, prunedTail int64) reason {
	pol, sz, prunable := dc.pol, dc.sz, dc.pr.total
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
		if sh.pruned {
			rs = rs.s("; pruning ").d(int64(countOutputs(dc.pr.parts))).s(" old tool outputs removes ").d(prunable).s(" tokens")
		}
		rs = rs.cuts(sh)
		rs = rs.s(" → ").d(sh.after)
		if sh.enough {
			return rs.s(" ≤ target ").d(pol.target).s(": prune only")
		}
		return rs.s(" (target ").d(pol.target).s(")").above(sh, pol)
	}
	switch {
	case dc.opt.Force:
	case sz.before-prunable > pol.target:
		rs = rs.s("; pruning alone reaches ").d(sz.before - prunable).s(" > target ").d(pol.target)
	default:
		rs = rs.s("; pruning alone would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
	}
	var summarized int64
	for i, cl := range dc.lay.class {
		if i < cut && (cl == classActive || cl == classSummary) {
			summarized += sz.tokens[i]
		}
	}
	rs = rs.s("; summarizing ").d(summarized - sh.reqs).s(" tokens before message ").d(int64(cut)).s(" into at most ").d(sh.room).
		s(" tokens and keeping ").d(int64(dc.d.TailTurns)).s(" turns verbatim from message ").d(int64(cut)).
		s(" (").d(sh.tail).s(" tokens; keep_recent_tokens ").d(pol.keepTokens).s(")")
	if prunedTail > 0 {
		rs = rs.s(", pruning ").d(prunedTail).s(" tokens of old tool outputs in the tail")
	}
	rs = rs.cuts(sh)
	if sh.reqs > 0 {
		rs = rs.s(", the user's requests before the cut kept verbatim after the summary (").d(sh.reqs).s(" tokens)")
	}
	if !sh.optional && len(dc.reqs) > 1 {
		rs = rs.s("; to fit, only the newest request stays verbatim, the others go into the summary")
	}
	if sh.room < pol.summaryRoom {
		rs = rs.s("; to fit, the summary room is ").d(sh.room).s(" of summary_max_tokens ").d(pol.summaryRoom)
	}
	if sh.keep < pol.keepTurns {
		rs = rs.s("; to fit, fewer turns than keep_recent_turns ").d(int64(pol.keepTurns)).s(" stay verbatim")
	}
	rs = rs.s(" → head ").d(sz.head).s(" + summary ").d(sh.room).s(" + requests ").d(sh.reqs).s(" + tail ").d(sh.tail).
		s(" = ").d(sh.after)
	return rs.above(sh, pol)
}

// cuts appends what cutting tool outputs saves, if it cuts any.
func (r reason) cuts(sh shape) reason {
	if len(sh.cuts) == 0 {
		return r
	}
	return r.s(", cutting ").d(int64(len(sh.cuts))).s(" oversized tool outputs to their head and tail removes ").d(sh.cut).s(" tokens")
}

// above appends, when the shape is still above the trigger, that the next turn compacts
// again.
func (r reason) above(sh shape, pol *policy) reason {
	if sh.after <= pol.trigger {
		return r
	}
	return r.s("; ").d(sh.after).s(" is above the trigger ").d(pol.trigger).
		s(": even the least this conversation can keep exceeds it, so the next turns will compact again")
}

// windowParen appends how the usable window was set.
func (r reason) windowParen(pol *policy) reason {
	if pol.window > 0 {
		return r.s(" (window ").d(pol.window).s(" − reserve ").d(pol.reserve).s(")")
	}
	return r.s(" (trigger_tokens, no window)")
}

// prunedCopy returns a copy of pruned, which lives in scratch memory.
func prunedCopy(pruned []PrunedPart) []PrunedPart {
	if pruned == nil {
		return nil
	}
	return append(make([]PrunedPart, 0, len(pruned)), pruned...)
}

// keepSaving returns the pruned parts of messages from index from on whose pruning saves
// tokens (their disposition is PRUNE), filtering pruned in place.
func keepSaving(pruned []PrunedPart, saved []int64, from int) []PrunedPart {
	out := pruned[:0]
	for _, pp := range pruned {
		if pp.Message >= from && saved[pp.Message] > 0 {
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
