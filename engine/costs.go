package engine

import (
	"math/bits"
	"slices"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// The costs of a measured conversation (measure.go), the rest of a plan's first step: each
// message's tokens and the totals per region, and, for a conversation the plan acts on, the
// kinds of its user messages, its requests, what pruning would save and what a summary
// message costs beyond its text. Deciding (decide.go) reads nothing else.

// sizes is what a counted conversation costs: each message's tokens (the caller's
// token_count, else the count; rescaled to reported_usage over the prefix it covers) and
// the totals per region.
type sizes struct {
	tokens                        []int64
	head, summary, active, before int64
	// instructions is the head's messages of standing instructions alone (InHead).
	instructions int64
}

// pruning is what pruning old tool outputs would save.
type pruning struct {
	parts []PrunedPart // the parts pruning replaces (scratch memory)
	saved []int64      // per message, scaled to its token count and at most it (scratch)
	total int64        // the sum of saved
}

// costs is what deciding reads of a measured conversation: its sizes, and, when the plan acts
// on it (it is above its trigger, or the call is forced), the kind of each active user
// message, the active requests, what pruning would save and what a summary message costs
// beyond its text. What is in scratch memory is valid until the plan ends.
type costs struct {
	sz     sizes
	acting bool
	kinds  []UserKind // the kind of each active user message with text (see UserKind); 0 for the others
	reqs   []int32    // the active requests, oldest first
	pr     pruning
	sp     splits
	turn   int64 // the session's median tokens per turn (turnTokens)
	frame  int64 // the summary message's framing (SummaryFrameTokens)
	tc     tokenizer.Text
}

// splits is what a compaction's split of the active user messages that mix standing
// instructions with other parts costs (SplitInstructions): when it folds such a message or
// keeps it as a request, its standing parts go to the head as a message of their own. A
// request kept verbatim keeps only the user's words (RequestWords): its parts of transient
// host text are folded into the summary.
type splits struct {
	// head holds, per message, the tokens its standing parts take in the head once split
	// (scaled to its token count, with a message's overhead); nil when no message mixes.
	head []int64
	// rest holds, per message, what a request kept verbatim costs once split (the tokens
	// with head and its transient host parts taken out, and a message's overhead added for
	// the head's split): the messages' token counts when no message mixes or has such parts.
	rest []int64
	// host holds, per message, the tokens of its parts of transient host text a request
	// kept verbatim leaves to the summary (nil when no message has such parts).
	host  []int64
	total int64 // the sum of head
}

// measureCosts measures the costs of the conversation in (see costs) into tokens (one per
// message), counting the parts of the messages pruning needs that the caller counted.
// Unless withPruned, the pruned parts' tool names may be left out (see selectPruneParts).
func measureCosts(c *Counter, msgs []*compactorv1.Message, in *measurement, pol *policy, force, withPruned bool, sc *scratch, tokens []int64) (costs, error) {
	cs := costs{sz: measureSizes(msgs, in, pol, tokens)}
	cs.turn = turnTokens(msgs, &in.lay, tokens, sc)
	if cs.acting = force || cs.sz.before > pol.trigger; !cs.acting {
		return cs, nil
	}
	var err error
	if cs.tc, err = tokenizer.New(pol.tokenizer); err != nil {
		return costs{}, err
	}
	// Pruning, over the whole active region, needs the part counts of messages whose
	// total came from the caller: tool results, and the observations of agents that send
	// tool output as user messages.
	if !pol.pruneOff {
		if *in, err = measure(c, msgs, pol.tokenizer, sc, *in, needPrunable); err != nil {
			return costs{}, err
		}
	}
	cs.measurePruning(c, msgs, in, pol, sc, withPruned)
	if cs.sp, err = measureSplits(c, msgs, in, pol.tokenizer, cs.sz.tokens, sc); err != nil {
		return costs{}, err
	}
	cs.frame = c.frames.tokens(pol.tokenizer, cs.tc, len(msgs))
	return cs, nil
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
			if fl := in.counts[i].flags; fl&flagStandingOnly != 0 || fl&flagKnown == 0 && standingOnly(msgs[i]) {
				sz.instructions += tokens[i]
			}
		case classSummary:
			sz.summary += tokens[i]
		case classActive:
			sz.active += tokens[i]
		}
	}
	sz.before = sz.head + sz.summary + sz.active
	return sz
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

// userKinds returns the kind of each active user message with text (see UserKind; 0 for the
// other messages) and the indexes of the active requests, oldest first, into sc's memory,
// reading each message's text flags from its count when the count was made (its memo entry),
// else from the message.
func userKinds(msgs []*compactorv1.Message, in *measurement, sc *scratch) ([]UserKind, []int32) {
	sc.kinds = resize(sc.kinds, len(msgs))
	kinds, reqs := sc.kinds, sc.reqs[:0]
	flags := func(i int) textFlags {
		if fl := in.counts[i].flags; fl&flagKnown != 0 {
			return fl
		}
		return messageFlags(msgs[i])
	}
	eachUserKind(msgs, in.lay.summary+1, in.lay.summary < 0, flags, func(i int, k UserKind) {
		if in.lay.class[i] == classActive {
			kinds[i] = k
			if k == UserRequest {
				reqs = append(reqs, int32(i))
			}
		}
	})
	sc.reqs = reqs
	return kinds, reqs
}

// measurePruning measures, over the active region, the kind of each user message (the
// observations among them are pruned like tool outputs, the requests kept), then the
// prunable tool outputs and what pruning them would save in each message.
func (cs *costs) measurePruning(c *Counter, msgs []*compactorv1.Message, in *measurement, pol *policy, sc *scratch, withPruned bool) {
	cs.kinds, cs.reqs = userKinds(msgs, in, sc)
	tokens := cs.sz.tokens
	parts := selectPruneParts(msgs, &in.lay, in.counts, pol, &c.counts, cs.tc, sc, withPruned)
	if !pol.pruneOff {
		parts = selectObservations(parts, msgs, in.counts, cs.kinds, pol, &c.counts, cs.tc)
		sc.pruned = parts
	}
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
	cs.pr = pruning{parts: parts, saved: saved, total: total}
}

// measureSplits measures the splits of the active messages that mix standing instructions
// with other parts, or the user's words with transient host text (see splits), into sc's
// memory.
func measureSplits(c *Counter, msgs []*compactorv1.Message, in *measurement, id tokenizer.ID, tokens []int64, sc *scratch) (splits, error) {
	sp := splits{rest: tokens}
	for i, m := range msgs {
		if in.lay.class[i] != classActive || m.GetRole() != compactorv1.Role_ROLE_USER {
			continue
		}
		mc := in.counts[i]
		if mc.flags&flagKnown == 0 {
			mc.flags = messageFlags(m)
		}
		mixed := mc.flags&(flagStanding|flagStandingOnly) == flagStanding
		if !mixed && mc.flags&flagHostParts == 0 {
			continue
		}
		if mc.total == 0 { // the caller counted it, and nothing needed it counted yet
			tc, err := tokenizer.New(id)
			if err != nil {
				return splits{}, err
			}
			mc = countMessage(tc, m, c.counts.seed)
		}
		if sp.head == nil {
			sc.splitHead = resize(sc.splitHead, len(msgs))
			sc.splitRest = append(sc.splitRest[:0], tokens...)
			sp.head, sp.rest = sc.splitHead, sc.splitRest
		}
		var h, over int64
		if mixed {
			h, over = min(scaleSaving(int64(mc.standing), tokens[i], mc.total)+MessageOverheadTokens, tokens[i]), MessageOverheadTokens
		}
		host := scaleSaving(int64(mc.host), tokens[i], mc.total)
		if host > 0 {
			if sp.host == nil {
				sc.splitHost = resize(sc.splitHost, len(msgs))
				sp.host = sc.splitHost
			}
			sp.host[i] = host
		}
		sp.head[i] = h
		sp.rest[i] = max(tokens[i]-h-host+over, MessageOverheadTokens)
		sp.total += h
	}
	return sp, nil
}

// turnTokens returns the session's median tokens per turn over its active region, a turn
// being an assistant message with the messages that follow it up to the next one (what one
// model call adds to the conversation); 0 when it has fewer than MinTurnsForMedian turns.
func turnTokens(msgs []*compactorv1.Message, lay *layout, tokens []int64, sc *scratch) int64 {
	steps := sc.steps[:0]
	var cur int64
	open := false
	for i, cl := range lay.class {
		if cl != classActive {
			continue
		}
		if msgs[i].GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			if open {
				steps = append(steps, cur)
			}
			cur, open = 0, true
		}
		if open {
			cur += tokens[i]
		}
	}
	if open {
		steps = append(steps, cur)
	}
	sc.steps = steps
	if len(steps) < MinTurnsForMedian {
		return 0
	}
	slices.Sort(steps)
	return steps[len(steps)/2]
}
