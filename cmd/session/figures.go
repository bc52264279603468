package main

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/fidelity"
)

// Anthropic's prompt-cache prices, as multiples of the input price: what a request pays for
// the tokens of a cached prefix it reads, and for the tokens it writes to the cache (the
// 5-minute cache).
const (
	cacheReadPrice  = 0.1
	cacheWritePrice = 1.25
)

// cacheCost returns the input cost of reqs at the cache prices, in input-price tokens: each
// request reads its prefix shared with the previous request from the cache and writes the
// rest (actual); and the cost had each request extended the previous one (ideal), which
// reads min(L, L_prev) and writes what grew. The first request writes everything in both.
func cacheCost(reqs []request) (actual, ideal float64) {
	for i, r := range reqs {
		l := float64(r.tokens)
		if i == 0 {
			actual += cacheWritePrice * l
			ideal += cacheWritePrice * l
			continue
		}
		p, prev := float64(r.prefix), float64(reqs[i-1].tokens)
		actual += cacheReadPrice*p + cacheWritePrice*(l-p)
		ideal += cacheReadPrice*min(l, prev) + cacheWritePrice*max(0, l-prev)
	}
	return actual, ideal
}

// lineShare returns the share of lines hay holds verbatim (whitespace-normalised); 1 when
// there are none.
func lineShare(hay fidelity.Haystack, lines []string) float64 {
	if len(lines) == 0 {
		return 1
	}
	n := 0
	for _, l := range lines {
		if hay.Has(l) {
			n++
		}
	}
	return float64(n) / float64(len(lines))
}

// figures are what the end of one replay kept, and what its requests cost.
type figures struct {
	// requests is the mean over the session's requests of the share of each one's lines the
	// final conversation holds (1 when it has none); task the task's share (-1: no task).
	requests, task float64
	// claudeMD is the share of the CLAUDE.md block's lines the final conversation holds
	// (-1: no block).
	claudeMD float64
	// actual and ideal are the session's input cost at the cache prices (cacheCost).
	actual, ideal float64
}

// cost is actual over ideal (1 with no request).
func (f figures) cost() float64 {
	if f.ideal == 0 {
		return 1
	}
	return f.actual / f.ideal
}

// measureEnd computes a replay's figures: what its final conversation, as a model is sent it
// (engine.Sent, a summary's text included), holds of the session's requests and CLAUDE.md
// block, and the cost of its requests.
func measureEnd(s *session, tr trace) figures {
	f := figures{task: -1, claudeMD: -1}
	hay := sentHaystack(tr.final)
	f.requests = requestShare(hay, s.requests)
	if s.task >= 0 {
		f.task = lineShare(hay, s.requests[s.task].Lines)
	}
	if s.block != "" {
		f.claudeMD = lineShare(hay, s.blockLines)
	}
	f.actual, f.ideal = cacheCost(tr.requests)
	return f
}

// requestShare is the mean over reqs of the share of each one's lines hay holds (1 with no
// request).
func requestShare(hay fidelity.Haystack, reqs []fidelity.Request) float64 {
	if len(reqs) == 0 {
		return 1
	}
	sum := 0.0
	for _, r := range reqs {
		sum += lineShare(hay, r.Lines)
	}
	return sum / float64(len(reqs))
}

// sentHaystack is what a model is sent of msgs, for verbatim look-ups.
func sentHaystack(msgs []*compactorv1.Message) fidelity.Haystack {
	return fidelity.NewHaystack(nil, sentOf(msgs))
}

// keptBefore returns what msgs, held at turn t, show of the session's requests before t
// (the mean share of their lines) and of its CLAUDE.md block (-1: none).
func keptBefore(s *session, t int, msgs []*compactorv1.Message) (requests, claudeMD float64) {
	hay := sentHaystack(msgs)
	var reqs []fidelity.Request
	for _, r := range s.requests {
		if r.Index < t {
			reqs = append(reqs, r)
		}
	}
	claudeMD = -1
	if s.block != "" {
		claudeMD = lineShare(hay, s.blockLines)
	}
	return requestShare(hay, reqs), claudeMD
}

// billing is the summary input billed over the summary calls of a replay's sessions: the
// calls that billed any (the others were cache hits or local), and the sessions that
// compacted.
type billing struct {
	billed         float64 // compaction.billed, summed
	calls          int
	sessions       int
	uncached, read int64 // the calls' input billed at the input price, and read from the cache
	written        int64 // written to the cache
	// agentCalls are the calls sent as the agent's own request, instruction their summary
	// instructions' tokens; the other calls sent the summarizer's own prompt, billed ownBilled.
	agentCalls  int
	instruction int64
	ownBilled   float64
}

// summaryBilled sums the summary input billed over results.
func summaryBilled(results []result) billing {
	var b billing
	for _, r := range results {
		if !r.compacted() {
			continue
		}
		b.sessions++
		for _, c := range r.tr.compactions {
			if c.billed <= 0 {
				continue
			}
			b.calls++
			b.billed += c.billed
			b.uncached, b.read, b.written = b.uncached+c.uncached, b.read+c.read, b.written+c.written
			if c.asAgent {
				b.agentCalls++
				b.instruction += c.instruction
			} else {
				b.ownBilled += c.billed
			}
		}
	}
	return b
}

// perCall is n over the calls, 0 with none.
func perCall[T int64 | float64](n T, calls int) T { return n / T(max(calls, 1)) }
