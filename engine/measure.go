package engine

import (
	"slices"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Measuring a conversation, the first step of a plan: what Plan and Decide know of it before
// deciding. measure counts the messages and reads the conversation's layout, through the
// Counter's memos (content keys, token counts, conversations seen before); measureCosts
// (costs.go) then derives what deciding reads.

// measurement is what a plan knows of one conversation's content whatever the policy: its
// layout (regions, turns, the tool results of the active region), and the token count and
// content key of each message. It comes from the memoized conversation cv, or is computed
// in scratch memory when cv is nil.
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

// countNeed selects the messages a plan needs counted.
type countNeed uint8

const (
	// needUncounted selects the messages without a caller token_count.
	needUncounted countNeed = iota
	// needPrunable selects the messages with a caller token_count that pruning may shorten:
	// those holding tool calls or results, and user messages (an agent's observations).
	// Pruning needs the tokenizer's counts of their parts, to estimate and scale savings.
	needPrunable
	// needToRecall is what a plan that may be recalled from the plan memo needs first:
	// needUncounted, or needPrunable when the caller counted every message. Finding the
	// plan takes the conversation's hash, which counting computes, so the parts pruning
	// would need are counted then rather than later: a plan the totals alone settle pays the
	// hash (a few µs on 200 messages), and every other plan of a conversation seen before is
	// a copy.
	needToRecall
)

func (nd countNeed) of(m *compactorv1.Message) bool {
	if nd == needUncounted {
		return m.GetTokenCount() <= 0
	}
	return m.GetTokenCount() > 0 && (hasToolParts(m) || m.GetRole() == compactorv1.Role_ROLE_USER)
}

// anyNeeds reports whether need selects some message of msgs.
func anyNeeds(msgs []*compactorv1.Message, need countNeed) bool {
	for _, m := range msgs {
		if need.of(m) {
			return true
		}
	}
	return false
}

// measure returns in (the zero measurement at first) with the messages need selects
// counted as well. The first call for a conversation hashes it and consults the conversation
// memo, unless the tokenizer is approx (not memoized) or no message needs counting (every
// count given by the caller). A memoized conversation is used as it is, or copied with the
// counts it lacks and stored again. Otherwise the layout and counts are computed in sc, and
// the conversation is published for the next plans when this is the second time the memo
// sees it: the first time it only records the key, so that conversations planned once (the
// usual growing conversation, planned once per new message) cost no copy.
func measure(c *Counter, msgs []*compactorv1.Message, id tokenizer.ID, sc *scratch, in measurement, need countNeed) (measurement, error) {
	if need == needToRecall {
		need = needUncounted
		if !anyNeeds(msgs, needUncounted) {
			need = needPrunable
		}
	}
	if in.keys == nil {
		sc.keys = resize(sc.keys, len(msgs))
		in.keys = sc.keys
	}
	cv := in.cv
	if cv == nil && !in.looked && id != tokenizer.Approx && anyNeeds(msgs, need) {
		in.looked = true
		in.key = c.keys.conversation(msgs, in.keys, id)
		cv, in.publish = c.convs.lookup(in.key)
	}
	if cv != nil {
		// The memoized conversation, or a copy with the counts it lacks that need selects,
		// which replaces it in the memo.
		missing := false
		for i := 0; i < len(msgs) && !cv.complete; i++ {
			if cv.counts[i].total == 0 && need.of(msgs[i]) {
				missing = true
				break
			}
		}
		if missing {
			counts := slices.Clone(cv.counts)
			err := c.counts.fill(&c.keys, msgs, cv.key.tk, counts, cv.keys, sc, func(i int, m *compactorv1.Message) bool {
				return counts[i].total == 0 && need.of(m)
			})
			if err != nil {
				return measurement{}, err
			}
			cv = c.convs.put(cv.key, cv.keys, counts, &cv.lay, true)
		}
		return measurement{lay: cv.lay, counts: cv.counts, keys: cv.keys, cv: cv, looked: true}, nil
	}
	if in.counts == nil {
		in.lay = analyze(msgs, sc)
		sc.counts = resize(sc.counts, len(msgs))
		in.counts = sc.counts
	}
	err := c.counts.fill(&c.keys, msgs, id, in.counts, in.keys, sc, func(_ int, m *compactorv1.Message) bool { return need.of(m) })
	if err != nil {
		return measurement{}, err
	}
	if in.publish {
		in.publish = false
		c.convs.put(in.key, in.keys, in.counts, &in.lay, false)
	}
	return in, nil
}
