package main

import (
	"context"
	"fmt"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/service"
	"google.golang.org/protobuf/proto"
)

// host replays conversations through a server as a host does: it persists what Compact
// returns and sends the model what it persisted.
type host struct {
	srv        *service.Server
	summarizer string // the CompactRequest's summarizer ("" for the server's default)
	headroom   int32  // the policy's headroom_turns (0: the default)
	// agent sends each model request to the fake provider, and says what a CompactRequest
	// carries for the summary to be sent as the agent's own; nil without a fake provider.
	agent *measure.Agent
}

// request is one model request of a replay: what the host held when it called the model,
// after any compaction.
type request struct {
	turn      int   // the index in the conversation of the assistant message the request produced
	tokens    int64 // L: the tokens of the messages sent
	prefix    int64 // P: the tokens of its leading messages identical to the previous request's
	compacted bool  // a compaction ran before it
}

// compaction is one compaction of a replay, as Plan proposed and Compact carried it out.
type compaction struct {
	n       int // 1 for the session's first compaction
	turn    int // the index in the conversation of the assistant message it came before
	request int // the index of the request it came before
	action  string
	reason  string // the host's plan's reason
	cache   string // how the summary cache served it
	// The host's plan (on what it held before): its tokens, trigger, target and usable window.
	before, trigger, target, usable int64
	// after is the tokens of what Compact returned (a Plan of it); planAfter is the Compact
	// response's plan's tokens_after.
	after, planAfter int64
	// added is the tokens the conversation grew by since the previous request: the one turn
	// behind this compaction when the previous request compacted too.
	added int64
	// headroom is trigger − target of the previous compaction, the headroom it left (the
	// target follows the session's median turn, so it moves); 0 when that compaction landed
	// above its target, as its reason said, leaving none.
	headroom int64
	// needed are the identifiers the agent wrote from this turn on that the conversation held
	// before the compaction; kept how many of them it held right after.
	needed, kept int
	// billed is what the summary call this compaction made cost in input tokens at the
	// cache prices (measure.Billed; 0 when the summary was cached or local).
	billed float64
	// uncached, read and written are that call's input tokens billed at the input price, read
	// from the cache and written to it.
	uncached, read, written int64
	// asAgent says whether that call was sent as the agent's own request (it read the
	// agent's cache), and instruction are then the tokens of its last message, the summary
	// instruction, as the fake provider counts them.
	asAgent     bool
	instruction int64
	// requests and claudeMD are what the conversation held right after the compaction of the
	// requests before this turn and of the CLAUDE.md block (-1: none), as measureEnd counts.
	requests, claudeMD float64
}

// consecutive reports whether c ran on the turn right after another compaction, given the
// replay's requests.
func (c compaction) consecutive(reqs []request) bool {
	return c.request > 0 && reqs[c.request-1].compacted
}

// allowed reports whether a compaction on the turn right after another is one the issue
// allows: that turn alone added more tokens than the gap between the trigger and the previous
// compaction's target (the headroom it left), as the session property test reads it.
func (c compaction) allowed() bool { return c.added > c.headroom }

// failure is a Plan or Compact call that failed.
type failure struct {
	turn        int
	call        string // "Plan" or "Compact"
	irreducible bool   // FAILED_PRECONDITION, CONTEXT_IRREDUCIBLE
	err         string
}

// declined is a Compact that answered compacted=false although its plan acted.
type declined struct {
	turn   int
	reason string
}

// trace is what one replay recorded.
type trace struct {
	window      int64
	calls       int // the Plan and Compact calls the host made
	requests    []request
	compactions []compaction
	failures    []failure
	declined    []declined
	final       []*compactorv1.Message // what the host held at the end (the conversation's last message appended)
}

// replay replays s at a context window of window: before each assistant message, with
// anything persisted, the host plans; when the plan acts, it compacts (not forced, the same
// policy) and persists what Compact returns; then it appends the message. Each plan is one
// model request. A failed call leaves what the host holds as it was; after a failed Plan no
// request is counted (the host has no plan to send by).
func (h host) replay(ctx context.Context, s *session, window int64) trace {
	r := replayer{host: h, s: s, policy: &compactorv1.Policy{ContextWindow: window, HeadroomTurns: h.headroom}, tr: trace{window: window}}
	var held, prev []*compactorv1.Message // what the host holds; the previous request's sent messages
	for t, m := range s.msgs {
		if m.GetRole() != compactorv1.Role_ROLE_ASSISTANT || len(held) == 0 {
			held = append(held, m)
			continue
		}
		plan, err := h.srv.Plan(ctx, &compactorv1.PlanRequest{Messages: held, Policy: r.policy})
		r.tr.calls++
		if err != nil {
			r.tr.fail(t, "Plan", err)
			held = append(held, m)
			continue
		}
		req := request{turn: t}
		if plan.GetAction() != compactorv1.Action_ACTION_NONE {
			if after, ok := r.compact(ctx, t, held, plan); ok {
				held, plan, req.compacted = after.msgs, after.plan, true
			}
		}
		sent, tokens := sentTokens(held, plan)
		if h.agent != nil {
			if err := h.agent.Send(ctx, sent); err != nil {
				r.tr.fail(t, "agent request", err)
			}
		}
		req.tokens = plan.GetTokensBefore()
		req.prefix = sharedPrefix(prev, sent, tokens)
		r.tr.requests = append(r.tr.requests, req)
		prev = sent
		held = append(held, m)
	}
	r.tr.final = held
	return r.tr
}

// replayer is one replay under way.
type replayer struct {
	host
	s      *session
	policy *compactorv1.Policy
	tr     trace
}

// compacted is what a compaction left: the messages to persist and a plan of them.
type compacted struct {
	msgs []*compactorv1.Message
	plan *compactorv1.PlanResponse
}

// compact compacts held, on which plan acted before the message at turn t, and records the
// compaction; ok is false when nothing is to be persisted (an error, or compacted=false).
func (r *replayer) compact(ctx context.Context, t int, held []*compactorv1.Message, plan *compactorv1.PlanResponse) (after compacted, ok bool) {
	creq := &compactorv1.CompactRequest{Messages: held, Policy: r.policy, Summarizer: r.summarizer}
	if r.agent != nil {
		creq.AgentRequest = r.agent.Request
	}
	resp, err := r.srv.Compact(ctx, creq)
	r.tr.calls++
	if err != nil {
		r.tr.fail(t, "Compact", err)
		return after, false
	}
	if !resp.GetCompacted() {
		r.tr.declined = append(r.tr.declined, declined{turn: t, reason: resp.GetReason()})
		return after, false
	}
	after.msgs = resp.GetMessages()
	// What the host persists is counted as the next plan will count it.
	if after.plan, err = r.srv.Plan(ctx, &compactorv1.PlanRequest{Messages: after.msgs, Policy: r.policy}); err != nil {
		r.tr.fail(t, "Plan", fmt.Errorf("of the compacted conversation: %w", err))
		return after, false
	}
	c := compaction{
		n: len(r.tr.compactions) + 1, turn: t, request: len(r.tr.requests), action: resp.GetPlan().GetAction().String(),
		reason: plan.GetReason(), cache: resp.GetCacheStatus().String(), before: plan.GetTokensBefore(),
		trigger: plan.GetTriggerAtTokens(), target: plan.GetTargetTokens(), usable: plan.GetUsableTokens(),
		after: after.plan.GetTokensBefore(), planAfter: resp.GetPlan().GetTokensAfter(),
	}
	if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT && r.agent != nil {
		s := resp.GetSummary()
		c.billed = measure.Billed(s)
		c.read, c.written = s.GetCacheReadInputTokens(), s.GetCacheCreationInputTokens()
		c.uncached = s.GetInputTokens() - c.read - c.written
		if c.asAgent = c.read > 0 && r.agent.Request != nil; c.asAgent {
			c.instruction = r.agent.LastCall().Final
		}
	}
	if n := len(r.tr.requests); n > 0 {
		c.added = c.before - r.tr.requests[n-1].tokens
	}
	if n := len(r.tr.compactions); n > 0 {
		if prev := r.tr.compactions[n-1]; prev.after <= prev.target {
			c.headroom = c.trigger - prev.target
		}
	}
	needed := fidelity.Needed(sentOf(held), r.s.msgs[t:])
	c.needed = len(needed)
	for _, k := range fidelity.Recall(needed, sentOf(after.msgs)) {
		if k {
			c.kept++
		}
	}
	c.requests, c.claudeMD = keptBefore(r.s, t, after.msgs)
	r.tr.compactions = append(r.tr.compactions, c)
	return after, true
}

func (tr *trace) fail(turn int, call string, err error) {
	is, _ := service.Irreducible(err)
	tr.failures = append(tr.failures, failure{turn: turn, call: call, irreducible: is, err: err.Error()})
}

// sentOf returns the messages of msgs a model is sent (engine.Sent).
func sentOf(msgs []*compactorv1.Message) []*compactorv1.Message {
	out, _ := sentTokens(msgs, nil)
	return out
}

// sentTokens returns the messages of msgs a model is sent (engine.Sent) and, with plan (a
// plan of msgs), their tokens.
func sentTokens(msgs []*compactorv1.Message, plan *compactorv1.PlanResponse) ([]*compactorv1.Message, []int64) {
	var out []*compactorv1.Message
	var tokens []int64
	for i, s := range engine.Sent(msgs) {
		if !s {
			continue
		}
		out = append(out, msgs[i])
		if plan != nil {
			tokens = append(tokens, plan.GetMessageTokens()[i])
		}
	}
	return out, tokens
}

// sharedPrefix returns the tokens (tokens[i] is cur[i]'s) of the longest run of leading
// messages of cur identical to prev's: the prefix a provider's cache still holds.
func sharedPrefix(prev, cur []*compactorv1.Message, tokens []int64) int64 {
	var n int64
	for i := 0; i < len(prev) && i < len(cur); i++ {
		if prev[i] != cur[i] && !proto.Equal(prev[i], cur[i]) {
			break
		}
		n += tokens[i]
	}
	return n
}
