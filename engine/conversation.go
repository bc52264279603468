package engine

import (
	"math/bits"
	"slices"

	"github.com/compactord/compactord/engine/tokenizer"
)

// conversation is what planning needs of a conversation's content whatever the policy: the
// content key and token count of each message and the layout (regions, turns, tool links).
// The Counter memoizes conversations by content (convMemo), so that planning a conversation
// seen before costs one content hash of its messages and one lookup. A conversation is
// immutable once stored: everything that uses it (Decide, selectPruneParts, the prefix chain)
// only reads it.
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

// convMemo is the Counter's memo of measured conversations, by content.
type convMemo struct {
	memo *memo[convKey, *conversation]
}

// lookup returns the conversation memoized under k, if any, and whether k was seen before (a
// conversation seen once has its key recorded, without a value). It records the key of a
// conversation never seen.
func (cm *convMemo) lookup(k convKey) (cv *conversation, seen bool) {
	cv, seen = cm.memo.get(k.shard(), k)
	if !seen {
		cm.memo.put(k.shard(), k, nil, convSeenBytes)
	}
	return cv, seen
}

// put stores the conversation of key k (its content keys, counts and layout), replacing what
// the memo holds under k, and returns it. Unless own, the slices are scratch memory: they are
// copied, and nothing is stored (put returns nil) when the conversation is larger than the
// memo stores.
func (cm *convMemo) put(k convKey, keys []contentKey, counts []msgCount, lay *layout, own bool) *conversation {
	cv := &conversation{key: k, keys: keys, counts: counts, lay: *lay}
	cv.size = conversationSize(cv)
	if !own {
		if cv.size > cm.memo.shards[0].limit {
			return nil
		}
		cv.keys = slices.Clone(keys)
		cv.counts = slices.Clone(counts)
		cv.lay = layout{
			summary:    lay.summary,
			class:      slices.Clone(lay.class),
			turnStarts: slices.Clone(lay.turnStarts),
			results:    slices.Clone(lay.results),
		}
	}
	cv.complete = !slices.ContainsFunc(cv.counts, func(mc msgCount) bool { return mc.total == 0 })
	cm.memo.put(k.shard(), k, cv, cv.size)
	return cv
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
