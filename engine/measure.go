package engine

import (
	"math/bits"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Measuring a conversation: what Plan and Decide know of it before deciding. The counts come
// from the tokenizer through the Counter's memo of messages (tokens.go), the content keys from
// contentkey.go, whole remembered conversations from conversation.go, chain steps from
// hash.go; this file puts them together in one measurement.

// measurement is everything the decision reads of one conversation: its layout (regions,
// turns, the tool results of the active region), and the token count and content key of
// each message; the prefix hash chain is derived from the keys on demand (prefixHash). It
// comes from the memoized conversation cv, or is computed in scratch memory when cv is nil.
type measurement struct {
	lay    layout
	counts []msgCount
	keys   []contentKey
	cv     *conversation
	// looked is set once the conversation memo was consulted; publish, when the memo had
	// seen the conversation once before, under key.
	looked, publish bool
	key             convKey
}

// measure returns in (the zero measurement at first) with the messages need selects
// counted as well. The first call for a conversation hashes it and consults the conversation
// memo, unless the tokenizer is approx (not memoized) or no message needs counting (every
// count given by the caller). A memoized conversation is used as it is, or copied with the
// counts it lacks and stored again. Otherwise the layout and counts are computed in sc, and
// the conversation is published for the next plans when this is the second time the memo
// sees it: the first time it only records the key, so that conversations planned once (the
// usual growing conversation, planned once per new message) cost no copy.
func (c *Counter) measure(msgs []*compactorv1.Message, id tokenizer.ID, sc *scratch, in measurement, need countNeed) (measurement, error) {
	if in.keys == nil {
		sc.keys = resize(sc.keys, len(msgs))
		in.keys = sc.keys
	}
	switch {
	case in.cv != nil:
		return c.extendConversation(msgs, in.cv, sc, need)
	case !in.looked && id != tokenizer.Approx && anyNeeds(msgs, need):
		in.looked = true
		in.key = c.conversationKey(msgs, in.keys, id)
		cv, seen := c.convs.get(in.key.shard(), in.key)
		switch {
		case cv != nil:
			return c.extendConversation(msgs, cv, sc, need)
		case seen:
			in.publish = true
		default:
			c.convs.put(in.key.shard(), in.key, nil, convSeenBytes)
		}
	}
	if in.counts == nil {
		in.lay = analyze(msgs, sc)
		sc.counts = resize(sc.counts, len(msgs))
		in.counts = sc.counts
	}
	err := c.fillCounts(msgs, id, in.counts, in.keys, sc, func(_ int, m *compactorv1.Message) bool { return need.of(m) })
	if err != nil {
		return measurement{}, err
	}
	if in.publish {
		in.publish = false
		c.publishConversation(in)
	}
	return in, nil
}

// prefixHash returns h[k] of the conversation's prefix hash chain (k ≤ len(msgs)), from the
// measured content keys and the Counter's memo of chain steps.
func (in *measurement) prefixHash(c *Counter, msgs []*compactorv1.Message, k int) [32]byte {
	return c.chainAt(msgs, in.keys, k)
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
func (c *Counter) measurePruning(msgs []*compactorv1.Message, in *measurement, pol *policy, sc *scratch, tokens []int64, kinds []UserKind, withPruned bool) (pruning, error) {
	tc, err := tokenizer.New(pol.tokenizer)
	if err != nil {
		return pruning{}, err
	}
	parts := selectPruneParts(msgs, &in.lay, in.counts, pol, c, tc, sc, withPruned)
	if !pol.pruneOff {
		parts = selectObservations(parts, msgs, &in.lay, in.counts, kinds, pol, c, tc)
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
	return pruning{parts: parts, saved: saved, total: total}, nil
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

// userKinds returns the kind of each active user message with text (see UserKind; 0 for the
// other messages), into sc's memory, reading each message's text flags from its count when
// the count was made (its memo entry), else from the message.
func userKinds(msgs []*compactorv1.Message, in *measurement, sc *scratch) []UserKind {
	sc.kinds = resize(sc.kinds, len(msgs))
	kinds := sc.kinds
	flags := func(i int) textFlags {
		if fl := in.counts[i].flags; fl&flagKnown != 0 {
			return fl
		}
		return messageFlags(msgs[i])
	}
	eachUserKind(msgs, in.lay.summary+1, in.lay.summary < 0, flags, func(i int, k UserKind) {
		if in.lay.class[i] == classActive {
			kinds[i] = k
		}
	})
	return kinds
}
