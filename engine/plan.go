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
	in, err := c.measure(msgs, pol.tokenizer, sc, measurement{}, need)
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
	if err := c.decideMeasured(msgs, pol, opt, sc, in, d, withPruned); err != nil {
		return err
	}
	if remember {
		c.storePlan(pk, pol, d.Response)
	}
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
