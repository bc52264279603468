package engine

import "hash/maphash"

// Counter counts the tokens of messages and remembers what planning learned of them, so that
// a conversation that grows by one turn costs only the new turn and a conversation seen
// before costs one hash of its content and one lookup. It holds one part per concern, each
// in its own file:
//
//   - content keys: a keyed hash of each message's content (never its id or token_count),
//     and the keys folded from them (contentkey.go);
//   - token counts, memoized by content key (tokens.go), and the sizes of pruning markers
//     (prune.go's markerTokens);
//   - the size of the summary message's framing (summary.go);
//   - the prefix hash chain, its steps and values memoized (hash.go);
//   - whole measured conversations, their counts and turn structure (conversation.go);
//   - the plans Plan made for those conversations (planmemo.go);
//   - the working memory of plans, reused (scratch.go).
//
// One Counter serves a whole process: it is safe for concurrent use, and its memory stays
// within the budget given to NewCounter (plus the tokenizer tables, loaded once per process).
// The zero value is not usable: create Counters with NewCounter.
type Counter struct {
	keys    keyer
	counts  tokenCounts
	frames  frameMemo
	chain   prefixChain
	convs   convMemo
	plans   planMemo
	scratch scratchPool
}

// DefaultMemoBytes is the memo budget NewCounter uses when given zero or less.
const DefaultMemoBytes = 64 << 20

// NewCounter returns a Counter whose memo holds at most about memoBytes bytes (entries are
// charged an estimate of their size including map overhead); memoBytes ≤ 0 means
// DefaultMemoBytes. The budget is split: 7/16 to the token counts of messages; 4/16 to whole
// conversations (each message's count and content hash and the turn structure, about 100
// bytes per message, so that planning a conversation seen before costs one lookup); 1/16 to
// the plans Plan made for those conversations (about 12 bytes per message); 2/16 each to
// hash-chain steps and prefix hashes. A conversation or plan larger than a quarter of its
// share is not memoized as a whole; its messages still are.
func NewCounter(memoBytes int) *Counter {
	if memoBytes <= 0 {
		memoBytes = DefaultMemoBytes
	}
	b := int64(memoBytes)
	return &Counter{
		keys:   newKeyer(maphash.MakeSeed()),
		counts: newTokenCounts(b*7/16, maphash.MakeSeed()),
		chain:  newPrefixChain(b/8, b/8),
		convs:  convMemo{newMemoShards[convKey, *conversation](b/4, convShards)},
		plans:  planMemo{newMemoShards[planKey, *rememberedPlan](b/16, planShards)},
	}
}

// MemoStats reports what c's memo holds: its entries and the bytes charged for them (the
// estimate NewCounter's budget bounds), summed over all its parts. It is safe for concurrent
// use and locks each shard only briefly, so it can back a metrics gauge.
func (c *Counter) MemoStats() (entries int, bytes int64) {
	for _, s := range []func() (int, int64){c.counts.memo.stats, c.convs.memo.stats, c.plans.memo.stats,
		c.chain.steps.stats, c.chain.values.stats} {
		n, b := s()
		entries += n
		bytes += b
	}
	return entries, bytes
}
