package service

import (
	"context"
	"errors"
	"fmt"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summarize"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// TenantMetadataKey is the request metadata key naming the caller's tenant. Summaries are
// cached per tenant: one tenant can never read, or learn the existence of, another's. With
// authentication on (package auth), the tenant is the authenticated identity's and the key
// may only repeat it, unless the caller is a gateway.
const TenantMetadataKey = auth.TenantKey

// Span attributes Compact sets on the server span and on the summarization span, besides
// cache.AttrHit (compactor.cache.hit).
const (
	attrCacheStatus  = attribute.Key("compactor.cache.status")
	attrPrefixHash   = attribute.Key("compactor.prefix_hash")
	attrTokensBefore = attribute.Key("compactor.tokens.before")
	attrTokensAfter  = attribute.Key("compactor.tokens.after")
	attrAction       = attribute.Key("compactor.action")
)

// errUnpaid marks a summarized range too short for any summary to pay for itself: the
// summary may be at most maxSummaryRatio of the tokens it replaces. The outcome is
// deterministic (a retry meets the same range), so Compact answers compacted=false with the
// reason instead of an error.
var errUnpaid = errors.New("no summary can pay for itself")

// attrFallbackFrom names, on the server span, the summarizer whose fallback wrote the summary.
const attrFallbackFrom = attribute.Key("compactor.summary.fallback_from")

// tenant returns the tenant the call acts for (see auth.Tenant), or "" (the anonymous tenant).
func tenant(ctx context.Context) string { return auth.Tenant(ctx) }

// Compact implements CompactorService.Compact: Plan, then prune, then (for
// ACTION_SUMMARIZE) summarize the latest summary and the active messages before the cut,
// reusing the cache, and return head + [compact prompt] + summary + tail. With prepare, it
// starts the summary detached and answers at once (prepare.go); with Policy.prepare_ratio, a
// conversation between that ratio and the trigger has its summary prepared too.
func (s *Server) Compact(ctx context.Context, req *compactorv1.CompactRequest) (*compactorv1.CompactResponse, error) {
	msgs := req.GetMessages()
	if err := s.validate(msgs); err != nil {
		return nil, toStatus(err)
	}
	sum, err := s.summarizers.Get(req.GetSummarizer())
	if err != nil {
		return nil, toStatus(err)
	}
	msgs, warnings := replaceForeignCompactions(msgs, req.GetTargetProvider())
	force := req.GetForce() || len(warnings) > 0
	// The plan names the source the compaction keeps, in the markers of what it prunes and
	// cuts and in the summary's, and counts them so.
	hash := s.sourceHash(req.GetMessages(), req.GetPolicy())
	d, err := engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: force, Source: hash})
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.checkInstructions(req); err != nil {
		return nil, toStatus(err)
	}
	if req.GetPrepare() {
		return s.prepareNow(ctx, req, msgs, d, sum, hash)
	}
	span := trace.SpanFromContext(ctx)
	if d.Response.GetAction() == compactorv1.Action_ACTION_NONE {
		plan := d.Response
		span.SetAttributes(attrAction.String(plan.GetAction().String()),
			attrTokensBefore.Int64(plan.GetTokensBefore()), attrTokensAfter.Int64(plan.GetTokensAfter()))
		if err := s.prepareAhead(ctx, req, msgs, plan, sum, hash); err != nil {
			return nil, toStatus(err)
		}
		return &compactorv1.CompactResponse{Plan: plan, Warnings: warnings}, nil
	}
	src := s.keepSource(ctx, req.GetMessages(), hash)
	defer src.join()
	plan := d.Response
	span.SetAttributes(attrAction.String(plan.GetAction().String()),
		attrTokensBefore.Int64(plan.GetTokensBefore()), attrTokensAfter.Int64(plan.GetTokensAfter()))
	resp := &compactorv1.CompactResponse{Plan: plan, Warnings: warnings}
	if plan.GetAction() == compactorv1.Action_ACTION_PRUNE {
		if err := sourced(resp, src, req.GetTargetProvider()); err != nil {
			return nil, toStatus(err)
		}
		s.compacted(resp, prunedAndCut(msgs, d, resp))
		return resp, nil
	}

	c, err := s.newCompaction(req, msgs, d, sum, src)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := c.run(ctx, resp, d); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// newCompaction is the summarization decision d makes of msgs.
func (s *Server) newCompaction(req *compactorv1.CompactRequest, msgs []*compactorv1.Message, d *engine.Decision, sum summarize.Summarizer, src *sourceWrite) (*compaction, error) {
	plan := d.Response
	c := &compaction{s: s, req: req, msgs: msgs, plan: plan, d: d, sum: sum, cut: int(plan.GetCutIndex()), chain: d.PrefixChain(), leading: d.LeadingRequests, src: src}
	c.headTask = engine.HeadTask(msgs[:c.cut])
	c.kept = c.keptPositions()
	for _, i := range plan.GetInstructionIndexes() {
		if disp := plan.GetDispositions()[i]; int(i) < c.cut && disp != compactorv1.Disposition_DISPOSITION_KEEP {
			standing, rest := d.Split(int(i))
			if c.splits == nil {
				c.splits = map[int]split{}
			}
			c.splits[int(i)] = split{standing, rest}
		}
	}
	var err error
	if c.room, err = c.textRoom(); err != nil {
		return nil, err
	}
	c.reserveMarker(d.MarkerTokens)
	return c, nil
}

// run finds or writes the summary (its fallback standing in for a failed summarizer) and
// completes resp with the compacted conversation, pruned the tail as planned; a range no
// summary pays for completes resp uncompacted, with the reason.
func (c *compaction) run(ctx context.Context, resp *compactorv1.CompactResponse, d *engine.Decision) error {
	s, span := c.s, trace.SpanFromContext(ctx)
	entry, outcome, err := c.summary(ctx)
	fallbackFrom := ""
	if fb, ok := s.summarizers.Fallback(c.req.GetSummarizer()); ok && transient(ctx, err) {
		fallbackFrom = c.sum.Fingerprint().Name
		span.SetAttributes(attrFallbackFrom.String(fallbackFrom))
		resp.Warnings = append(resp.Warnings, fallbackWarning(fallbackFrom, fb, err))
		entry, err = c.fallback(ctx, fb)
		outcome = cache.StatusBypass
	}
	if errors.Is(err, errUnpaid) {
		s.metrics.AddUnpaid()
		span.SetAttributes(attrAction.String("unpaid"))
		resp.Reason = err.Error()
		return nil
	}
	if err != nil {
		return err
	}
	if err := sourced(resp, c.src, c.req.GetTargetProvider()); err != nil {
		return err
	}
	resp.CacheStatus = cacheStatusProto(outcome)
	s.metrics.CacheLookup(outcome)
	span.SetAttributes(cache.AttrHit.Bool(outcome == cache.StatusHit),
		attrCacheStatus.String(resp.CacheStatus.String()), attrPrefixHash.String(c.plan.GetPrefixHash()))

	s.compacted(resp, c.messages(prunedAndCut(c.msgs, d, resp), entry.Text, resp.GetSourceHash() != ""))
	resp.Summary = summaryProto(entry, len(c.kept), fallbackFrom)
	resp.Warnings = append(resp.Warnings, droppedWarnings(entry.Check)...)
	span.SetAttributes(checkAttributes(entry.Check)...)
	return nil
}

// prunedAndCut is msgs with d's pruning and cutting carried out, their markers naming the
// source resp kept, or none when it kept none.
func prunedAndCut(msgs []*compactorv1.Message, d *engine.Decision, resp *compactorv1.CompactResponse) []*compactorv1.Message {
	if resp.GetSourceHash() == "" {
		d = d.WithoutSource()
	}
	return engine.PruneAndCut(msgs, d)
}

// compacted completes resp with the compacted conversation msgs, and counts it.
func (s *Server) compacted(resp *compactorv1.CompactResponse, msgs []*compactorv1.Message) {
	plan := resp.GetPlan()
	s.metrics.AddPrunedTokens(int(plan.GetPrunedTokens()))
	s.metrics.ObserveTokens(int(plan.GetTokensBefore()), int(plan.GetTokensAfter()))
	resp.Compacted = true
	resp.Messages = msgs
}

// compaction is one summarization of msgs[0:cut].
type compaction struct {
	s    *Server
	req  *compactorv1.CompactRequest
	msgs []*compactorv1.Message
	plan *compactorv1.PlanResponse
	sum  summarize.Summarizer
	cut  int
	// headTask is engine.HeadTask of msgs[0:cut]: the head keeps the task, so the range's
	// first user message is a request only if it reads as one (every call of the summary).
	headTask bool
	// chain is h[0..cut] of the prefix hash chain.
	chain [][32]byte
	// d is the decision the plan came from.
	d *engine.Decision
	// kept are the positions of the requests before the cut the plan keeps verbatim after
	// the summary (DISPOSITION_KEEP_REQUEST), oldest first.
	kept []int32
	// room is the summary text the plan's summary room holds (see textRoom).
	room int64
	// leading is the number of requests the tail opens with (engine.Decision.LeadingRequests).
	leading int
	// splits holds, by position, the messages before the cut that mix standing instructions
	// with other parts (engine.SplitInstructions): their standing parts join the head, and
	// what is left of them is summarized or kept as a request.
	splits map[int]split
	// bypass is set when a fallback writes the summary: none of it is cached.
	bypass bool
	// src is the source being kept (nil: none), and marker the line the summary message ends
	// with to name it ("" when the room cannot take it); room has been reduced by it.
	src    *sourceWrite
	marker string
}

// split is a message split from its standing instructions.
type split struct{ standing, rest *compactorv1.Message }

// folded is message i as a summary folds it or keeps it as a request: without the standing
// instructions it was split from.
func (c *compaction) folded(i int) *compactorv1.Message {
	if sp, ok := c.splits[i]; ok {
		return sp.rest
	}
	return c.msgs[i]
}

// keptPositions returns the positions of the requests before the cut the plan keeps
// verbatim after the summary (DISPOSITION_KEEP_REQUEST), oldest first.
func (c *compaction) keptPositions() []int32 {
	var out []int32
	for i := range c.cut {
		if c.plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_KEEP_REQUEST {
			out = append(out, int32(i))
		}
	}
	return out
}

// instructionsLimit is the most tokens a Compact's instructions may take: the policy's
// summary_max_tokens, else DefaultSummaryMaxTokens. It is a fixed cap, not the room a plan
// resolves for the summary (which follows the window when summary_max_tokens is unset), so
// that whether instructions are accepted does not depend on the conversation.
func instructionsLimit(p *compactorv1.Policy) int64 {
	if m := p.GetSummaryMaxTokens(); m > 0 {
		return m
	}
	return engine.DefaultSummaryMaxTokens
}

// checkInstructions bounds a Compact's instructions by its policy: they go into the
// summarizer's prompt whole (and into the COMPACT_PROMPT message); see instructionsLimit.
func (s *Server) checkInstructions(req *compactorv1.CompactRequest) error {
	ins, room := req.GetInstructions(), instructionsLimit(req.GetPolicy())
	if int64(len(ins)) <= room { // a token is at least a byte
		return nil
	}
	if n := s.textMessageTokens(ins, req.GetPolicy().GetTokenizer()); n > room {
		return engine.TooLarge("instructions", fmt.Sprintf("%d tokens exceed the limit of %d (policy.summary_max_tokens, %d when unset)", n, room, engine.DefaultSummaryMaxTokens))
	}
	return nil
}
