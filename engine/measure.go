package engine

import (
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
