package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summarize"
	"github.com/compactord/compactord/summary"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Incremental summaries: a range larger than one call of the summarizer reads
// (summarize.Fit: an LLM summarizer's max_input_tokens) is summarized in chunks, oldest
// first, each call given the summary so far as its anchor. Each chunk's summary is checked
// against the range it now stands for and cached under its own prefix, so that a later
// compaction of a longer prefix, or this one retried after a failed chunk, builds on it and
// summarizes only what follows.

// chunkGrid and maxGridCandidates: a chunk ends, when it can, at a prefix that is a multiple
// of chunkGrid messages, and the lookup of a summary to build on (lookup.go) tries, besides
// the maxAnchorCandidates latest prefixes, the maxGridCandidates latest such prefixes before
// them: a compaction far past a chunk (a retry after a chunk failed, with hundreds of
// messages after it) still finds it.
const (
	chunkGrid         = 16
	maxGridCandidates = 1024
)

// maxChunks bounds the calls one summary makes: the last one reads all that is left,
// shortened to fit its input bound (engine.FitSummaryPrompt). A request's size bounds the
// chunks long before, unless the bound is configured far below the summary room.
const maxChunks = 64

// Span attributes of a chunked summary: counts and positions, never content.
const (
	// attrChunks is, on the server span, the calls a written summary took (1 unchunked).
	attrChunks = attribute.Key("compactor.summary.chunks")
	// attrChunk, attrChunkFirst and attrChunkEnd are, on a chunk's summarization span, its
	// number (1-based), the position of its first message, and the prefix it ends.
	attrChunk      = attribute.Key("compactor.summarize.chunk")
	attrChunkFirst = attribute.Key("compactor.summarize.chunk.first")
	attrChunkEnd   = attribute.Key("compactor.summarize.chunk.end")
)

// chunks has the summarizer write j's summary: in one call when the summarizer reads j
// whole, else chunk by chunk (see the file's doc). The result is the last call's summary,
// unchecked (summarize checks it against the whole range), with the usage of every call.
func (c *compaction) chunks(ctx context.Context, j summaryJob) (summarize.Result, error) {
	ins := c.req.GetInstructions()
	kept := make(map[*compactorv1.Message]bool, len(j.kept))
	for _, m := range j.kept {
		kept[m] = true
	}
	anchor, anchorTokens := j.anchor, c.s.textMessageTokens(j.anchor, c.tokenizer())
	replaced := anchorTokens // what the summary so far stands for
	var spent summary.Output // the usage of the chunks summarized so far
	var ends []bool          // summarize.TurnEnds of j.in, once chunked
	for start, n := 0, 1; ; n++ {
		end := len(j.in)
		if n < maxChunks {
			end = start + max(1, summarize.Fit(c.sum, summarize.Request{Count: c.count,
				SummaryInput: engine.SummaryInput{Messages: j.in[start:], Positions: j.pos[start:], Kept: j.kept, Anchor: anchor, Instructions: ins,
					TaskInHead: c.headTask}}))
		}
		if end < len(j.in) {
			if ends == nil {
				ends = summarize.TurnEnds(j.in)
			}
			end = onGrid(j, ends, start, end)
		}
		if n == 1 && end == len(j.in) {
			trace.SpanFromContext(ctx).SetAttributes(attrChunks.Int(1))
			return c.call(ctx, j)
		}
		cj := c.chunkJob(j, start, end, kept)
		cj.anchor, cj.read = anchor, cj.read+anchorTokens
		replaced += cj.inTokens
		cj.inTokens = replaced
		cj.attrs = []attribute.KeyValue{attrChunk.Int(n), attrChunkFirst.Int(j.pos[start]), attrChunkEnd.Int(cj.end)}
		res, err := c.call(ctx, cj)
		if err != nil {
			return res, fmt.Errorf("%w (chunk %d, messages %d to %d)", err, n, j.pos[start], cj.end-1)
		}
		if end == len(j.in) {
			trace.SpanFromContext(ctx).SetAttributes(attrChunks.Int(n))
			addUsage(&res.Output, spent) // the summary's usage: every chunk's
			return res, nil
		}
		addUsage(&spent, res.Output)
		anchor = c.chunkDone(ctx, cj, res.Output, end > j.released)
		anchorTokens, start = c.s.textMessageTokens(anchor, c.tokenizer()), end
	}
}

// chunkJob is the call that reads j.in[start:end]: the summary of msgs[0:end'] (end' the
// prefix the chunk ends, or the cut for the last chunk) within j's budget. Its inTokens are
// the tokens of the range it adds to what it stands for, its read those it reads; the anchor
// is the caller's.
func (c *compaction) chunkJob(j summaryJob, start, end int, kept map[*compactorv1.Message]bool) summaryJob {
	cj := summaryJob{in: j.in[start:end], pos: j.pos[start:end], budget: j.budget, end: c.cut, chunk: true}
	if end < len(j.in) {
		cj.end = j.pos[end-1] + 1
	}
	for i, m := range cj.in {
		t := c.plan.GetMessageTokens()[cj.pos[i]]
		cj.read += t
		if kept[m] {
			cj.kept = append(cj.kept, m)
			cj.inTokens += c.d.HostTokens(cj.pos[i]) // the host's text beside the words it keeps (as job)
		} else {
			cj.inTokens += t
		}
	}
	return cj
}

// chunkDone checks out, the summary of the chunk cj, against the range it stands for, and
// caches it under its prefix (see storeChunk) when it is a summary of that prefix (prefix:
// it folded in every request its base released) and pays for itself there (at most
// maxSummaryRatio of the tokens it stands for). It returns the checked text: the next
// chunk's anchor.
func (c *compaction) chunkDone(ctx context.Context, cj summaryJob, out summary.Output, prefix bool) string {
	text, rep := c.check(out.Text, cj.end, int(cj.budget), c.count)
	if prefix && float64(c.count(text)) <= c.s.maxSummaryRatio*float64(cj.inTokens) {
		out.Text = text
		c.storeChunk(ctx, cj.end, out, rep)
	}
	return text
}

// storeChunk caches out, the checked summary of msgs[0:end] a chunked summary wrote on its
// way, under that prefix, unless an entry is there already (it may serve compactions this
// one does not) or the summary is a fallback's (never cached).
func (c *compaction) storeChunk(ctx context.Context, end int, out summary.Output, rep summary.Check) {
	if c.bypass {
		return
	}
	key := c.scope(ctx).Keys(c.chain[end : end+1])[0]
	if _, err := c.s.cache.Get(ctx, key); !errors.Is(err, cache.ErrNotFound) {
		return
	}
	var kept []int32
	for _, k := range c.kept {
		if int(k) < end {
			kept = append(kept, k)
		}
	}
	_ = c.s.cache.Set(ctx, key, &cache.Entry{Output: out, Summarizer: c.sum.Fingerprint().Name,
		CoveredMessages: int32(end), Kept: kept, Room: c.room, Created: time.Now().UTC(), Check: rep})
}

// scope is the cache scope of this compaction's summaries.
func (c *compaction) scope(ctx context.Context) cache.Scope {
	return cache.Scope{Tenant: tenant(ctx), Summarizer: c.sum.Fingerprint().String(), Instructions: c.req.GetInstructions()}
}

// addUsage adds the tokens and cost of what p cost to o's.
func addUsage(o *summary.Output, p summary.Output) {
	o.InputTokens += p.InputTokens
	o.OutputTokens += p.OutputTokens
	o.CacheReadTokens += p.CacheReadTokens
	o.CacheWriteTokens += p.CacheWriteTokens
	o.Cost += p.Cost
}

// onGrid moves the end of the chunk j.in[start:end] back to the last turn end whose prefix is
// a multiple of chunkGrid, when there is one in its second half (so a later lookup finds the
// chunk's summary; see chunkGrid); else it leaves it.
func onGrid(j summaryJob, ends []bool, start, end int) int {
	for k := end; k > start+(end-start)/2 && k > j.released; k-- {
		if ends[k-1] && (j.pos[k-1]+1)%chunkGrid == 0 {
			return k
		}
	}
	return end
}

// candidates are the prefixes whose cached summaries a summary of msgs[0:cut] may build on,
// ascending, as their chain values: before lo, the maxGridCandidates latest multiples of
// chunkGrid after the conversation's latest summary (grid), then every prefix from lo to
// the cut (the maxAnchorCandidates latest).
func (c *compaction) candidates(lo int) (grid []int, chain [][32]byte) {
	first := max(int(c.plan.GetSummaryIndex())+1, 1)
	for g := max((lo-1)/chunkGrid-maxGridCandidates+1, (first+chunkGrid-1)/chunkGrid) * chunkGrid; g < lo; g += chunkGrid {
		grid = append(grid, g)
	}
	if len(grid) == 0 {
		return nil, c.chain[lo : c.cut+1]
	}
	chain = make([][32]byte, 0, len(grid)+c.cut+1-lo)
	for _, g := range grid {
		chain = append(chain, c.chain[g])
	}
	return grid, append(chain, c.chain[lo:c.cut+1]...)
}

// prefixAt is the prefix of candidate i (see candidates).
func prefixAt(grid []int, lo, i int) int {
	if i < len(grid) {
		return grid[i]
	}
	return lo + i - len(grid)
}
