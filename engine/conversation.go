package engine

import (
	"math/bits"
	"slices"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// conversation is what planning needs of a conversation's content whatever the policy: the
// content key and token count of each message and the layout (regions, turns, tool links).
// The Counter memoizes conversations by content, so that planning a conversation seen before
// costs one content hash of its messages and one lookup. A conversation is immutable once
// stored: everything that uses it (Decide, selectPruneParts, the prefix chain) only reads it.
type conversation struct {
	key convKey
	// keys holds every message's content key (all valid).
	keys []contentKey
	// counts holds the count of every message that some plan of this content needed: those
	// without a caller token_count, and those with one whose parts pruning needed. A zero
	// total means not counted (a count is at least MessageOverheadTokens).
	counts []msgCount
	// complete is set when every message is counted.
	complete bool
	lay      layout
	// size is what the memo charges for the conversation.
	size int64
}

// convKey identifies a conversation's content under one tokenizer: two independent folds of
// its messages' content keys, and its length.
type convKey struct {
	a, b uint64
	n    int
	tk   tokenizer.ID
}

// convShards is the number of shards of the conversation memo: few, so that each holds
// large conversations (a shard stores nothing larger than its share of the budget), and
// enough, as every plan takes one shard lock once.
const convShards = 4

func (k convKey) shard() int { return int(k.a >> 62) }

func (k convKey) fp() uint64 { return k.a ^ bits.RotateLeft64(k.b, 29) ^ uint64(k.n)<<8 ^ uint64(k.tk) }

// Memory charged for a conversation: the entry, its memo slot and index, then per message
// its key, count and class, per turn start, tool result and counted part their entries; and
// for a conversation seen once, whose key only is recorded, the memo slot and index.
const (
	convSeenBytes       = 96
	convEntryBytes      = 288
	convPerMessageBytes = 16 + 32 + 1
	convPerTurnBytes    = 4
	convPerResultBytes  = 16
	convPerPartBytes    = 24
)

// countNeed selects the messages a plan needs counted.
type countNeed uint8

const (
	// needUncounted selects the messages without a caller token_count.
	needUncounted countNeed = iota
	// needToolParts selects the messages with a caller token_count that hold tool calls or
	// results: pruning needs the counts of their parts.
	needToolParts
)

func (nd countNeed) of(m *compactorv1.Message) bool {
	if nd == needUncounted {
		return m.GetTokenCount() <= 0
	}
	return m.GetTokenCount() > 0 && hasToolParts(m)
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

// conversationKey computes the content key of every message of msgs into keys (which must
// have len(msgs) elements; keys already valid are kept) and folds them into the
// conversation's key under tokenizer id.
func (c *Counter) conversationKey(msgs []*compactorv1.Message, keys []contentKey, id tokenizer.ID) convKey {
	k := &c.keySecret
	a, b := c.init, k[1]
	for i, m := range msgs {
		if !keys[i].valid() {
			keys[i] = c.key(m)
		}
		hi, lo := bits.Mul64(keys[i].h^k[0], keys[i].n^a)
		a = hi ^ lo
		hi, lo = bits.Mul64(keys[i].h^k[2], b^k[3])
		b = hi ^ lo
	}
	return convKey{a: a, b: b, n: len(msgs), tk: id}
}

// extendConversation returns the measurement of the memoized conversation cv of msgs, with the
// messages need selects counted: cv itself when it counts them all, otherwise a copy with
// the missing counts added, which replaces cv in the memo.
func (c *Counter) extendConversation(msgs []*compactorv1.Message, cv *conversation, sc *scratch, need countNeed) (measurement, error) {
	missing := false
	for i := 0; i < len(msgs) && !cv.complete; i++ {
		if cv.counts[i].total == 0 && need.of(msgs[i]) {
			missing = true
			break
		}
	}
	if missing {
		counts := slices.Clone(cv.counts)
		err := c.fillCounts(msgs, cv.key.tk, counts, cv.keys, sc, func(i int, m *compactorv1.Message) bool {
			return counts[i].total == 0 && need.of(m)
		})
		if err != nil {
			return measurement{}, err
		}
		cv = &conversation{key: cv.key, keys: cv.keys, counts: counts, lay: cv.lay}
		c.storeConversation(cv)
	}
	return measurement{lay: cv.lay, counts: cv.counts, keys: cv.keys, cv: cv, looked: true}, nil
}

// publishConversation stores a copy of the conversation in computed in scratch memory, unless
// it is larger than the memo stores.
func (c *Counter) publishConversation(in measurement) {
	cv := &conversation{
		key:    in.key,
		keys:   in.keys,
		counts: in.counts,
		lay:    in.lay,
	}
	if conversationSize(cv) > c.convs.shards[0].limit {
		return
	}
	cv.keys = slices.Clone(in.keys)
	cv.counts = slices.Clone(in.counts)
	cv.lay = layout{
		summary:    in.lay.summary,
		class:      slices.Clone(in.lay.class),
		turnStarts: slices.Clone(in.lay.turnStarts),
		results:    slices.Clone(in.lay.results),
	}
	c.storeConversation(cv)
}

// conversationSize is what the memo charges for cv.
func conversationSize(cv *conversation) int64 {
	size := int64(convEntryBytes) + int64(len(cv.keys))*convPerMessageBytes +
		int64(len(cv.lay.turnStarts))*convPerTurnBytes + int64(len(cv.lay.results))*convPerResultBytes
	for _, mc := range cv.counts {
		size += int64(len(mc.parts)) * convPerPartBytes
	}
	return size
}

// storeConversation stores cv, replacing what the memo holds under its key.
func (c *Counter) storeConversation(cv *conversation) {
	cv.size = conversationSize(cv)
	cv.complete = !slices.ContainsFunc(cv.counts, func(mc msgCount) bool { return mc.total == 0 })
	c.convs.put(cv.key.shard(), cv.key, cv, cv.size)
}
