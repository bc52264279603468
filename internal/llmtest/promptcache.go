package llmtest

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// Minimum cacheable prefixes and the read granularity, as the providers document them: an
// Anthropic cache write needs 1024 tokens up to its breakpoint; OpenAI caches prompts of 1024
// tokens and more, in steps of 128.
const (
	anthropicMinCache = 1024
	anthropicLookback = 20 // the blocks Anthropic looks back from a breakpoint for a hit
	openAIMinCache    = 1024
	openAICacheStep   = 128
)

// element is one unit of a request's prefix (a tool, a system block, a message): the chain
// hash of the prefix it ends, the tokens up to and including it, and whether it carries a
// cache marker.
type element struct {
	hash   [32]byte
	tokens int64
	marker bool
}

// usage is what a provider bills one request: input tokens not read from nor written to the
// cache, cache reads, cache writes.
type usage struct {
	input, cacheRead, cacheWrite int64
}

// promptCache is a provider's prompt cache as the fakes model it, per model: which prefixes
// it holds. Tokens are estimated at 4 bytes of canonical JSON each.
type promptCache struct {
	mu   sync.Mutex
	seen map[string]map[[32]byte]bool // model → prefix hashes held
}

func newPromptCache() *promptCache { return &promptCache{seen: map[string]map[[32]byte]bool{}} }

// elements returns the prefix elements of the JSON values vs, in order: each value's tokens
// estimated from its canonical form without cache markers, hashes chained.
func elements(vs []any) []element {
	out := make([]element, 0, len(vs))
	var h [32]byte
	var tokens int64
	for _, v := range vs {
		marker := stripMarkers(v)
		b, _ := json.Marshal(v) // map keys sorted: canonical
		h = sha256.Sum256(append(h[:], b...))
		tokens += int64(len(b)+3) / 4
		out = append(out, element{hash: h, tokens: tokens, marker: marker})
	}
	return out
}

// stripMarkers removes every cache_control member of v, reporting whether there was one.
func stripMarkers(v any) bool {
	found := false
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["cache_control"]; ok {
			delete(x, "cache_control")
			found = true
		}
		for _, c := range x {
			found = stripMarkers(c) || found
		}
	case []any:
		for _, c := range x {
			found = stripMarkers(c) || found
		}
	}
	return found
}

// anthropic bills a request as Anthropic does: the longest prefix held, ending at a
// breakpoint or within anthropicLookback elements before one, is read; the rest up to the
// last breakpoint is written (when it reaches anthropicMinCache), and held from then on at
// every breakpoint; what follows the last breakpoint is input.
func (c *promptCache) anthropic(model string, es []element) usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.model(model)
	var total int64
	if len(es) > 0 {
		total = es[len(es)-1].tokens
	}
	var u usage
	last := -1
	for m, e := range es {
		if !e.marker {
			continue
		}
		last = m
		for j := m; j >= 0 && j > m-anthropicLookback; j-- {
			if held[es[j].hash] {
				u.cacheRead = max(u.cacheRead, es[j].tokens)
				break
			}
		}
	}
	if last >= 0 && es[last].tokens >= anthropicMinCache {
		u.cacheWrite = es[last].tokens - u.cacheRead
		for _, e := range es[:last+1] {
			if e.marker {
				held[e.hash] = true
			}
		}
	}
	u.input = total - u.cacheRead - u.cacheWrite
	return u
}

// openAI bills a request as OpenAI does: the longest prefix seen before of at least
// openAIMinCache tokens is read (rounded down to openAICacheStep past the minimum); every
// prefix of the request is held from then on. OpenAI bills no cache writes.
func (c *promptCache) openAI(model string, es []element) usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.model(model)
	var u usage
	for _, e := range es {
		if held[e.hash] && e.tokens >= openAIMinCache {
			u.cacheRead = openAIMinCache + (e.tokens-openAIMinCache)/openAICacheStep*openAICacheStep
		}
		held[e.hash] = true
	}
	if len(es) > 0 {
		u.input = es[len(es)-1].tokens - u.cacheRead
	}
	return u
}

func (c *promptCache) model(m string) map[[32]byte]bool {
	held := c.seen[m]
	if held == nil {
		held = map[[32]byte]bool{}
		c.seen[m] = held
	}
	return held
}
