package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/summarize"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/metadata"
)

// TenantMetadataKey is the request metadata key naming the caller's tenant. Summaries are
// cached per tenant: one tenant can never read, or learn the existence of, another's.
const TenantMetadataKey = "x-compactor-tenant"

// Span attributes Compact sets on the server span and on the summarization span, besides
// cache.AttrHit (compactor.cache.hit).
const (
	attrCacheStatus  = attribute.Key("compactor.cache.status")
	attrPrefixHash   = attribute.Key("compactor.prefix_hash")
	attrTokensBefore = attribute.Key("compactor.tokens.before")
	attrTokensAfter  = attribute.Key("compactor.tokens.after")
	attrAction       = attribute.Key("compactor.action")
)

// maxAnchorCandidates bounds how many earlier prefixes one Compact looks up in the cache
// (one MGET) when searching for a summary to build on.
const maxAnchorCandidates = 256

// errSummaryRejected marks a summary that failed validation: it did not shrink its input
// enough to be worth a compaction. It wraps summarize.ErrUnavailable (UNAVAILABLE).
var errSummaryRejected = fmt.Errorf("%w: summary rejected", summarize.ErrUnavailable)

// tenant returns the tenant named in the request metadata, or "" (the anonymous tenant).
func tenant(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(TenantMetadataKey); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Compact implements CompactorService.Compact: Plan, then prune, then (for
// ACTION_SUMMARIZE) summarize the latest summary and the active messages before the cut,
// reusing the cache, and return head + [compact prompt] + summary + tail.
func (s *Server) Compact(ctx context.Context, req *compactorv1.CompactRequest) (*compactorv1.CompactResponse, error) {
	msgs := req.GetMessages()
	if err := s.validate(msgs); err != nil {
		return nil, toStatus(err)
	}
	sum, err := s.summarizers.Get(req.GetSummarizer())
	if err != nil {
		return nil, toStatus(err)
	}
	d, err := engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: req.GetForce()})
	if err != nil {
		return nil, toStatus(err)
	}
	plan := d.Response
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attrAction.String(plan.GetAction().String()),
		attrTokensBefore.Int64(plan.GetTokensBefore()), attrTokensAfter.Int64(plan.GetTokensAfter()))
	resp := &compactorv1.CompactResponse{Plan: plan}
	if plan.GetAction() == compactorv1.Action_ACTION_NONE {
		return resp, nil
	}
	pruned := engine.ApplyPrune(msgs, d)
	if plan.GetAction() == compactorv1.Action_ACTION_PRUNE {
		s.metrics.AddPrunedTokens(int(plan.GetPrunedTokens()))
		s.metrics.ObserveTokens(int(plan.GetTokensBefore()), int(plan.GetTokensAfter()))
		resp.Compacted = true
		resp.Messages = pruned
		return resp, nil
	}

	c := compaction{s: s, req: req, msgs: msgs, plan: plan, sum: sum, cut: int(plan.GetCutIndex()), chain: d.PrefixChain()}
	entry, cacheStatus, err := c.summary(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp.CacheStatus = cacheStatus
	span.SetAttributes(cache.AttrHit.Bool(cacheStatus == compactorv1.CacheStatus_CACHE_STATUS_HIT),
		attrCacheStatus.String(cacheStatus.String()), attrPrefixHash.String(plan.GetPrefixHash()))

	out := make([]*compactorv1.Message, 0, len(msgs)-c.cut+8)
	for i := range c.cut {
		if plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_KEEP {
			out = append(out, pruned[i]) // the head: system, prefaces, pinned
		}
	}
	if req.GetEmitCompactPrompt() {
		out = append(out, compactPromptMessage(req.GetInstructions()))
	}
	out = append(out, engine.SummaryMessage(entry.Text, c.cut))
	out = append(out, pruned[c.cut:]...)

	s.metrics.AddPrunedTokens(int(plan.GetPrunedTokens()))
	s.metrics.ObserveTokens(int(plan.GetTokensBefore()), int(plan.GetTokensAfter()))
	resp.Compacted = true
	resp.Messages = out
	resp.Summary = &compactorv1.Summary{
		Text:            entry.Text,
		Summarizer:      entry.Summarizer,
		Model:           entry.Model,
		PromptVersion:   entry.PromptVersion,
		InputTokens:     entry.InputTokens,
		OutputTokens:    entry.OutputTokens,
		CoveredMessages: entry.CoveredMessages,
	}
	return resp, nil
}

// compaction is one summarization of msgs[0:cut].
type compaction struct {
	s    *Server
	req  *compactorv1.CompactRequest
	msgs []*compactorv1.Message
	plan *compactorv1.PlanResponse
	sum  summarize.Summarizer
	cut  int
	// chain is h[0..cut] of the prefix hash chain.
	chain [][32]byte
}

// summary returns the summary of msgs[0:cut] and how the cache served it: the exact prefix
// from the cache, or a new summary built on the longest cached earlier prefix (or on the
// conversation's latest summary), computed once across replicas and stored.
func (c *compaction) summary(ctx context.Context) (*cache.Entry, compactorv1.CacheStatus, error) {
	scope := cache.Scope{Tenant: tenant(ctx), Summarizer: c.sum.Fingerprint().String(), Instructions: c.req.GetInstructions()}

	// Candidate prefixes: every length after the latest summary up to the cut, newest last.
	lo := min(max(int(c.plan.GetSummaryIndex())+1, 1, c.cut-maxAnchorCandidates+1), c.cut)
	keys := scope.KeysOf(c.chain[lo : c.cut+1])
	key := keys[len(keys)-1]

	from, anchor := int(c.plan.GetSummaryIndex())+1, ""
	if si := c.plan.GetSummaryIndex(); si >= 0 {
		anchor = engine.SummaryText(c.msgs[si])
	}
	idx, found, err := c.s.cache.Longest(ctx, keys)
	switch {
	case err == nil && idx == len(keys)-1:
		c.s.metrics.CacheLookup(metrics.CacheHit)
		return found, compactorv1.CacheStatus_CACHE_STATUS_HIT, nil
	case err == nil:
		from, anchor = lo+idx, found.Text // build on the longest cached prefix
		c.s.metrics.CacheLookup(metrics.CacheMiss)
	case errors.Is(err, cache.ErrNotFound):
		c.s.metrics.CacheLookup(metrics.CacheMiss)
	default:
		c.s.metrics.CacheLookup(metrics.CacheUnavailable)
		e, err := c.summarize(ctx, from, anchor)
		return e, compactorv1.CacheStatus_CACHE_STATUS_UNAVAILABLE, err
	}

	// One computation per key in this process (singleflight), and one across replicas
	// (cache.Fill's lock). Each caller gives up at its own deadline; the computation runs to
	// the deadline of the caller that started it, and a caller that joined a computation
	// which ran out of its starter's time starts a new one.
	for {
		led := false // set when this caller's function is the one that runs
		ch := c.s.flight.DoChan(key.String(), func() (any, error) {
			led = true
			fctx := context.WithoutCancel(ctx)
			if dl, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				fctx, cancel = context.WithDeadline(fctx, dl)
				defer cancel()
			}
			e, st, err := cache.Fill(fctx, c.s.cache, key, c.s.fill, func(ctx context.Context) (*cache.Entry, error) {
				return c.summarize(ctx, from, anchor)
			})
			return filled{e, st}, err
		})
		var r singleflight.Result
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("compact: waiting for the summary: %w", ctx.Err())
		case r = <-ch:
		}
		if r.Err != nil {
			if !led && ctx.Err() == nil && (errors.Is(r.Err, context.DeadlineExceeded) || errors.Is(r.Err, context.Canceled)) {
				continue // the starter's time ran out, not ours
			}
			return nil, 0, r.Err
		}
		f := r.Val.(filled)
		st := compactorv1.CacheStatus_CACHE_STATUS_MISS
		switch {
		case f.status == cache.StatusHit || !led:
			st = compactorv1.CacheStatus_CACHE_STATUS_HIT
		case f.status == cache.StatusUnavailable:
			st = compactorv1.CacheStatus_CACHE_STATUS_UNAVAILABLE
		}
		return f.entry, st, nil
	}
}

type filled struct {
	entry  *cache.Entry
	status cache.Status
}

// summarize summarizes the summarized messages of msgs[from:cut] on top of anchor and
// validates the result: it must be non-empty and at most the configured share of its input.
func (c *compaction) summarize(ctx context.Context, from int, anchor string) (*cache.Entry, error) {
	tok := c.req.GetPolicy().GetTokenizer()
	var (
		in       []*compactorv1.Message
		inTokens = c.s.textTokens(anchor, tok)
	)
	for i := from; i < c.cut; i++ {
		if c.plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_SUMMARIZE &&
			c.msgs[i].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			in = append(in, c.msgs[i])
			inTokens += c.plan.GetMessageTokens()[i]
		}
	}
	name := c.s.summarizerName(c.req.GetSummarizer())
	start := time.Now()
	res, err := c.sum.Summarize(ctx, summarize.Request{
		Attributes: []attribute.KeyValue{attrPrefixHash.String(c.plan.GetPrefixHash()), cache.AttrHit.Bool(false),
			attrTokensBefore.Int64(c.plan.GetTokensBefore()), attrTokensAfter.Int64(c.plan.GetTokensAfter())},
		Messages:        in,
		Anchor:          anchor,
		Instructions:    c.req.GetInstructions(),
		MaxOutputTokens: c.req.GetPolicy().GetSummaryMaxTokens(),
		Count:           func(s string) int { return int(c.s.textTokens(s, tok)) },
	})
	if err == nil {
		if out := c.s.textTokens(res.Text, tok); float64(out) > c.s.maxSummaryRatio*float64(inTokens) {
			err = fmt.Errorf("%w: the summary has %d tokens, more than %.2f × the %d tokens it replaces",
				errSummaryRejected, out, c.s.maxSummaryRatio, inTokens)
		}
	}
	c.s.metrics.ObserveSummarizer(ctx, name, time.Since(start), err)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	return &cache.Entry{
		Text:            res.Text,
		CoveredMessages: int32(c.cut),
		Model:           res.Model,
		PromptVersion:   res.PromptVersion,
		Summarizer:      name,
		InputTokens:     res.InputTokens,
		OutputTokens:    res.OutputTokens,
		Created:         time.Now().UTC(),
	}, nil
}

// textTokens counts the tokens of s under the request's tokenizer (the memoized counter's
// count of a one-text-part message, framing included).
func (s *Server) textTokens(text, tokenizer string) int64 {
	if text == "" {
		return 0
	}
	n, err := s.counter.Message(&compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: text}}},
	}}, tokenizer)
	if err != nil { // the tokenizer was validated by Decide
		return int64(len(text)+3) / 4
	}
	return n
}

// summarizerName resolves "" to the default summarizer's name. The result is kept in the
// cache and in metric labels, so it never shares memory with the request (see codec).
func (s *Server) summarizerName(name string) string {
	if name == "" {
		return s.summarizers.Default()
	}
	return strings.Clone(name)
}

// compactPromptMessage is the COMPACT_PROMPT message that records what was asked of the
// summarizer. It is persisted for the record and never sent to a model.
func compactPromptMessage(instructions string) *compactorv1.Message {
	var b strings.Builder
	b.WriteString(engine.SummarySystemPrompt())
	b.WriteString("\n\nSections: ")
	for i, sec := range engine.SummarySections {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sec.Heading)
	}
	b.WriteString(".")
	if ins := strings.TrimSpace(instructions); ins != "" {
		b.WriteString("\n\nAdditional instructions for this summary:\n")
		b.WriteString(ins)
	}
	return &compactorv1.Message{
		Role: compactorv1.Role_ROLE_USER,
		Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT,
		Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{
			Text: &compactorv1.TextPart{Text: b.String()},
		}}},
	}
}
