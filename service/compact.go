package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/summarize"
	"github.com/compactord/compactord/summary"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
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

// maxAnchorCandidates bounds how many earlier prefixes one Compact looks up in the cache
// (one MGET) when searching for a summary to build on.
const maxAnchorCandidates = 256

// errUnpaid marks a summarized range too short for any summary to pay for itself: the
// summary may be at most maxSummaryRatio of the tokens it replaces. The outcome is
// deterministic (a retry meets the same range), so Compact answers compacted=false with the
// reason instead of an error.
var errUnpaid = errors.New("no summary can pay for itself")

// minSummaryTokens is the smallest summary budget worth asking for: below it a range is
// too short to summarize.
const minSummaryTokens = 32

// attrFallbackFrom names, on the server span, the summarizer whose fallback wrote the summary.
const attrFallbackFrom = attribute.Key("compactor.summary.fallback_from")

// tenant returns the tenant the call acts for (see auth.Tenant), or "" (the anonymous tenant).
func tenant(ctx context.Context) string { return auth.Tenant(ctx) }

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
	msgs, warnings := replaceForeignCompactions(msgs, req.GetTargetProvider())
	force := req.GetForce() || len(warnings) > 0
	d, err := engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: force})
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.checkInstructions(req); err != nil {
		return nil, toStatus(err)
	}
	plan := d.Response
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attrAction.String(plan.GetAction().String()),
		attrTokensBefore.Int64(plan.GetTokensBefore()), attrTokensAfter.Int64(plan.GetTokensAfter()))
	resp := &compactorv1.CompactResponse{Plan: plan, Warnings: warnings}
	if plan.GetAction() == compactorv1.Action_ACTION_NONE {
		return resp, nil
	}
	pruned := engine.ApplyPrune(msgs, d)
	if plan.GetAction() == compactorv1.Action_ACTION_PRUNE {
		s.compacted(resp, pruned)
		return resp, nil
	}

	c := compaction{s: s, req: req, msgs: msgs, plan: plan, sum: sum, cut: int(plan.GetCutIndex()), chain: d.PrefixChain()}
	c.kept = c.keptPositions()
	if c.room, err = c.textRoom(); err != nil {
		return nil, toStatus(err)
	}
	entry, outcome, err := c.summary(ctx)
	fallbackFrom := ""
	if fb, ok := s.summarizers.Fallback(req.GetSummarizer()); ok && transient(ctx, err) {
		fallbackFrom = sum.Fingerprint().Name
		span.SetAttributes(attrFallbackFrom.String(fallbackFrom))
		entry, err = c.fallback(ctx, fb)
		outcome = cache.StatusBypass
	}
	if errors.Is(err, errUnpaid) {
		s.metrics.AddUnpaid()
		span.SetAttributes(attrAction.String("unpaid"))
		resp.Reason = err.Error()
		return resp, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	resp.CacheStatus = cacheStatusProto(outcome)
	s.metrics.CacheLookup(outcome)
	span.SetAttributes(cache.AttrHit.Bool(outcome == cache.StatusHit),
		attrCacheStatus.String(resp.CacheStatus.String()), attrPrefixHash.String(plan.GetPrefixHash()))

	s.compacted(resp, c.messages(pruned, entry.Text))
	resp.Summary = summaryProto(entry, len(c.kept), fallbackFrom)
	span.SetAttributes(checkAttributes(entry.Check)...)
	return resp, nil
}

// compacted completes resp with the compacted conversation msgs, and counts it.
func (s *Server) compacted(resp *compactorv1.CompactResponse, msgs []*compactorv1.Message) {
	plan := resp.GetPlan()
	s.metrics.AddPrunedTokens(int(plan.GetPrunedTokens()))
	s.metrics.ObserveTokens(int(plan.GetTokensBefore()), int(plan.GetTokensAfter()))
	resp.Compacted = true
	resp.Messages = msgs
}

// messages is the compacted conversation: the head (pruned), [the compact prompt], the
// summary of text, the requests kept verbatim, then the tail (pruned). The summary stands
// for the messages before the cut that are not kept: the plan's summarized ones and those
// an earlier summary covered (its dropped ones).
func (c *compaction) messages(pruned []*compactorv1.Message, text string) []*compactorv1.Message {
	out := make([]*compactorv1.Message, 0, len(c.msgs)-c.cut+8)
	for i := range c.cut {
		if c.plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_KEEP {
			out = append(out, pruned[i]) // the head: system, prefaces, pinned
		}
	}
	folded := c.cut - len(out) - len(c.kept)
	if c.req.GetEmitCompactPrompt() {
		out = append(out, compactPromptMessage(c.req.GetInstructions()))
	}
	out = append(out, engine.SummaryMessage(text, folded))
	for _, k := range c.kept {
		out = append(out, c.msgs[k])
	}
	return append(out, pruned[c.cut:]...)
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
	// kept are the positions of the requests before the cut the plan keeps verbatim after
	// the summary (DISPOSITION_KEEP_REQUEST), oldest first.
	kept []int32
	// room is the summary text the plan's summary room holds (see textRoom).
	room int64
}

// base is what a new summary builds on: the summary of msgs[0:from] (anchor; "" when from
// is 0), whose text left out the requests at released because they stayed verbatim beside
// it, and which this compaction folds into the summary instead.
type base struct {
	from     int
	anchor   string
	released []int32
}

// summary returns the summary of msgs[0:cut] and how the cache served it: the exact prefix
// from the cache, or a new summary built on the longest cached earlier prefix (or on the
// conversation's latest summary), computed once across replicas and stored. A cached summary
// of this very prefix that does not serve this compaction (see usable) is rewritten for it
// and served uncached (cache.StatusBypass): the stored one stays.
//
// A caller that joins a computation another call of this process started gets its result:
// its summary (a hit, unless the leader's was not stored: then the leader's outcome) or its
// error, as if it were its own; only a computation that ran out of its starter's time is
// started again.
func (c *compaction) summary(ctx context.Context) (*cache.Entry, cache.Status, error) {
	scope := cache.Scope{Tenant: tenant(ctx), Summarizer: c.sum.Fingerprint().String(), Instructions: c.req.GetInstructions()}

	// Candidate prefixes: every length after the latest summary up to the cut, newest last.
	lo := min(max(int(c.plan.GetSummaryIndex())+1, 1, c.cut-maxAnchorCandidates+1), c.cut)
	keys := scope.Keys(c.chain[lo : c.cut+1])
	key := keys[len(keys)-1]

	b, stale := c.start(), (*cache.Entry)(nil)
	idx, found, err := c.s.cache.Longest(ctx, keys)
	switch {
	case err == nil && idx == len(keys)-1 && c.usable(found):
		return found, cache.StatusHit, nil
	case err == nil && idx == len(keys)-1:
		stale = found
	case err == nil:
		b = c.on(lo+idx, found) // build on the longest cached earlier prefix
	case errors.Is(err, cache.ErrNotFound):
	default:
		e, err := c.summarize(ctx, b)
		return e, cache.StatusUnavailable, err
	}

	// One computation per key in this process (flights), and one across replicas
	// (cache.Fill's lock). Each caller gives up at its own deadline. The computation runs
	// detached from the caller that started it, to that caller's deadline, holding what the
	// caller's call holds (its slot, its tenant's concurrent-Compacts lease, its request's
	// memory: package hold); a caller that joined a computation which ran out of its
	// starter's time starts a new one. Compactions that share a flight serve each other:
	// they keep the same requests and have the same summary room.
	flightKey := key.String() + "/" + c.servesKey()
	for {
		fl, lead := c.s.flights.join(flightKey)
		if lead {
			b, stale := b, stale // the computation's copies: the hit path moves nothing to the heap
			c.detach(ctx, fl, func(ctx context.Context) (*cache.Entry, cache.Status, error) {
				return c.compute(ctx, key, b, stale)
			})
		} else {
			hold.Yield(ctx) // waiting on another call's work is not engine work
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("compact: waiting for the summary: %w", ctx.Err())
		case <-fl.done:
		}
		if fl.err != nil {
			if !lead && ctx.Err() == nil && (errors.Is(fl.err, context.DeadlineExceeded) || errors.Is(fl.err, context.Canceled)) {
				continue // the starter's time ran out, not ours
			}
			return nil, 0, fl.err
		}
		if !lead && fl.status == cache.StatusMiss {
			return fl.entry, cache.StatusHit, nil // stored by the call it joined
		}
		return fl.entry, fl.status, nil
	}
}

// detach runs compute for fl in a goroutine of its own, which keeps what the call of ctx
// holds until it ends and runs to ctx's deadline whether or not the caller waits for it.
func (c *compaction) detach(ctx context.Context, fl *flight, compute func(context.Context) (*cache.Entry, cache.Status, error)) {
	detached := hold.Detach(ctx)
	fctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		fctx, cancel = context.WithDeadline(fctx, dl)
	}
	go func() {
		defer detached()
		defer cancel()
		e, st, err := compute(fctx)
		c.s.flights.finish(fl, e, st, err)
	}()
}

// compute is the computation of this compaction's summary: with stale (this prefix's cached
// summary, which does not serve it), a summary rewritten from it, not stored; else
// cache.Fill of key with a summary built on b, unless another compaction's summary of this
// prefix was stored while this one waited on its lock and does not serve this one: then it is
// rewritten from that. A panic (a bug) is an error: no caller is left to recover it.
func (c *compaction) compute(ctx context.Context, key cache.Key, b base, stale *cache.Entry) (e *cache.Entry, st cache.Status, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.logger.ErrorContext(ctx, "panic while summarizing", "panic", p, "stack", string(debug.Stack()))
			err = errors.New("compact: internal error while summarizing")
		}
	}()
	if stale == nil {
		e, st, err = cache.Fill(ctx, c.s.cache, key, c.s.fill, func(ctx context.Context) (*cache.Entry, error) {
			return c.summarize(ctx, b)
		})
		if err != nil || st != cache.StatusHit || c.usable(e) {
			return e, st, err
		}
		stale = e
	}
	e, err = c.summarize(ctx, c.rewrite(stale))
	return e, cache.StatusBypass, err
}

// transient reports whether err is a summarizer failure a fallback summarizer may stand in
// for: not the caller's deadline or cancellation, not bad input.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, summarize.ErrUnavailable) || errors.Is(err, summarize.ErrEmptySummary))
}

// fallback has fb write the summary the compaction's summarizer failed to write. It is not
// cached: the next call tries that summarizer again.
func (c compaction) fallback(ctx context.Context, fb summarize.Summarizer) (*cache.Entry, error) {
	c.sum = fb
	return c.summarize(ctx, c.start())
}

// start is where a summary with no cached prefix starts: after the conversation's latest
// summary, on top of its text.
func (c *compaction) start() base {
	if si := c.plan.GetSummaryIndex(); si >= 0 {
		return base{from: int(si) + 1, anchor: engine.SummaryText(c.msgs[si])}
	}
	return base{}
}

// on is the base of a summary built on e, the cached summary of msgs[0:from]: the requests
// e left out because they stayed verbatim beside it, and which this compaction does not
// keep, go into the new summary.
func (c *compaction) on(from int, e *cache.Entry) base {
	b := base{from: from, anchor: e.Text}
	for _, k := range e.Kept {
		if _, ok := slices.BinarySearch(c.kept, k); !ok && int(k) < from {
			b.released = append(b.released, k)
		}
	}
	return b
}

// usable reports whether e, a cached summary of msgs[0:cut], serves this compaction as it
// is: it fits the summary room and holds every request this compaction does not keep.
func (c *compaction) usable(e *cache.Entry) bool { return c.holds(e) && c.fits(e.Text) }

// rewrite is the base of this compaction's own summary of msgs[0:cut] when e, the cached
// one, does not serve it: built on e, folding in the requests e left out that this
// compaction does not keep; or from the start when e is longer than the summary room (it
// was written for a larger one).
func (c *compaction) rewrite(e *cache.Entry) base {
	if !c.fits(e.Text) {
		return c.start()
	}
	return c.on(c.cut, e)
}

// holds reports whether e, a summary of msgs[0:cut], holds every request this compaction
// does not keep: it left out only requests this compaction keeps verbatim beside it.
func (c *compaction) holds(e *cache.Entry) bool {
	for _, k := range e.Kept {
		if _, ok := slices.BinarySearch(c.kept, k); !ok {
			return false
		}
	}
	return true
}

// summarize summarizes the requests b released and the summarized messages of
// msgs[b.from:cut] on top of b.anchor within a
// budget the summary can meet (at most maxSummaryRatio of the tokens it replaces, and the
// policy's summary_max_tokens), then checks it (see package fidelity) so the entry is stored
// checked. A range too short for any summary to pay returns an error wrapping errUnpaid.
func (c *compaction) summarize(ctx context.Context, b base) (*cache.Entry, error) {
	tok := c.req.GetPolicy().GetTokenizer()
	count := func(s string) int { return int(c.s.textTokens(s, tok)) }
	// The summary room the plan reserved (less the summary message's framing) bounds it too.
	room := c.room
	anchor, anchorTokens := c.s.boundAnchor(b.anchor, tok, room)
	var (
		in, kept []*compactorv1.Message
		inTokens = anchorTokens
	)
	for _, i := range b.released {
		in = append(in, c.msgs[i])
		inTokens += c.plan.GetMessageTokens()[i]
	}
	for i := b.from; i < c.cut; i++ {
		switch c.plan.GetDispositions()[i] {
		case compactorv1.Disposition_DISPOSITION_KEEP_REQUEST:
			in = append(in, c.msgs[i])
			kept = append(kept, c.msgs[i])
		case compactorv1.Disposition_DISPOSITION_SUMMARIZE:
			if c.summarized(i) {
				in = append(in, c.msgs[i])
				inTokens += c.plan.GetMessageTokens()[i]
			}
		}
	}
	budget := min(int64(c.s.maxSummaryRatio*float64(inTokens)), room)
	switch {
	case inTokens == 0:
		return nil, fmt.Errorf("compact: %w: nothing before the cut is left to summarize: its requests stay verbatim after the summary", errUnpaid)
	case budget < minSummaryTokens:
		return nil, fmt.Errorf("compact: %w: the summarized range has %d tokens; a summary may have at most %.2f × that (%d tokens), less than the %d a summary needs",
			errUnpaid, inTokens, c.s.maxSummaryRatio, budget, minSummaryTokens)
	}
	name := c.sum.Fingerprint().Name
	spent := func(int64) {}
	if c.s.admit != nil && summarize.CallsModel(c.sum) {
		// What the call may spend: its input (the range, the anchor and the instructions)
		// and the summary.
		estimate := inTokens + c.s.textTokens(c.req.GetInstructions(), tok) + budget
		var err error
		if spent, err = c.s.admit.AdmitSummary(ctx, tenant(ctx), estimate); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	res, err := c.sum.Summarize(ctx, summarize.Request{
		Attributes: []attribute.KeyValue{attrPrefixHash.String(c.plan.GetPrefixHash()), cache.AttrHit.Bool(false),
			attrTokensBefore.Int64(c.plan.GetTokensBefore()), attrTokensAfter.Int64(c.plan.GetTokensAfter())},
		SummaryInput:    engine.SummaryInput{Messages: in, Kept: kept, Anchor: anchor, Instructions: c.req.GetInstructions()},
		MaxOutputTokens: budget,
		Count:           count,
	})
	c.s.metrics.ObserveSummarizer(ctx, name, time.Since(start), err)
	spent(res.InputTokens + res.OutputTokens)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	text, rep := c.check(res.Text, int(budget), count)
	if out := count(text); float64(out) > c.s.maxSummaryRatio*float64(inTokens) {
		// Check keeps the text within budget; this guards the invariant.
		return nil, fmt.Errorf("compact: %w: the checked summary has %d tokens, more than %.2f × the %d tokens it replaces",
			errUnpaid, out, c.s.maxSummaryRatio, inTokens)
	}
	c.s.metrics.ObserveCheck(rep)
	res.Text = text // the checked summary is the one stored and served
	return &cache.Entry{
		Output:          res.Output,
		Summarizer:      name,
		CoveredMessages: int32(c.cut),
		Kept:            c.kept,
		Created:         time.Now().UTC(),
		Check:           rep,
	}, nil
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
	if n := s.textTokens(ins, req.GetPolicy().GetTokenizer()); n > room {
		return engine.TooLarge("instructions", fmt.Sprintf("%d tokens exceed the limit of %d (policy.summary_max_tokens, %d when unset)", n, room, engine.DefaultSummaryMaxTokens))
	}
	return nil
}

// boundAnchor bounds the previous summary a new one builds on by the policy: a summary
// compactord wrote is at most the summary room, so an anchor of more than twice that (a
// caller's own text in a COMPACT_SUMMARY message, or a room since made smaller) is cut to
// it, keeping its head and tail. It returns the anchor and its tokens.
func (s *Server) boundAnchor(anchor, tok string, room int64) (string, int64) {
	n := s.textTokens(anchor, tok)
	if limit := 2 * room; n > limit {
		anchor = engine.Truncate(anchor, int(int64(len(anchor))*room/n))
		n = s.textTokens(anchor, tok)
	}
	return anchor, n
}

// summarized reports whether msgs[i] is replaced by the summary.
func (c *compaction) summarized(i int) bool {
	return c.plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_SUMMARIZE &&
		c.msgs[i].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY
}

// check runs the summary check over the range the summary replaces since the conversation's
// latest summary (whatever cached prefix the summary was built on), against the summary and
// the head messages kept before the cut (the tail is left out: the entry is cached for every
// conversation sharing the prefix).
func (c *compaction) check(text string, budget int, count func(string) int) (string, summary.Check) {
	rng, kept := c.split()
	return fidelity.Check(fidelity.CheckInput{Summary: text, Range: rng, Kept: kept, Budget: budget, Count: count})
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

// servesKey names what decides whether a summary of msgs[0:cut] serves this compaction (see
// usable): the requests it keeps and its summary room. Compactions of one prefix share a
// computation in this process (flights) only when these are the same.
func (c *compaction) servesKey() string {
	var b strings.Builder
	for _, k := range c.kept {
		fmt.Fprintf(&b, "%d,", k)
	}
	fmt.Fprintf(&b, "/%d", c.room)
	return b.String()
}

// split returns the messages the summary replaces since the conversation's latest summary
// (the requests kept verbatim included: the check counts them as kept), and the messages
// kept before the cut: the head and the kept requests.
func (c *compaction) split() (rng, kept []*compactorv1.Message) {
	for i := range c.cut {
		d := c.plan.GetDispositions()[i]
		switch {
		case d == compactorv1.Disposition_DISPOSITION_KEEP:
			kept = append(kept, c.msgs[i])
		case d == compactorv1.Disposition_DISPOSITION_KEEP_REQUEST:
			kept = append(kept, c.msgs[i])
			rng = append(rng, c.msgs[i])
		case i > int(c.plan.GetSummaryIndex()) && c.summarized(i):
			rng = append(rng, c.msgs[i])
		}
	}
	return rng, kept
}

// textRoom is the summary text the plan's summary room holds: the room less the framing of
// a summary message covering up to cut messages. A summary message of a text within it
// stays within the room the plan counted (engine.SummaryFrameTokens keeps a margin for the
// tokens joining adds), so tokens_after bounds what Compact returns.
func (c *compaction) textRoom() (int64, error) {
	frame, err := c.s.counter.SummaryFrameTokens(c.cut, c.req.GetPolicy().GetTokenizer())
	if err != nil {
		return 0, err
	}
	return c.plan.GetSummaryTokens() - frame, nil
}

// fits reports whether a summary text fits the plan's summary room.
func (c *compaction) fits(text string) bool {
	return c.s.textTokens(text, c.req.GetPolicy().GetTokenizer()) <= c.room
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

// compactionProvider is the ProviderPart provider whose compactions a target format takes.
var compactionProvider = map[compactorv1.Provider]string{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: engine.ProviderAnthropic,
	compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:   engine.ProviderOpenAI,
}

// replaceForeignCompactions returns msgs with every provider compaction that target cannot
// take replaced by a text part saying so, and a warning per replacement. Such a message is
// then an ordinary one, so what follows it (and any history the request still holds before
// it) is summarized into a compactord summary; the caller's msgs are not modified.
// Unspecified target changes nothing.
func replaceForeignCompactions(msgs []*compactorv1.Message, target compactorv1.Provider) ([]*compactorv1.Message, []string) {
	if target == compactorv1.Provider_PROVIDER_UNSPECIFIED {
		return msgs, nil
	}
	var out []*compactorv1.Message
	var warnings []string
	for i, m := range msgs {
		for j, p := range m.GetParts() {
			pp := p.GetProvider()
			if pp.GetType() != "compaction" || pp.GetProvider() == compactionProvider[target] {
				continue
			}
			if out == nil {
				out = slices.Clone(msgs)
			}
			if out[i] == m {
				out[i] = proto.CloneOf(m)
			}
			text := "[" + pp.GetProvider() + " compacted the conversation before this point; its summary is not readable]"
			var block struct{ Content string }
			if json.Unmarshal([]byte(pp.GetJson()), &block) == nil && block.Content != "" { // Anthropic's is text
				text = "[" + pp.GetProvider() + " compacted the conversation before this point into:]\n" + block.Content
			}
			out[i].Parts[j] = &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: text}}}
			warnings = append(warnings, fmt.Sprintf("messages[%d].parts[%d]: %s compaction cannot be sent to %s; replaced by a compactord summary of what follows it",
				i, j, pp.GetProvider(), target))
		}
	}
	if out == nil {
		return msgs, nil
	}
	return out, warnings
}
