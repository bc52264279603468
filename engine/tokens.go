package engine

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Token costs of the parts of a message that are not plain text: see the tokenizer package.
const (
	MessageOverheadTokens    = tokenizer.MessageOverheadTokens
	ToolCallOverheadTokens   = tokenizer.ToolCallOverheadTokens
	ToolResultOverheadTokens = tokenizer.ToolResultOverheadTokens
	ApprovalTokens           = tokenizer.ApprovalTokens
	DefaultImageTokens       = tokenizer.DefaultImageTokens
	DefaultFileTokens        = tokenizer.DefaultFileTokens
	PDFPageTokens            = tokenizer.PDFPageTokens
)

// Preload loads the named tokenizer's tables now instead of on first use, so that a server
// can pay the cost at start-up. An unknown name is a *ValidationError on policy.tokenizer.
func Preload(name string) error {
	id, ok := tokenizer.Parse(name)
	if !ok {
		return Invalid("policy.tokenizer", fmt.Sprintf("unknown tokenizer %q", name))
	}
	return tokenizer.Preload(id)
}

// DefaultMemoBytes is the memo budget NewCounter uses when given zero or less.
const DefaultMemoBytes = 64 << 20

// msgCount is the token count of one message. parts is set only for messages holding tool
// calls or results (what pruning needs), one entry per part.
type msgCount struct {
	total int64
	parts []partCount
	flags textFlags // what the rules of agent talk read of its text (flagKnown when read)
}

// partCount is the tokens of one part: total, and payload, the share pruning can remove
// (a tool result's output, a tool call's input). For a tool call, call identifies the tool
// name and input (a keyed hash) so that identical calls are found without rehashing.
type partCount struct {
	total, payload int32
	call           uint64
	// marker is, for a tool result with a tool name, the tokens of the marker that would
	// replace its output (0 when not computed).
	marker int32
}

// hasToolParts reports whether a message holds tool calls or results.
func hasToolParts(m *compactorv1.Message) bool {
	for _, p := range m.GetParts() {
		switch p.GetContent().(type) {
		case *compactorv1.Part_ToolCall, *compactorv1.Part_ToolResult:
			return true
		}
	}
	return false
}

func clamp32(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// countMessage counts m with t, ignoring m.token_count, keeping per-part counts for messages
// with tool parts (what pruning needs). seed keys the tool-call hashes.
func countMessage(t tokenizer.Text, m *compactorv1.Message, seed maphash.Seed) msgCount {
	mc := msgCount{flags: messageFlags(m)}
	if hasToolParts(m) {
		mc.parts = make([]partCount, len(m.GetParts()))
	}
	mc.total = MessageOverheadTokens
	for i, p := range m.GetParts() {
		total, payload := t.Part(p)
		mc.total += total
		if mc.parts != nil {
			mc.parts[i] = partCount{total: clamp32(total), payload: clamp32(payload)}
			if c := p.GetToolCall(); c != nil {
				mc.parts[i].call = callHash(seed, c)
			}
			if r := p.GetToolResult(); r != nil && r.GetToolName() != "" && payload > 2*MessageOverheadTokens {
				mc.parts[i].marker = clamp32(t.Count(outputMarker(r.GetToolName(), payload, false)))
			}
		}
	}
	return mc
}

// callHash identifies a tool call by its tool name and input.
func callHash(seed maphash.Seed, c *compactorv1.ToolCallPart) uint64 {
	h := maphash.String(seed, c.GetToolName())
	return bits.RotateLeft64(h*0x9E3779B97F4A7C15, 31) ^ maphash.String(seed, c.GetInputJson())
}

// Counter counts the tokens of messages. It memoizes counts by a hash of each message's
// content (never its id or token_count) in a bounded memo, so a conversation that grows by
// one turn costs only the new turn; it also memoizes whole conversations (their counts and
// turn structure), so planning a conversation seen before costs one hash of its content and
// one lookup, the plans Plan made for them, and prefix-hash chain steps. One Counter
// serves a whole process: it is safe for concurrent use, and its memory stays within the
// budget given to NewCounter (plus the tokenizer tables, loaded once per process). The zero
// value is not usable: create Counters with NewCounter.
type Counter struct {
	pool      sync.Pool // of *scratch
	seed      maphash.Seed
	init      uint64    // initial key-hash state, random per Counter
	keySecret [4]uint64 // content-key secrets, random per Counter
	counts    *memo[countKey, msgCount]
	convs     *memo[convKey, *conversation]
	plans     *memo[planKey, *rememberedPlan]
	chain     *memo[chainKey, [32]byte]
	prefixes  *memo[prefixKey, [32]byte]
	// frames memoizes SummaryFrameTokens by tokenizer and the number of digits of the count of
	// messages it names (0: not computed yet).
	frames [3][maxFrameDigits + 1]atomic.Int64
}

// maxFrameDigits bounds the digits of a message count the frames memo holds.
const maxFrameDigits = 12

// summaryFrame is SummaryFrameTokens(tc, covered), memoized: the framing only varies with
// the digits of covered.
func (c *Counter) summaryFrame(id tokenizer.ID, tc tokenizer.Text, covered int) int64 {
	digits := len(strconv.Itoa(covered))
	if int(id) >= len(c.frames) || digits > maxFrameDigits {
		return SummaryFrameTokens(tc, covered)
	}
	slot := &c.frames[id][digits]
	if n := slot.Load(); n > 0 {
		return n
	}
	n := SummaryFrameTokens(tc, covered)
	slot.Store(n)
	return n
}

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
	seed := maphash.MakeSeed()
	return &Counter{
		seed: seed,
		init: maphash.String(seed, "compactord"),
		keySecret: [4]uint64{
			maphash.String(seed, "compactord/content-key/0"),
			maphash.String(seed, "compactord/content-key/1"),
			maphash.String(seed, "compactord/content-key/2"),
			maphash.String(seed, "compactord/content-key/3"),
		},
		counts:   newMemo[countKey, msgCount](b * 7 / 16),
		convs:    newMemoShards[convKey, *conversation](b/4, convShards),
		plans:    newMemoShards[planKey, *rememberedPlan](b/16, planShards),
		chain:    newMemo[chainKey, [32]byte](b / 8),
		prefixes: newMemo[prefixKey, [32]byte](b / 8),
	}
}

type countKey struct {
	contentKey
	tk tokenizer.ID
}

func (k countKey) fp() uint64 { return k.h ^ bits.RotateLeft64(k.n, 23) ^ uint64(k.tk)<<3 }

type chainKey struct {
	prev [32]byte
	contentKey
}

func (k chainKey) fp() uint64 {
	return k.h ^ bits.RotateLeft64(k.n, 23) ^ binary.LittleEndian.Uint64(k.prev[:8])
}

const (
	countEntryBytes = 128 // key, value, slot and map overhead
	chainEntryBytes = 160
)

// Message returns the tokens of m under the named tokenizer ("" = o200k_base): m.token_count
// when it is greater than zero, otherwise compactord's count (memoized). The error is a
// *ValidationError for an unknown tokenizer name.
func (c *Counter) Message(m *compactorv1.Message, name string) (int64, error) {
	id, ok := tokenizer.Parse(name)
	if !ok {
		return 0, Invalid("policy.tokenizer", fmt.Sprintf("unknown tokenizer %q", name))
	}
	if m.GetTokenCount() > 0 {
		return m.GetTokenCount(), nil
	}
	tc, err := tokenizer.New(id)
	if err != nil {
		return 0, err
	}
	if id == tokenizer.Approx {
		return countMessage(tc, m, c.seed).total, nil
	}
	k := countKey{c.key(m), id}
	if mc, ok := c.counts.get(k.shard(), k); ok {
		return mc.total, nil
	}
	mc := countMessage(tc, m, c.seed)
	c.counts.put(k.shard(), k, mc, countEntryBytes+24*int64(len(mc.parts)))
	return mc.total, nil
}

// scratch is the working memory of one Decide call, reused through Counter.pool so that a
// warm plan allocates little more than its response.
type scratch struct {
	counts     []msgCount
	keys       []contentKey
	sel        []bool
	order      []int32
	class      []msgClass
	blocked    []int32
	turnStarts []int32
	results    []toolLink
	open       []openRef
	approvals  []openRef
	saved      []int64
	tail       []int64
	dupTable   []int32
	dup        []bool
	pruned     []PrunedPart
	reqs       []int32
	kinds      []UserKind
}

// resize returns s with length n and zeroed elements, reallocating only when it must.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	s = s[:n]
	clear(s)
	return s
}

func (c *Counter) getScratch() *scratch {
	if sc, ok := c.pool.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// putScratch drops the references sc holds (memo values, ids) and returns it to the pool.
func (c *Counter) putScratch(sc *scratch) {
	clear(sc.counts[:cap(sc.counts)])
	clear(sc.open[:cap(sc.open)])
	clear(sc.approvals[:cap(sc.approvals)])
	clear(sc.pruned[:cap(sc.pruned)])
	c.pool.Put(sc)
}

// fillCounts counts the messages need(i, msgs[i]) selects, memoized, into counts (and their
// content keys into keys, where not valid yet). Lookups take each memo shard's lock once.
func (c *Counter) fillCounts(msgs []*compactorv1.Message, id tokenizer.ID, counts []msgCount, keys []contentKey, sc *scratch, need func(int, *compactorv1.Message) bool) error {
	tc, err := tokenizer.New(id)
	if err != nil {
		return err
	}
	if id == tokenizer.Approx {
		for i, m := range msgs {
			if need(i, m) {
				counts[i] = countMessage(tc, m, c.seed)
			}
		}
		return nil
	}
	// Bucket message indexes by shard (counting sort), then visit each shard once.
	var start [memoShards + 1]int32
	if sc == nil {
		sc = new(scratch)
	}
	sc.sel = resize(sc.sel, len(msgs))
	sel := sc.sel
	for i, m := range msgs {
		if need(i, m) {
			sel[i] = true
			if !keys[i].valid() {
				keys[i] = c.key(m)
			}
			start[keys[i].shard()+1]++
		}
	}
	for s := 1; s <= memoShards; s++ {
		start[s] += start[s-1]
	}
	sc.order = resize(sc.order, int(start[memoShards]))
	order := sc.order
	fill := start
	for i := range msgs {
		if sel[i] {
			s := keys[i].shard()
			order[fill[s]] = int32(i)
			fill[s]++
		}
	}
	var misses []int32
	for s := 0; s < memoShards; s++ {
		lo, hi := start[s], start[s+1]
		if lo == hi {
			continue
		}
		sh := &c.counts.shards[s]
		sh.mu.Lock()
		for _, i := range order[lo:hi] {
			mc, ok := sh.lookup(countKey{keys[i], id})
			if ok {
				counts[i] = mc
			} else {
				misses = append(misses, i)
			}
		}
		sh.mu.Unlock()
	}
	for _, i := range misses {
		mc := countMessage(tc, msgs[i], c.seed)
		counts[i] = mc
		k := countKey{keys[i], id}
		c.counts.put(k.shard(), k, mc, countEntryBytes+24*int64(len(mc.parts)))
	}
	return nil
}
