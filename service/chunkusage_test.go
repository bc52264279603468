package service

import (
	"context"
	"math"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/summarize"
	"github.com/compactord/compactord/summary"
)

// billedSummarizer reads a few messages a call (Fit) and bills every call the same usage.
type billedSummarizer struct {
	calls int
	bill  summary.Output
	agent int // calls given the agent's request
}

func (b *billedSummarizer) Fit(req summarize.Request) int { return min(4, len(req.Messages)) }

func (b *billedSummarizer) Summarize(_ context.Context, req summarize.Request) (summarize.Result, error) {
	b.calls++
	if req.Agent != nil {
		b.agent++
	}
	out := b.bill
	out.Text = "the user asked for the tasks above."
	return summarize.Result{Output: out, Attempts: 1}, nil
}

func (b *billedSummarizer) Fingerprint() summarize.Fingerprint {
	return summarize.Fingerprint{Name: "billed", Model: "m"}
}

// chunkedSummary has sum write the summary of a forced compaction of a 20-turn conversation
// with agent as its agent_request, in chunks (sum's Fit), and returns the result.
func chunkedSummary(t *testing.T, sum *billedSummarizer, agent *compactorv1.AgentRequest) summarize.Result {
	t.Helper()
	s := New(Options{})
	msgs := irtest.Conversation(20)
	req := &compactorv1.CompactRequest{Messages: msgs, AgentRequest: agent,
		Policy: &compactorv1.Policy{ContextWindow: 8000, Prune: &compactorv1.PrunePolicy{Disabled: true}}}
	d, err := engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.newCompaction(req, msgs, d, sum, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.job(c.start())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.chunks(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	if sum.calls < 2 {
		t.Fatalf("%d calls; want the range in chunks", sum.calls)
	}
	return res
}

// TestChunksReportTheUsageOfEveryCall: a summary written in chunks reports what all its calls
// billed, cache reads and writes and the estimated cost as well as the input and output
// tokens, not the last call's alone.
func TestChunksReportTheUsageOfEveryCall(t *testing.T) {
	sum := &billedSummarizer{bill: summary.Output{InputTokens: 1000, CacheReadTokens: 600, CacheWriteTokens: 100, OutputTokens: 50, Cost: 0.25}}
	res := chunkedSummary(t, sum, nil)
	n := int64(sum.calls)
	want := summary.Output{InputTokens: 1000 * n, CacheReadTokens: 600 * n, CacheWriteTokens: 100 * n, OutputTokens: 50 * n}
	got := res.Output
	got.Text, got.Cost = "", 0
	if got != want || math.Abs(res.Cost-0.25*float64(n)) > 1e-9 {
		t.Errorf("%d calls reported %+v, cost %g; want %+v, cost %g", n, got, res.Cost, want, 0.25*float64(n))
	}
}

// TestChunksAreNotSentAsTheAgentsRequest: a chunk's call reads its chunk only. The agent's
// request holds the whole conversation up to the cut, so a chunk sent as it would summarize
// messages past the chunk's end, and that summary would be cached under the chunk's shorter
// prefix, for conversations that share the prefix and not what follows.
func TestChunksAreNotSentAsTheAgentsRequest(t *testing.T) {
	sum := &billedSummarizer{}
	chunkedSummary(t, sum, &compactorv1.AgentRequest{Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, Model: "m"})
	if sum.agent != 0 {
		t.Errorf("%d of %d chunk calls given the agent's request; want none", sum.agent, sum.calls)
	}
}
