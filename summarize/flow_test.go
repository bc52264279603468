package summarize

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
)

// countingSummarizer records what it was asked to summarize.
type countingSummarizer struct {
	Summarizer
	calls    atomic.Int32
	lastN    atomic.Int32
	anchored atomic.Bool
}

func (c *countingSummarizer) Summarize(ctx context.Context, req Request) (Result, error) {
	c.calls.Add(1)
	c.lastN.Store(int32(len(req.Messages)))
	c.anchored.Store(req.Anchor != "")
	return c.Summarizer.Summarize(ctx, req)
}

// summarizeCached is the summary step of Compact as the service is meant to wire it: look up
// the longest cached prefix of the summarized region in one round trip, summarize only what
// came after it (anchored on the cached summary), under the cross-replica lock.
func summarizeCached(ctx context.Context, c cache.Cache, s Summarizer, tenant, instructions string,
	msgs []*compactorv1.Message, start, cut int) (*cache.Entry, cache.Status, error) {
	fp := s.Fingerprint()
	scope := cache.Scope{Tenant: tenant, Summarizer: fp.String(), Instructions: instructions}
	chain := engine.HashChain(msgs[:cut]) // chain[k] identifies msgs[0:k]
	keys := make([]cache.Key, 0, cut-start)
	for k := start + 1; k <= cut; k++ {
		keys = append(keys, scope.KeyOf(chain[k]))
	}
	from, anchor := start, ""
	i, hit, err := c.Longest(ctx, keys)
	switch {
	case err == nil && i == len(keys)-1:
		return hit, cache.StatusHit, nil
	case err == nil:
		from, anchor = start+i+1, hit.Text // summarize msgs[from:cut] on top of the hit
	case errors.Is(err, cache.ErrNotFound):
	default: // unavailable: Fill computes without the cache
	}
	return cache.Fill(ctx, c, keys[len(keys)-1], cache.FillOptions{}, func(ctx context.Context) (*cache.Entry, error) {
		res, err := s.Summarize(ctx, Request{Messages: msgs[from:cut], Anchor: anchor, Instructions: instructions})
		if err != nil {
			return nil, err
		}
		return &cache.Entry{Text: res.Text, CoveredMessages: int32(cut - start), Model: res.Model,
			PromptVersion: res.PromptVersion, Summarizer: fp.Name, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens}, nil
	})
}

func TestCachedIncrementalSummaryFlow(t *testing.T) {
	ctx := context.Background()
	var msgs []*compactorv1.Message
	for i := range 12 {
		role := compactorv1.Role_ROLE_USER
		if i%2 == 1 {
			role = compactorv1.Role_ROLE_ASSISTANT
		}
		msgs = append(msgs, &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{
			Text: &compactorv1.TextPart{Text: fmt.Sprintf("message %d about file%d.go", i, i)}}}}})
	}
	c := cache.NewMemory(cache.MemoryOptions{})
	s := &countingSummarizer{Summarizer: NewExtractive("", 0, Options{})}

	// First compaction summarizes msgs[0:6].
	e, st, err := summarizeCached(ctx, c, s, "acme", "", msgs, 0, 6)
	if err != nil || st != cache.StatusMiss || s.lastN.Load() != 6 || s.anchored.Load() {
		t.Fatalf("first: %v %v, summarized %d anchored %v", st, err, s.lastN.Load(), s.anchored.Load())
	}
	// The same prefix again (another replica, a retry, a fork): a hit, no call.
	if _, st, err := summarizeCached(ctx, c, s, "acme", "", msgs, 0, 6); err != nil || st != cache.StatusHit || s.calls.Load() != 1 {
		t.Fatalf("repeat: %v %v, %d calls", st, err, s.calls.Load())
	}
	// The conversation grew: only msgs[6:10] are summarized, on top of the cached summary.
	e2, st, err := summarizeCached(ctx, c, s, "acme", "", msgs, 0, 10)
	if err != nil || st != cache.StatusMiss || s.lastN.Load() != 4 || !s.anchored.Load() {
		t.Fatalf("grown: %v %v, summarized %d anchored %v", st, err, s.lastN.Load(), s.anchored.Load())
	}
	for _, want := range []string{"message 0 about file0.go", "message 8 about file8.go"} {
		if !strings.Contains(e2.Text, want) {
			t.Errorf("incremental summary lacks %q:\n%s", want, e2.Text)
		}
	}
	if e2.CoveredMessages != 10 || e.CoveredMessages != 6 {
		t.Errorf("covered %d and %d", e.CoveredMessages, e2.CoveredMessages)
	}
	// Another tenant shares nothing; other instructions share nothing.
	if _, st, _ := summarizeCached(ctx, c, s, "globex", "", msgs, 0, 6); st != cache.StatusMiss || s.lastN.Load() != 6 {
		t.Errorf("other tenant: %v, summarized %d", st, s.lastN.Load())
	}
	if _, st, _ := summarizeCached(ctx, c, s, "acme", "focus on tests", msgs, 0, 6); st != cache.StatusMiss {
		t.Errorf("other instructions: %v", st)
	}
	if got := s.calls.Load(); got != 4 {
		t.Errorf("%d summarizer calls, want 4", got)
	}
}
