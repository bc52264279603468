package engine

import (
	"fmt"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Options adjust a plan.
type Options struct {
	// Force summarizes even when the conversation is under the trigger (Compact's force).
	Force bool
	// Source is the hash (64 hex digits) under which the caller keeps the conversation as
	// it arrived (Compact's source), "" when it keeps none: the markers of the tool outputs
	// the plan prunes and the notes of those it cuts then say where the full output is
	// (message i of the source: OutputSource), and the plan counts them so.
	Source string
}

// Decision is a plan with what carrying it out needs beyond the PlanResponse.
type Decision struct {
	// Response is the plan as the Plan RPC returns it.
	Response *compactorv1.PlanResponse
	// Pruned lists the parts to replace by markers, in message and part order; only parts of
	// messages whose disposition is DISPOSITION_PRUNE. PruneAndCut applies them.
	Pruned []PrunedPart
	// Cuts lists the tool outputs cut to their head and tail (see CutPart), in message and
	// part order; PruneAndCut applies them too.
	Cuts []CutPart
	// TailTurns is the number of turns kept verbatim after the cut (SUMMARIZE only).
	TailTurns int
	// MarkerTokens is what the summary room holds for the source marker (SourceMarker) when
	// the compaction keeps a source (Options.Source, SUMMARIZE only): a bound of any marker's, or
	// the marker's own count when that bound would not fit the window; 0 when even that does
	// not, and the summary names no source.
	MarkerTokens int64
	// LeadingRequests is the number of user messages the tail opens with that are the user's
	// requests (SUMMARIZE only): with the requests kept verbatim, the user messages right
	// after the summary that its framing says are requests (SummaryMessage), so that the next
	// compaction reads them as such.
	LeadingRequests int
	// tokenizer is the policy's, which PruneAndCut cuts with.
	tokenizer tokenizer.ID
	// counted marks the messages whose count came from the caller (token_count) or from
	// reported_usage rather than the tokenizer; saved holds what pruning and cutting remove
	// from each, in the same units; split holds, for the messages a summary splits from their
	// standing instructions, the counts of the two parts (see Split). What Compact returns
	// carries those counts, so that a plan of it counts what this one did.
	counted   []bool
	saved     []int64
	splitHead []int64
	splitRest []int64
	// splitHost holds, per request, the tokens of its parts of transient host text that
	// keeping it verbatim leaves to the summary (see HostTokens); nil when none has any.
	splitHost []int64

	// For PrefixChain (SUMMARIZE only): the counter, the conversation and the content keys
	// Decide computed, so the chain is not hashed from the message contents a second time.
	counter *Counter
	msgs    []*compactorv1.Message
	keys    []contentKey
}

// PrefixChain returns the hash chain values h[0..cut] of a SUMMARIZE decision: h[0] is
// PrefixSeed and h[i+1] = SHA-256(h[i] ‖ Canon(msgs[i])), so h[k] identifies the prefix
// msgs[:k] (ids and token counts aside) in any process, and h[cut] = Response.prefix_hash.
// The values come from the Counter's memo and the content hashes Decide already computed. It
// returns nil for other actions.
func (d *Decision) PrefixChain() [][32]byte {
	if d.keys == nil {
		return nil
	}
	return d.counter.chain.upTo(&d.counter.keys, d.msgs, d.keys, int(d.Response.GetCutIndex()))
}

// Plan decides what a conversation needs under a policy (see Decide) and returns the
// response of the Plan RPC. msgs must have passed Limits.Validate. The response belongs to
// the caller: when c remembers the plan of the same request (see Counter), it is a copy.
func Plan(msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter) (*compactorv1.PlanResponse, error) {
	var d Decision
	if err := decide(msgs, p, c, Options{}, &d, false); err != nil {
		return nil, err
	}
	return d.Response, nil
}

// Decide plans a compaction. msgs must have passed Limits.Validate; c is the process's
// Counter (nil plans with a throw-away one, without the memo's benefit). It counts every
// message (token_count wins over the count; reported_usage replaces the counts of the prefix
// it covers, scaled so that the sent messages of the prefix sum to it), then decides as
// decide.go's comment says:
//
//  1. tokens_before ≤ trigger → ACTION_NONE (unless opt.Force);
//  2. pruning old tool outputs alone brings the conversation to the target, removing at least
//     prune.clear_at_least_tokens (by default what pays back the prompt cache it rewrites)
//     → ACTION_PRUNE;
//  3. otherwise ACTION_SUMMARIZE: the cut is the start of a turn such that the verbatim tail
//     (the active non-head messages from the cut on, after pruning) fits keep_recent_tokens
//     and the whole fits the target with as many turns as possible; among cuts whose tail is
//     at least half that long, the start of a user turn is preferred. Toward the target the
//     shape keeps fewer turns than keep_recent_turns and gives up half its summary room when
//     it must; the newest turn whole and the requests kept verbatim yield only to the
//     trigger. The latest summary and the active messages before the cut are summarized;
//     the tail is pruned.
//
// When even the least shape exceeds the usable window, it returns an *IrreducibleError
// (wrapping ErrIrreducible) instead of a plan, naming the head, standing instructions and
// newest request when they alone exceed it. When too few turns are active to summarize, the
// result prunes (or does nothing) if the pruned conversation fits, and is an
// *IrreducibleError otherwise; a conversation above the usable window is pruned even for
// less than clear_at_least_tokens. Policy errors are *ValidationError.
//
// Dispositions: compaction prompts and non-head messages before the latest summary DROP; head
// messages KEEP; the latest summary and active messages before the cut SUMMARIZE, or
// KEEP_REQUEST for the requests kept verbatim after the summary; active messages with pruned
// or cut parts PRUNE; the rest KEEP. The result is deterministic.
func Decide(msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter, opt Options) (*Decision, error) {
	d := new(Decision)
	if err := decide(msgs, p, c, opt, d, true); err != nil {
		return nil, err
	}
	return d, nil
}

// decide is Decide into *d, which is meaningful only when it returns nil. Unless withPruned,
// it leaves d.Pruned nil (Plan does not need it), and then allocates little more than the
// response. It is the plan's three steps in order: measure (measure.go), decide (decide.go)
// and write the response (response.go); between the first two, a conversation planned
// before under the same policy is answered from the plan memo (planmemo.go).
func decide(msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter, opt Options, d *Decision, withPruned bool) error {
	var pol policy
	if err := resolvePolicyInto(p, &pol); err != nil {
		return err
	}
	if c == nil {
		c = NewCounter(1 << 20)
	}
	n := len(msgs)
	if pol.usageCount > n {
		return Invalid("policy.reported_usage.message_count",
			fmt.Sprintf("covers %d messages but the conversation has %d", pol.usageCount, n))
	}
	sc := c.scratch.get()
	defer c.scratch.put(sc)

	// Plan answers a conversation it memoized with a copy of the plan it made before
	// under the same policy and caller token counts, if it still remembers it. Plan is the
	// one caller without withPruned, and it passes Options{}, so opt.Force is false here.
	remember := !withPruned
	need := needUncounted
	if remember {
		need = needToRecall
	}
	in, err := measure(c, msgs, pol.tokenizer, sc, measurement{}, need)
	if err != nil {
		return err
	}
	remember = remember && in.cv != nil
	var pk planKey
	if remember {
		pk = newPlanKey(&c.keys, in.cv.key, msgs, &pol)
		if r := c.plans.lookup(pk, &pol); r != nil {
			d.Response = r
			return nil
		}
	}
	if opt.Source != "" {
		if err := pol.keepSource(opt.Source, n); err != nil {
			return err
		}
	}
	cs, err := measureCosts(c, msgs, &in, &pol, opt.Force, withPruned, sc, make([]int64, n))
	if err != nil {
		return err
	}

	dc := deciding{msgs: msgs, pol: pol, opt: opt, lay: in.lay, counts: in.counts, costs: cs, sc: sc}
	dc.pol.target = pol.sessionTarget(cs.turn)
	sh := dc.decide()

	if err := dc.write(d, sh, withPruned); err != nil {
		return err
	}
	if sh.action == compactorv1.Action_ACTION_SUMMARIZE {
		cut := int(d.Response.CutIndex)
		d.Response.PrefixHash = HexHash(c.chain.at(&c.keys, msgs, in.keys, cut))
		if withPruned { // only Compact (through Decide) asks for PrefixChain; Plan drops d
			d.counter, d.msgs = c, msgs
			if in.cv != nil {
				d.keys = in.keys[:cut:cut] // the memoized conversation's: immutable, all valid
			} else {
				d.keys = append([]contentKey(nil), in.keys[:cut]...) // keys is pooled scratch
			}
		}
	}
	if remember {
		c.plans.store(pk, &pol, d.Response)
	}
	return nil
}

// HostTokens returns the tokens of message i's parts of transient host text that a
// compaction keeping it as a request verbatim (KeptRequest) folds into the summary: 0 for a
// message without such parts.
func (d *Decision) HostTokens(i int) int64 {
	if d.splitHost == nil {
		return 0
	}
	return d.splitHost[i]
}

// KeptRequest returns request i of the decided conversation, or m (that request as the
// compaction has it so far: split from its standing instructions, pruned), as a compaction
// keeps it verbatim after the summary: the user's words alone (RequestWords). When the
// message's count came from the caller or from reported_usage and parts were left out, it
// carries the count the plan gave it as its token_count.
func (d *Decision) KeptRequest(i int, m *compactorv1.Message) *compactorv1.Message {
	w := RequestWords(m)
	if w != m && d.counted != nil && d.counted[i] && d.splitRest != nil {
		w.TokenCount = d.splitRest[i]
	}
	return w
}

// Split returns message i of the decided conversation split from its standing instructions
// (SplitInstructions): the standing parts as a message of their own and the rest. When the
// message's count came from the caller or from reported_usage, each part carries the count
// the plan gave it as its token_count. For a message without standing instructions it
// returns nil and the message.
func (d *Decision) Split(i int) (standing, rest *compactorv1.Message) {
	standing, rest = SplitInstructions(d.msgs[i])
	if standing == nil || d.counted == nil || !d.counted[i] || d.splitHead == nil {
		return standing, rest
	}
	standing.TokenCount = d.splitHead[i]
	if messageFlags(rest)&flagHostParts == 0 {
		// (Else the plan's count of the rest is that of the request kept verbatim, without
		// the transient host text this rest still holds.)
		rest.TokenCount = d.splitRest[i]
	}
	return standing, rest
}
