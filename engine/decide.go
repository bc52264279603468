package engine

import (
	"fmt"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// This file is the decision of Plan and Decide, in the order the spec gives it: measure what
// the counted conversation costs and what pruning would save (the only steps that need the
// Counter), then decide from those numbers and the policy alone: nothing, prune, or
// summarize with a cut; the irreducible case is an error saying by how much.

// decideMeasured is decide once the conversation is measured (in).
func (c *Counter) decideMeasured(msgs []*compactorv1.Message, pol *policy, opt Options, sc *scratch, in measurement, d *Decision, withPruned bool) error {
	resp := newPlanResponse(len(msgs), pol, in.lay.summary)
	sz := measureSizes(msgs, &in, pol, resp.MessageTokens)
	resp.TokensBefore = sz.before
	*d = Decision{Response: resp}
	var buf [512]byte
	rs := reason(buf[:0]).start(pol, sz.before, opt.Force) // the reason, to be continued
	dc := &deciding{msgs: msgs, pol: pol, opt: opt, sz: sz, d: d, withPruned: withPruned}

	if !opt.Force && sz.before <= pol.trigger {
		dc.lay = in.lay
		dc.none(rs.s(": nothing to do"))
		return nil
	}
	// Pruning, over the whole active region. It needs the part counts of messages whose
	// total came from the caller.
	if len(in.lay.results) > 0 && !pol.pruneOff {
		var err error
		if in, err = c.measure(msgs, pol.tokenizer, sc, in, needToolParts); err != nil {
			return err
		}
	}
	dc.lay = in.lay
	pr, err := c.measurePruning(msgs, &in, pol, sc, sz.tokens, withPruned)
	if err != nil {
		return err
	}
	dc.pr = pr

	turns := len(in.lay.turnStarts)
	switch {
	case !opt.Force && pr.total > 0 && pr.total >= pol.clearAtLeast && sz.before-pr.total <= pol.target:
		dc.prune(rs, sz.before-pr.total, "")
		return nil
	case turns <= pol.keepTurns:
		return dc.withoutSummary(rs, turns)
	}
	sc.tail = resize(sc.tail, turns+1)
	cut, err := dc.summarize(rs, sc.tail)
	if err != nil {
		return err
	}
	resp.PrefixHash = HexHash(in.prefixHash(c, msgs, cut))
	d.counter, d.msgs = c, msgs
	if in.cv != nil {
		d.keys = in.keys[:cut:cut] // the memoized conversation's: immutable, all valid
	} else {
		d.keys = append([]contentKey(nil), in.keys[:cut]...) // keys is pooled scratch
	}
	return nil
}

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

// sizes is what a counted conversation costs: each message's tokens (the caller's
// token_count, else the count; rescaled to reported_usage over the prefix it covers) and
// the totals per region.
type sizes struct {
	tokens                        []int64
	head, summary, active, before int64
}

// measureSizes fills tokens (one per message) and returns the sizes.
func measureSizes(msgs []*compactorv1.Message, in *measurement, pol *policy, tokens []int64) sizes {
	for i, m := range msgs {
		if tcnt := m.GetTokenCount(); tcnt > 0 {
			tokens[i] = tcnt
		} else {
			tokens[i] = in.counts[i].total
		}
	}
	if pol.usageCount > 0 {
		applyUsage(tokens, in.lay.class[:pol.usageCount], pol.usageTokens)
	}
	sz := sizes{tokens: tokens}
	for i, cl := range in.lay.class {
		switch cl {
		case classHead:
			sz.head += tokens[i]
		case classSummary:
			sz.summary += tokens[i]
		case classActive:
			sz.active += tokens[i]
		}
	}
	sz.before = sz.head + sz.summary + sz.active
	return sz
}

// pruning is what pruning old tool outputs would save.
type pruning struct {
	parts []PrunedPart // the parts pruning replaces (scratch memory)
	saved []int64      // per message, scaled to its token count and at most it (scratch)
	total int64        // the sum of saved
}

// measurePruning selects the prunable tool outputs of the active region and what each
// message would save.
func (c *Counter) measurePruning(msgs []*compactorv1.Message, in *measurement, pol *policy, sc *scratch, tokens []int64, withPruned bool) (pruning, error) {
	tc, err := tokenizer.New(pol.tokenizer)
	if err != nil {
		return pruning{}, err
	}
	parts := selectPruneParts(msgs, &in.lay, in.counts, pol, c, tc, sc, withPruned)
	sc.saved = resize(sc.saved, len(msgs))
	saved := sc.saved
	for _, pp := range parts {
		saved[pp.Message] += scaleSaving(pp.Saved(), tokens[pp.Message], in.counts[pp.Message].total)
	}
	var total int64
	for i := range saved {
		saved[i] = min(saved[i], tokens[i])
		total += saved[i]
	}
	return pruning{parts: parts, saved: saved, total: total}, nil
}

// deciding is one decision in progress: the measured conversation, the policy, and the
// response being written. Its methods are the outcomes, each given the reason so far
// (which lives on the caller's stack); none of them counts or hashes.
type deciding struct {
	msgs       []*compactorv1.Message
	pol        *policy
	opt        Options
	lay        layout
	sz         sizes
	pr         pruning
	d          *Decision
	withPruned bool
}

// none answers ACTION_NONE with the reason rs.
func (dc *deciding) none(rs reason) {
	resp := dc.d.Response
	resp.Action = compactorv1.Action_ACTION_NONE
	resp.TokensAfter = dc.sz.before
	resp.Reason = string(rs)
	fill(resp, &dc.lay, -1, nil)
}

// prune answers ACTION_PRUNE down to after tokens; rs is the reason so far, and the target
// is quoted as "≤ target" when inTarget is empty, else as "(target N)".
func (dc *deciding) prune(rs reason, after int64, inTarget string) {
	resp := dc.d.Response
	resp.Action = compactorv1.Action_ACTION_PRUNE
	resp.PrunedTokens = dc.pr.total
	resp.TokensAfter = after
	rs = rs.s("; pruning ").d(int64(countOutputs(dc.pr.parts))).s(" old tool outputs removes ").d(dc.pr.total).
		s(" tokens → ").d(after)
	if inTarget == "" {
		rs = rs.s(" ≤ target ").d(dc.pol.target).s(": prune only")
	} else {
		rs = rs.s(" (target ").d(dc.pol.target).s(")")
	}
	resp.Reason = string(rs)
	if dc.withPruned {
		dc.d.Pruned = prunedCopy(keepSaving(dc.pr.parts, dc.pr.saved, 0))
	}
	fill(resp, &dc.lay, -1, dc.pr.saved)
}

// withoutSummary decides, continuing the reason rs, when too few turns are active for a summary (turns ≤
// keep_recent_turns): prune if the conversation is over the usable window or pruning pays,
// else nothing; irreducible when even the pruned conversation exceeds the usable window.
func (dc *deciding) withoutSummary(rs reason, turns int) error {
	pol, sz, prunable := dc.pol, dc.sz, dc.pr.total
	after := sz.before - prunable
	if after > pol.usable {
		excess := after - pol.usable
		return &IrreducibleError{Floor: after, Usable: pol.usable, Excess: excess, msg: fmt.Sprintf(
			"%v: nothing can be summarized (%d active turns, keep_recent_turns %d): head %d + latest summary %d + active turns %d after pruning = %d tokens exceed the usable window %d%s by %d tokens",
			ErrIrreducible, turns, pol.keepTurns, sz.head, sz.summary, sz.active-prunable, after, pol.usable, windowParen(pol), excess)}
	}
	rs = rs.s("; ").onlyTurns(turns, pol)
	// Over the usable window pruning is a must, whatever it costs the prompt cache.
	mustPrune := sz.before > pol.usable
	if prunable == 0 || !mustPrune && (dc.opt.Force || prunable < pol.clearAtLeast) {
		if prunable > 0 && !dc.opt.Force {
			rs = rs.s("; pruning would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
		}
		dc.none(rs)
		return nil
	}
	dc.prune(rs, after, "target")
	return nil
}

// summarize answers ACTION_SUMMARIZE, continuing the reason rs, and returns the cut, or an *IrreducibleError when the
// floor (head + the last keep_recent_turns turns after pruning + summary room) exceeds the
// usable window. tail is scratch for one int64 per turn start plus one.
func (dc *deciding) summarize(rs reason, tail []int64) (int, error) {
	pol, sz, lay := dc.pol, dc.sz, &dc.lay
	turns := len(lay.turnStarts)
	tailSizes(tail, lay, sz.tokens, dc.pr.saved)
	kMax := turns - pol.keepTurns // the last cut that keeps keep_recent_turns turns; ≥ 1
	floor := sz.head + pol.summaryRoom + tail[kMax]
	if floor > pol.usable {
		excess := floor - pol.usable
		return 0, &IrreducibleError{Floor: floor, Usable: pol.usable, Excess: excess, msg: fmt.Sprintf(
			"%v: head %d + last %d turns %d (after pruning) + summary room %d = %d tokens exceed the usable window %d%s by %d tokens",
			ErrIrreducible, sz.head, pol.keepTurns, tail[kMax], pol.summaryRoom, floor, pol.usable, windowParen(pol), excess)}
	}
	budget := min(pol.keepTokens, max(0, pol.target-sz.head-pol.summaryRoom))
	k := chooseCut(dc.msgs, lay, tail, kMax, budget)
	cut := int(lay.turnStarts[k])

	resp := dc.d.Response
	resp.Action = compactorv1.Action_ACTION_SUMMARIZE
	resp.CutIndex = int32(cut)
	var tailPruned, summarized int64
	for i, cl := range lay.class {
		switch {
		case i >= cut && cl == classActive:
			tailPruned += dc.pr.saved[i]
		case i < cut && (cl == classActive || cl == classSummary):
			summarized += sz.tokens[i]
		}
	}
	resp.PrunedTokens = tailPruned
	after := sz.head + pol.summaryRoom + tail[k]
	resp.TokensAfter = after
	dc.d.TailTurns = turns - k
	if dc.withPruned {
		dc.d.Pruned = prunedCopy(keepSaving(dc.pr.parts, dc.pr.saved, cut))
	}
	fill(resp, lay, cut, dc.pr.saved)
	resp.Reason = string(dc.summaryReason(rs, cut, summarized, tail[k], budget, tailPruned, after, floor))
	return cut, nil
}

// tailSizes sets tail[k] to the tokens of the active messages from turn start k on, after
// pruning; tail[len(turnStarts)] is 0.
func tailSizes(tail []int64, lay *layout, tokens, saved []int64) {
	k := len(lay.turnStarts)
	tail[k] = 0
	var sum int64
	for i := len(lay.class) - 1; i >= 0; i-- {
		if lay.class[i] == classActive {
			sum += tokens[i] - saved[i]
		}
		for k > 0 && int(lay.turnStarts[k-1]) == i {
			k--
			tail[k] = sum
		}
	}
}

// chooseCut returns the turn to cut before: the first whose tail fits budget (the most
// turns kept verbatim), or kMax when none does; then, among that turn and the later ones
// whose tail is at least half as long, the first that a user message starts, if any.
func chooseCut(msgs []*compactorv1.Message, lay *layout, tail []int64, kMax int, budget int64) int {
	k := kMax
	for j := 1; j <= kMax; j++ {
		if tail[j] <= budget {
			k = j
			break
		}
	}
	if k == kMax {
		return k
	}
	for j := k; j <= kMax; j++ {
		if 2*tail[j] < tail[k] {
			break
		}
		if msgs[lay.turnStarts[j]].GetRole() == compactorv1.Role_ROLE_USER {
			return j
		}
	}
	return k
}

// summaryReason ends the reason rs of a SUMMARIZE plan with why pruning did not do, what is
// summarized and kept, and whether the next turns will trigger again.
func (dc *deciding) summaryReason(rs reason, cut int, summarized, kept, budget, tailPruned, after, floor int64) reason {
	pol, before, prunable := dc.pol, dc.sz.before, dc.pr.total
	switch {
	case dc.opt.Force:
	case before-prunable > pol.target:
		rs = rs.s("; pruning alone reaches ").d(before - prunable).s(" > target ").d(pol.target)
	default:
		rs = rs.s("; pruning alone would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
	}
	rs = rs.s("; summarizing ").d(summarized).s(" tokens before message ").d(int64(cut)).s(" into at most ").d(pol.summaryRoom).
		s(" tokens and keeping ").d(int64(dc.d.TailTurns)).s(" turns verbatim from message ").d(int64(cut)).
		s(" (").d(kept).s(" tokens, tail budget ").d(budget).s(")")
	if tailPruned > 0 {
		rs = rs.s(", pruning ").d(tailPruned).s(" tokens of old tool outputs in the tail")
	}
	rs = rs.s(" → head ").d(dc.sz.head).s(" + summary ").d(pol.summaryRoom).s(" + tail ").d(kept).s(" = ").d(after)
	if after > pol.trigger {
		rs = rs.s("; ").d(after).s(" is above the trigger ").d(pol.trigger).s(" (floor ").d(floor).s("): the next turns will trigger again")
	}
	return rs
}
