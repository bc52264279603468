package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/summarize"
)

// Preparing a summary before the compaction that needs it (CompactRequest.prepare,
// Policy.prepare_ratio): the summary of the range a compaction would fold now is written
// detached from the call that asked, under the same key, flight and cache.Fill lock as a
// Compact's, so that the Compact at the trigger finds it cached (a hit when its cut is the
// same, an anchor it builds on when its cut is later) or joins the computation still running.

const (
	// DefaultPrepareTimeout bounds one preparation when Options.PrepareTimeout is zero.
	DefaultPrepareTimeout = 5 * time.Minute
	// DefaultMaxPreparations bounds the preparations in flight in one server when
	// Options.MaxPreparations is zero.
	DefaultMaxPreparations = 64
	// MaxTenantPreparations bounds the preparations in flight for one tenant in one server.
	MaxTenantPreparations = 16
)

// preparations are the preparations running detached from their calls: bounded in number,
// per server and per tenant, and cancelled and waited for by Server.Shutdown.
type preparations struct {
	mu       sync.Mutex
	closed   bool
	total    int
	byTenant map[string]int
	wg       sync.WaitGroup
	// stop is cancelled by Shutdown; every preparation's context ends with it.
	stop   context.Context
	cancel context.CancelFunc
}

// admit takes a place for one preparation of tenant among at most max in flight: it returns
// the release to run when the preparation has ended, or why there is no place.
func (p *preparations) admit(tenant string, max int) (release func(), why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, "not prepared: the server is shutting down"
	case p.total >= max:
		return nil, fmt.Sprintf("not prepared: the server has %d preparations in flight", p.total)
	case p.byTenant[tenant] >= MaxTenantPreparations:
		return nil, fmt.Sprintf("not prepared: the tenant has %d preparations in flight", p.byTenant[tenant])
	}
	if p.byTenant == nil {
		p.byTenant = map[string]int{}
	}
	p.total++
	p.byTenant[tenant]++
	p.wg.Add(1)
	return sync.OnceFunc(func() {
		p.mu.Lock()
		p.total--
		if p.byTenant[tenant]--; p.byTenant[tenant] == 0 {
			delete(p.byTenant, tenant)
		}
		p.mu.Unlock()
		p.wg.Done()
	}), ""
}

// Shutdown cancels the preparations running detached from their calls and waits until every
// one has returned what it held (its request's memory, its tenant's lease), or until ctx is
// done (then it returns ctx's error). No preparation starts after it. Call it once the gRPC
// server has stopped serving.
func (s *Server) Shutdown(ctx context.Context) error {
	p := &s.preps
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown: preparations still running: %w", ctx.Err())
	}
}

// prepareNow answers a Compact with prepare set: it starts the preparation of the summary the
// compaction d would write (forced when the conversation is under the trigger) and answers at
// once, uncompacted, with that compaction's plan and a reason saying what was started. hash is
// the source hash of req's messages (sourceHash).
func (s *Server) prepareNow(ctx context.Context, req *compactorv1.CompactRequest, msgs []*compactorv1.Message, d *engine.Decision, sum summarize.Summarizer, hash string) (*compactorv1.CompactResponse, error) {
	var err error
	if d.Response.GetAction() == compactorv1.Action_ACTION_NONE {
		if d, err = s.decidePrepared(req, msgs, hash); err != nil {
			return nil, toStatus(err)
		}
	}
	resp := &compactorv1.CompactResponse{Plan: d.Response}
	if d.Response.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		resp.Reason = "not prepared: the compaction summarizes nothing (" + d.Response.GetAction().String() + ")"
		return resp, nil
	}
	if resp.Reason, err = s.startPreparation(ctx, req, msgs, d, sum); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// prepareAhead starts the preparation Policy.prepare_ratio asks for when plan, the plan of msgs
// under req's policy, takes no action and finds the conversation above the ratio of the usable
// window: the summary a compaction forced now would write. hash is the source hash of req's
// messages (sourceHash), "" when not computed yet. Nothing is reported: the call is answered
// as without it.
func (s *Server) prepareAhead(ctx context.Context, req *compactorv1.CompactRequest, msgs []*compactorv1.Message, plan *compactorv1.PlanResponse, sum summarize.Summarizer, hash string) error {
	ratio := req.GetPolicy().GetPrepareRatio()
	at := int64(math.Floor(ratio*float64(plan.GetUsableTokens()) + 1e-6))
	if ratio <= 0 || plan.GetAction() != compactorv1.Action_ACTION_NONE ||
		plan.GetTokensBefore() <= at || plan.GetTokensBefore() > plan.GetTriggerAtTokens() {
		return nil
	}
	if hash == "" { // not hashed yet (a Plan), or sources off: then this is "" again
		hash = s.sourceHash(req.GetMessages(), req.GetPolicy())
	}
	d, err := s.decidePrepared(req, msgs, hash)
	if err != nil || d.Response.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		return err
	}
	_, err = s.startPreparation(ctx, req, msgs, d, sum)
	return err
}

// decidePrepared is the compaction of msgs a preparation prepares the summary of: forced, and
// counting the source marker (hash, sourceHash's) as the compaction at the trigger will.
func (s *Server) decidePrepared(req *compactorv1.CompactRequest, msgs []*compactorv1.Message, hash string) (*engine.Decision, error) {
	return engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: true, Source: hash})
}

// planAhead is prepareAhead for a Plan: the summarizer and instructions are those of the
// Compact the preparation is for (PlanRequest.summarizer, instructions), checked as Compact
// checks them whenever the policy asks for preparations.
func (s *Server) planAhead(ctx context.Context, req *compactorv1.PlanRequest, plan *compactorv1.PlanResponse) error {
	if req.GetPolicy().GetPrepareRatio() <= 0 {
		return nil
	}
	sum, err := s.summarizers.Get(req.GetSummarizer())
	if err != nil {
		return err
	}
	creq := &compactorv1.CompactRequest{Messages: req.GetMessages(), Policy: req.GetPolicy(),
		Summarizer: req.GetSummarizer(), Instructions: req.GetInstructions()}
	if err := s.checkInstructions(creq); err != nil {
		return err
	}
	return s.prepareAhead(ctx, creq, req.GetMessages(), plan, sum, "")
}

// startPreparation starts, detached from the call of ctx, the preparation of the summary the
// compaction d of msgs writes, and returns the reason saying so (or why none was started).
// The preparation keeps what the call holds (its request's memory, its tenant's
// concurrent-Compacts lease, extended past the call's deadline to the preparation's timeout)
// until it ends, but gives back its slot among the calls in
// flight: its bounds are its own (preparations.admit), the summarizer's (the tenant's token
// budget and the LLM calls in flight, through Options.Admit; the breaker) and its timeout.
func (s *Server) startPreparation(ctx context.Context, req *compactorv1.CompactRequest, msgs []*compactorv1.Message, d *engine.Decision, sum summarize.Summarizer) (string, error) {
	c, err := s.newCompaction(req, msgs, d, sum, nil)
	if err != nil {
		return "", err
	}
	release, why := s.preps.admit(tenant(ctx), s.maxPreparations)
	if why != "" {
		return why, nil
	}
	detached := hold.DetachFor(ctx, s.prepareTimeout)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.prepareTimeout)
	stop := context.AfterFunc(s.preps.stop, cancel)
	go func() {
		defer release()
		defer detached()
		defer cancel()
		defer stop()
		hold.Yield(ctx)
		if err := c.prepare(pctx); err != nil {
			s.logger.WarnContext(pctx, "preparing a summary failed", "error", err)
		}
	}()
	return fmt.Sprintf("preparing the summary of messages [0, %d) (prefix %s)", c.cut, c.plan.GetPrefixHash()), nil
}

// prepare writes and stores the compaction's summary unless the cache holds one that serves it
// or this process is computing it already; it leads that computation (flights), so that a
// Compact of the same range arriving meanwhile waits for it rather than starting its own. A
// range too short for any summary to pay is no failure.
func (c *compaction) prepare(ctx context.Context) error {
	f, err := c.find(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("prepare: the cache is unavailable, there is nowhere to keep the summary: %w", err)
	case f.hit != nil:
		return nil
	}
	fl, lead := c.s.flights.join(c.flightKey(f.key))
	if !lead {
		return nil
	}
	fl.prepared = true
	e, st, err := c.compute(ctx, f.key, f.b, f.stale)
	c.s.flights.finish(fl, e, st, err)
	if errors.Is(err, errUnpaid) {
		return nil
	}
	return err
}
