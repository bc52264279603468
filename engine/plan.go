package engine

import (
	"fmt"
	"math/bits"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Options adjust a plan.
type Options struct {
	// Force summarizes even when the conversation is under the trigger (Compact's force).
	Force bool
}

// Decision is a plan with what carrying it out needs beyond the PlanResponse.
type Decision struct {
	// Response is the plan as the Plan RPC returns it.
	Response *compactorv1.PlanResponse
	// Pruned lists the parts to replace by markers, in message and part order; only parts of
	// messages whose disposition is DISPOSITION_PRUNE. ApplyPrune applies them.
	Pruned []PrunedPart
	// TailTurns is the number of turns kept verbatim after the cut (SUMMARIZE only).
	TailTurns int

	// For PrefixChain (SUMMARIZE only): the counter, the conversation and the content keys
	// Decide computed, so the chain is not hashed from the message contents a second time.
	counter *Counter
	msgs    []*compactorv1.Message
	keys    []contentKey
}

// PrefixChain returns the hash chain values h[0..cut] of a SUMMARIZE decision (the values
// HashChain would return for msgs[:cut], with h[cut] = Response.prefix_hash), from the
// Counter's memo and the content hashes Decide already computed. It returns nil for other
// actions.
func (d *Decision) PrefixChain() [][32]byte {
	if d.keys == nil {
		return nil
	}
	return d.counter.chainUpTo(d.msgs, d.keys, int(d.Response.GetCutIndex()))
}

// IrreducibleError says by how much the smallest possible compaction of a conversation
// exceeds its usable window. It wraps ErrIrreducible (FAILED_PRECONDITION).
type IrreducibleError struct {
	// Floor is head + minimum tail + summary room, in tokens.
	Floor int64
	// Usable is context_window − reserve_output_tokens.
	Usable int64
	// Excess is Floor − Usable (> 0).
	Excess int64
	msg    string
}

// Error says what the floor is made of and by how many tokens it exceeds the window.
func (e *IrreducibleError) Error() string { return e.msg }

// Unwrap returns ErrIrreducible.
func (e *IrreducibleError) Unwrap() error { return ErrIrreducible }

// Plan decides what a conversation needs under a policy (see Decide) and returns the
// response of the Plan RPC. msgs must have passed Validate. The response belongs to the
// caller: when c remembers the plan of the same request (see Counter), it is a copy.
func Plan(msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter) (*compactorv1.PlanResponse, error) {
	var d Decision
	if err := decide(msgs, p, c, Options{}, &d, false); err != nil {
		return nil, err
	}
	return d.Response, nil
}

// Decide plans a compaction. msgs must have passed Validate; c is the process's Counter (nil
// plans with a throw-away one, without the memo's benefit). It
// counts every message (token_count wins over the count; reported_usage replaces the counts
// of the prefix it covers, scaled so that the sent messages of the prefix sum to it), then:
//
//  1. tokens_before ≤ trigger → ACTION_NONE (unless opt.Force);
//  2. pruning old tool outputs alone brings the conversation to the target, removing at least
//     prune.clear_at_least_tokens → ACTION_PRUNE;
//  3. otherwise ACTION_SUMMARIZE: the cut is the start of a turn such that the verbatim tail
//     (the active non-head messages from the cut on, after pruning) fits the tail budget
//     min(keep_recent_tokens, target − head − summary_max_tokens) with as many turns as
//     possible, but keeps at least keep_recent_turns turns whatever it costs; among cuts
//     whose tail is at least half that long, the start of a user turn is preferred. The
//     latest summary and the active messages before the cut are summarized; the tail is
//     pruned.
//
// When the floor (head + the last keep_recent_turns turns after pruning + summary_max_tokens)
// exceeds the usable window, it returns an *IrreducibleError (wrapping ErrIrreducible)
// instead of a plan. When fewer than keep_recent_turns + 1 turns are active, nothing can be
// summarized: the result prunes (or does nothing) if the pruned conversation fits the usable
// window, and is an *IrreducibleError otherwise; a conversation above the usable window is
// pruned even for less than clear_at_least_tokens. Policy errors are *ValidationError.
//
// Dispositions: compaction prompts and non-head messages before the latest summary DROP; head
// messages KEEP; the latest summary and active messages before the cut SUMMARIZE; active
// messages with pruned parts PRUNE; the rest KEEP. The result is deterministic.
func Decide(msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter, opt Options) (*Decision, error) {
	d := new(Decision)
	if err := decide(msgs, p, c, opt, d, true); err != nil {
		return nil, err
	}
	return d, nil
}

// decide is Decide into *d, which is meaningful only when it returns nil. Unless withPruned,
// it leaves d.Pruned nil (Plan does not need it), and then allocates little more than the
// response.
func decide(msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter, opt Options, d *Decision, withPruned bool) error {
	var pol0 policy
	if err := resolvePolicyInto(p, &pol0); err != nil {
		return err
	}
	pol := &pol0
	if c == nil {
		c = NewCounter(1 << 20)
	}
	n := len(msgs)
	if pol.usageCount > n {
		return Invalid("policy.reported_usage.message_count",
			fmt.Sprintf("covers %d messages but the conversation has %d", pol.usageCount, n))
	}
	sc := c.getScratch()
	defer c.putScratch(sc)
	// Plan answers a conversation it memoized with a copy of the plan it made before
	// under the same policy and caller token counts, if it still remembers it. Finding it
	// takes the conversation's hash, so when the caller counted every message, the parts
	// of the messages holding tool calls or results are counted now rather than when
	// pruning needs them: a plan the totals alone settle pays the hash (a few µs on 200
	// messages), and every other plan of a conversation seen before is a copy.
	remember := !withPruned && !opt.Force
	need := needUncounted
	if remember && !anyNeeds(msgs, needUncounted) {
		need = needToolParts
	}
	in, err := c.countConversation(msgs, pol.tokenizer, sc, planInput{}, need)
	if err != nil {
		return err
	}
	remember = remember && in.cv != nil
	var pk planKey
	if remember {
		pk = planKey{conv: in.cv.key, counts: c.tokenCountsHash(msgs), policy: c.policyHash(pol)}
		if r := c.lookupPlan(pk, pol); r != nil {
			d.Response = r
			return nil
		}
	}
	if err := c.decideCounted(msgs, pol, opt, sc, in, d, withPruned); err != nil {
		return err
	}
	if remember {
		c.storePlan(pk, pol, d.Response)
	}
	return nil
}

// decideCounted is decide once the conversation is counted as in says.
func (c *Counter) decideCounted(msgs []*compactorv1.Message, pol *policy, opt Options, sc *scratch, in planInput, d *Decision, withPruned bool) error {
	n := len(msgs)
	lay, counts, keys := in.lay, in.counts, in.keys
	tc, err := newTextCounter(pol.tokenizer)
	if err != nil {
		return err
	}

	resp := &compactorv1.PlanResponse{
		Dispositions:    make([]compactorv1.Disposition, n),
		MessageTokens:   make([]int64, n),
		CutIndex:        -1,
		SummaryIndex:    int32(lay.summary),
		UsableTokens:    pol.usable,
		TriggerAtTokens: pol.trigger,
		TargetTokens:    pol.target,
	}
	tokens := resp.MessageTokens
	for i, m := range msgs {
		if tcnt := m.GetTokenCount(); tcnt > 0 {
			tokens[i] = tcnt
		} else {
			tokens[i] = counts[i].total
		}
	}
	if pol.usageCount > 0 {
		applyUsage(tokens, lay.class[:pol.usageCount], pol.usageTokens)
	}

	var head, summary, active int64
	for i, cl := range lay.class {
		switch cl {
		case classHead:
			head += tokens[i]
		case classSummary:
			summary += tokens[i]
		case classActive:
			active += tokens[i]
		}
	}
	before := head + summary + active
	resp.TokensBefore = before
	*d = Decision{Response: resp}
	var buf [512]byte
	rs := reason(buf[:0]).start(pol, before, opt.Force) // the reason, to be continued

	if !opt.Force && before <= pol.trigger {
		resp.Action = compactorv1.Action_ACTION_NONE
		resp.TokensAfter = before
		resp.Reason = string(rs.s(": nothing to do"))
		fill(resp, &lay, -1, nil)
		return nil
	}

	// Pruning, over the whole active region. It needs the part counts of messages whose
	// total came from the caller.
	if len(lay.results) > 0 && !pol.pruneOff {
		in, err = c.countConversation(msgs, pol.tokenizer, sc, in, needToolParts)
		if err != nil {
			return err
		}
		lay, counts, keys = in.lay, in.counts, in.keys
	}
	pruned := selectPruneParts(msgs, &lay, counts, pol, c, tc, sc, withPruned)
	sc.saved = resize(sc.saved, n)
	saved := sc.saved // per message, scaled to its token count
	for _, pp := range pruned {
		saved[pp.Message] += scaleSaving(pp.Saved(), tokens[pp.Message], counts[pp.Message].total)
	}
	for i := range saved {
		saved[i] = min(saved[i], tokens[i])
	}
	var prunable int64
	for _, s := range saved {
		prunable += s
	}

	m := len(lay.turnStarts)
	canSummarize := m > pol.keepTurns

	switch {
	case !opt.Force && prunable > 0 && prunable >= pol.clearAtLeast && before-prunable <= pol.target:
		resp.Action = compactorv1.Action_ACTION_PRUNE
		resp.PrunedTokens = prunable
		resp.TokensAfter = before - prunable
		resp.Reason = string(rs.s("; pruning ").d(int64(countOutputs(pruned))).s(" old tool outputs removes ").d(prunable).
			s(" tokens → ").d(before - prunable).s(" ≤ target ").d(pol.target).s(": prune only"))
		if withPruned {
			d.Pruned = prunedCopy(keepSaving(pruned, saved, 0))
		}
		fill(resp, &lay, -1, saved)
		return nil

	case !canSummarize:
		after := before - prunable
		if after > pol.usable {
			excess := after - pol.usable
			return &IrreducibleError{Floor: after, Usable: pol.usable, Excess: excess, msg: fmt.Sprintf(
				"%v: nothing can be summarized (%d active turns, keep_recent_turns %d): head %d + latest summary %d + active turns %d after pruning = %d tokens exceed the usable window %d%s by %d tokens",
				ErrIrreducible, m, pol.keepTurns, head, summary, active-prunable, after, pol.usable, windowParen(pol), excess)}
		}
		rs = rs.s("; ").onlyTurns(m, pol)
		// Over the usable window pruning is a must, whatever it costs the prompt cache.
		mustPrune := before > pol.usable
		if prunable == 0 || !mustPrune && (opt.Force || prunable < pol.clearAtLeast) {
			resp.Action = compactorv1.Action_ACTION_NONE
			resp.TokensAfter = before
			if prunable > 0 && !opt.Force {
				rs = rs.s("; pruning would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
			}
			resp.Reason = string(rs)
			fill(resp, &lay, -1, nil)
			return nil
		}
		resp.Action = compactorv1.Action_ACTION_PRUNE
		resp.PrunedTokens = prunable
		resp.TokensAfter = after
		resp.Reason = string(rs.s("; pruning ").d(int64(countOutputs(pruned))).s(" old tool outputs removes ").d(prunable).
			s(" tokens → ").d(after).s(" (target ").d(pol.target).s(")"))
		if withPruned {
			d.Pruned = prunedCopy(keepSaving(pruned, saved, 0))
		}
		fill(resp, &lay, -1, saved)
		return nil
	}

	// Summarize. tail[k] = tokens of the active messages from turn start k on, after pruning.
	sc.tail = resize(sc.tail, m+1)
	tail := sc.tail
	{
		k := m
		var sum int64
		for i := n - 1; i >= 0; i-- {
			if lay.class[i] == classActive {
				sum += tokens[i] - saved[i]
			}
			for k > 0 && int(lay.turnStarts[k-1]) == i {
				k--
				tail[k] = sum
			}
		}
	}
	kMax := m - pol.keepTurns // the last cut that keeps keep_recent_turns turns; ≥ 1
	floor := head + pol.summaryRoom + tail[kMax]
	if floor > pol.usable {
		excess := floor - pol.usable
		return &IrreducibleError{Floor: floor, Usable: pol.usable, Excess: excess, msg: fmt.Sprintf(
			"%v: head %d + last %d turns %d (after pruning) + summary room %d = %d tokens exceed the usable window %d%s by %d tokens",
			ErrIrreducible, head, pol.keepTurns, tail[kMax], pol.summaryRoom, floor, pol.usable, windowParen(pol), excess)}
	}
	budget := min(pol.keepTokens, max(0, pol.target-head-pol.summaryRoom))
	k := kMax
	for j := 1; j <= kMax; j++ {
		if tail[j] <= budget {
			k = j
			break
		}
	}
	if k < kMax {
		for j := k; j <= kMax; j++ {
			if 2*tail[j] < tail[k] {
				break
			}
			if msgs[lay.turnStarts[j]].GetRole() == compactorv1.Role_ROLE_USER {
				k = j
				break
			}
		}
	}
	cut := int(lay.turnStarts[k])
	resp.Action = compactorv1.Action_ACTION_SUMMARIZE
	resp.CutIndex = int32(cut)
	var tailPruned, summarized int64
	for i := cut; i < n; i++ {
		if lay.class[i] == classActive {
			tailPruned += saved[i]
		}
	}
	for i := 0; i < cut; i++ {
		if lay.class[i] == classActive || lay.class[i] == classSummary {
			summarized += tokens[i]
		}
	}
	resp.PrunedTokens = tailPruned
	after := head + pol.summaryRoom + tail[k]
	resp.TokensAfter = after
	d.TailTurns = m - k
	if withPruned {
		d.Pruned = prunedCopy(keepSaving(pruned, saved, cut))
	}
	fill(resp, &lay, cut, saved)
	resp.PrefixHash = HexHash(c.chainAt(msgs, keys, cut))
	d.counter, d.msgs = c, msgs
	if in.cv != nil {
		d.keys = keys[:cut:cut] // the memoized conversation's: immutable, all valid
	} else {
		d.keys = append([]contentKey(nil), keys[:cut]...) // keys is pooled scratch
	}

	switch {
	case opt.Force:
	case before-prunable > pol.target:
		rs = rs.s("; pruning alone reaches ").d(before - prunable).s(" > target ").d(pol.target)
	default:
		rs = rs.s("; pruning alone would remove only ").d(prunable).s(" tokens (clear_at_least_tokens ").d(pol.clearAtLeast).s(")")
	}
	rs = rs.s("; summarizing ").d(summarized).s(" tokens before message ").d(int64(cut)).s(" into at most ").d(pol.summaryRoom).
		s(" tokens and keeping ").d(int64(d.TailTurns)).s(" turns verbatim from message ").d(int64(cut)).
		s(" (").d(tail[k]).s(" tokens, tail budget ").d(budget).s(")")
	if tailPruned > 0 {
		rs = rs.s(", pruning ").d(tailPruned).s(" tokens of old tool outputs in the tail")
	}
	rs = rs.s(" → head ").d(head).s(" + summary ").d(pol.summaryRoom).s(" + tail ").d(tail[k]).s(" = ").d(after)
	if after > pol.trigger {
		rs = rs.s("; ").d(after).s(" is above the trigger ").d(pol.trigger).s(" (floor ").d(floor).s("): the next turns will trigger again")
	}
	resp.Reason = string(rs)
	return nil
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

// fill sets the dispositions: cut < 0 means no summary.
func fill(resp *compactorv1.PlanResponse, lay *layout, cut int, saved []int64) {
	for i, cl := range lay.class {
		var d compactorv1.Disposition
		switch {
		case cl == classDrop:
			d = compactorv1.Disposition_DISPOSITION_DROP
		case cl == classHead:
			d = compactorv1.Disposition_DISPOSITION_KEEP
		case cut >= 0 && i < cut: // the latest summary and active messages before the cut
			d = compactorv1.Disposition_DISPOSITION_SUMMARIZE
		case saved != nil && saved[i] > 0:
			d = compactorv1.Disposition_DISPOSITION_PRUNE
		default:
			d = compactorv1.Disposition_DISPOSITION_KEEP
		}
		resp.Dispositions[i] = d
	}
}

func windowParen(pol *policy) string {
	if pol.window > 0 {
		return fmt.Sprintf(" (window %d − reserve %d)", pol.window, pol.reserve)
	}
	return " (trigger_tokens, no window)"
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

// scaleSaving converts a saving estimated with the tokenizer to the message's actual token
// count (caller-supplied or provider-reported): saving × actual / estimate.
func scaleSaving(saving, actual, estimate int64) int64 {
	if estimate <= 0 || actual == estimate || saving <= 0 {
		return max(saving, 0)
	}
	return mulDiv(saving, actual, estimate)
}

// mulDiv returns a×b/c rounded to nearest for non-negative a, b and positive c, exactly.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	lo, carry := bits.Add64(lo, uint64(c)/2, 0)
	hi += carry
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, 1<<63-1))
}

// applyUsage replaces the counts of the sent messages of the prefix class covers so that
// they sum to reported, each in proportion to its own count (cumulative rounding, exact).
func applyUsage(tokens []int64, class []msgClass, reported int64) {
	var total int64
	for i, cl := range class {
		if cl != classDrop {
			total += tokens[i]
		}
	}
	if total <= 0 {
		return
	}
	var cum, prev int64
	for i, cl := range class {
		if cl == classDrop {
			continue
		}
		cum += tokens[i]
		next := mulDiv(cum, reported, total)
		tokens[i] = next - prev
		prev = next
	}
}
