package engine

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Counting the tokens of messages (package tokenizer counts the parts), with the Counter's
// memo of counts by content key (tokenCounts): a conversation that grows by one turn costs
// only the new turn.

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

// msgCount is the token count of one message. parts is set only for messages holding tool
// calls or results (what pruning needs), one entry per part.
type msgCount struct {
	total int64
	parts []partCount
	flags textFlags // what the rules of agent talk read of its text (flagKnown when read)
	// standing is, for a user message mixing standing instructions with other parts
	// (flagStanding without flagStandingOnly), the tokens of its standing parts.
	standing int32
	// host is, for a user message with words and parts of transient host text
	// (flagHostParts), the tokens of those parts (hostPart).
	host int32
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
// with tool parts (what pruning needs), and reads its text flags (messageFlags). seed keys
// the tool-call hashes.
func countMessage(t tokenizer.Text, m *compactorv1.Message, seed maphash.Seed) msgCount {
	var mc msgCount
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
	mc.flags = messageFlags(m)
	mixed := mc.flags&(flagStanding|flagStandingOnly) == flagStanding
	if hosted := mc.flags&flagHostParts != 0; mixed || hosted {
		for _, p := range m.GetParts() {
			switch {
			case mixed && StandingPart(p):
				total, _ := t.Part(p)
				mc.standing += clamp32(total)
			case hosted && hostPart(p):
				total, _ := t.Part(p)
				mc.host += clamp32(total)
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

// tokenCounts is the Counter's memo of token counts: each message's count under each
// tokenizer by its content key, and the sizes of pruning markers by what they say
// (markerTokens). seed keys tool-call and marker hashes.
type tokenCounts struct {
	memo *memo[countKey, msgCount]
	seed maphash.Seed
}

func newTokenCounts(budget int64, seed maphash.Seed) tokenCounts {
	return tokenCounts{memo: newMemo[countKey, msgCount](budget), seed: seed}
}

type countKey struct {
	contentKey
	tk tokenizer.ID
}

func (k countKey) shard() int { return int(k.h >> 59) } // top 5 bits: 32 shards

func (k countKey) fp() uint64 { return k.h ^ bits.RotateLeft64(k.n, 23) ^ uint64(k.tk)<<3 }

const countEntryBytes = 128 // key, value, slot and map overhead

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
		return countMessage(tc, m, c.counts.seed).total, nil
	}
	k := countKey{c.keys.key(m), id}
	if mc, ok := c.counts.memo.get(k.shard(), k); ok {
		return mc.total, nil
	}
	mc := countMessage(tc, m, c.counts.seed)
	c.counts.memo.put(k.shard(), k, mc, countEntryBytes+24*int64(len(mc.parts)))
	return mc.total, nil
}

// fill counts the messages need(i, msgs[i]) selects into counts, from the memo where it
// holds them (and their content keys, from kr, into keys, where not valid yet). Lookups take
// each memo shard's lock once. Counts under approx are not memoized.
func (ct *tokenCounts) fill(kr *keyer, msgs []*compactorv1.Message, id tokenizer.ID, counts []msgCount, keys []contentKey, sc *scratch, need func(int, *compactorv1.Message) bool) error {
	tc, err := tokenizer.New(id)
	if err != nil {
		return err
	}
	if sc == nil {
		sc = new(scratch)
	}
	var misses []int32
	if id == tokenizer.Approx {
		misses = sc.misses[:0]
		for i, m := range msgs {
			if need(i, m) {
				misses = append(misses, int32(i))
			}
		}
		sc.misses = misses
	} else {
		misses = ct.lookup(kr, msgs, id, counts, keys, sc, need)
	}
	for _, i := range misses {
		mc := countMessage(tc, msgs[i], ct.seed)
		counts[i] = mc
		if id != tokenizer.Approx {
			k := countKey{keys[i], id}
			ct.memo.put(k.shard(), k, mc, countEntryBytes+24*int64(len(mc.parts)))
		}
	}
	return nil
}

// lookup sets counts[i] for the messages need(i, msgs[i]) selects that the memo holds under
// id, computing their content keys with kr into keys where not valid yet, and returns the
// indexes of the others (in sc's memory). It buckets the messages by memo shard (a counting sort), so that it
// takes each shard's lock once.
func (ct *tokenCounts) lookup(kr *keyer, msgs []*compactorv1.Message, id tokenizer.ID, counts []msgCount, keys []contentKey, sc *scratch, need func(int, *compactorv1.Message) bool) []int32 {
	var start [memoShards + 1]int32
	sc.sel = resize(sc.sel, len(msgs))
	sel := sc.sel
	for i, m := range msgs {
		if need(i, m) {
			sel[i] = true
			if !keys[i].valid() {
				keys[i] = kr.key(m)
			}
			start[countKey{keys[i], id}.shard()+1]++
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
			s := countKey{keys[i], id}.shard()
			order[fill[s]] = int32(i)
			fill[s]++
		}
	}
	misses := sc.misses[:0]
	if n := int(start[memoShards]); cap(misses) < n {
		misses = make([]int32, 0, n)
	}
	for s := 0; s < memoShards; s++ {
		lo, hi := start[s], start[s+1]
		if lo == hi {
			continue
		}
		sh := &ct.memo.shards[s]
		sh.mu.Lock()
		for _, i := range order[lo:hi] {
			if mc, ok := sh.lookup(countKey{keys[i], id}); ok {
				counts[i] = mc
			} else {
				misses = append(misses, i)
			}
		}
		sh.mu.Unlock()
	}
	sc.misses = misses
	return misses
}
