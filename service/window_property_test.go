package service_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/service"
)

// TestCompactFitsTheWindow is the window promise as a property: for every Compact that
// compacts, the conversation it returns, counted by the policy's tokenizer (planned again),
// is at most the plan's tokens_after, which is at most the trigger, so the next turn does not
// compact again. The one exception is a conversation whose least compaction (the head, the
// newest request, the least summary room and the newest turn with its tool outputs cut)
// still exceeds the trigger: the plan says so, and tokens_after stays within the usable
// window. Windows from 5% to 95% of each conversation's tokens, over the corpus and
// generated conversations, with and without force; a refusal is only ever
// FAILED_PRECONDITION (irreducible).
func TestCompactFitsTheWindow(t *testing.T) {
	srv := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})})
	type conv struct {
		name string
		msgs []*compactorv1.Message
	}
	var convs []conv
	for _, f := range corpus.Files(t) {
		lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		convs = append(convs, conv{f.Name, lifted.GetMessages()})
	}
	n := 60
	if testing.Short() {
		n = 15
	}
	for seed := range n {
		convs = append(convs, conv{fmt.Sprint("generated", seed), genAgentConversation(rand.New(rand.NewPCG(uint64(seed), 7)))})
	}
	ctx := context.Background()
	var compacted, above, refused int
	for _, c := range convs {
		total := tokensOf(t, srv, c.msgs)
		for pct := int64(5); pct <= 95; pct += 10 {
			window := max(total*pct/100, 16)
			for _, force := range []bool{false, true} {
				policy := &compactorv1.Policy{ContextWindow: window}
				resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: c.msgs, Policy: policy, Force: force})
				name := fmt.Sprintf("%s at %d%% (window %d), force %v", c.name, pct, window, force)
				if err != nil {
					if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "irreducible") {
						t.Errorf("%s: %v", name, err)
					}
					refused++
					continue
				}
				if !resp.GetCompacted() {
					continue
				}
				compacted++
				plan := resp.GetPlan()
				if err := engine.DefaultLimits().Validate(resp.GetMessages()); err != nil {
					t.Errorf("%s: the compacted conversation is invalid: %v", name, err)
					continue
				}
				again, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: resp.GetMessages(), Policy: policy})
				if err != nil {
					t.Errorf("%s: planning the compacted conversation: %v", name, err)
					continue
				}
				got, after, trigger := again.GetTokensBefore(), plan.GetTokensAfter(), plan.GetTriggerAtTokens()
				if got > after {
					t.Errorf("%s: the compacted conversation has %d tokens, more than tokens_after %d (%s)", name, got, after, plan.GetReason())
				}
				switch {
				case after <= trigger:
					if again.GetAction() != compactorv1.Action_ACTION_NONE {
						t.Errorf("%s: the compacted conversation (%d tokens, trigger %d) would compact again: %s", name, got, trigger, again.GetReason())
					}
				case strings.Contains(plan.GetReason(), "even the least this conversation can keep exceeds it") && after <= plan.GetUsableTokens():
					above++
				default:
					t.Errorf("%s: tokens_after %d above the trigger %d (usable %d): %s", name, after, trigger, plan.GetUsableTokens(), plan.GetReason())
				}
			}
		}
	}
	t.Logf("%d compactions (%d above the trigger by their floor), %d refused as irreducible", compacted, above, refused)
	if compacted == 0 {
		t.Fatal("nothing compacted: the property was not exercised")
	}
}

// tokensOf is the tokens a conversation costs, as Plan counts it.
func tokensOf(t *testing.T, srv *service.Server, msgs []*compactorv1.Message) int64 {
	t.Helper()
	p, err := srv.Plan(context.Background(), &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1 << 40}})
	if err != nil {
		var ve *engine.ValidationError
		if errors.As(err, &ve) {
			t.Fatalf("invalid conversation: %v", err)
		}
		t.Fatal(err)
	}
	return p.GetTokensBefore()
}

// genAgentConversation generates an agent run: a system prompt, a task, then turns of
// function calls with their results (some large, some errors), text-protocol commands
// answered by observations, the agent's statements and the user's follow-up requests.
func genAgentConversation(r *rand.Rand) []*compactorv1.Message {
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "w%d_%d", r.IntN(500), i%7)
		}
		return b.String()
	}
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are an agent. "+words(r.IntN(400)))),
		irtest.User("Fix the bug in src/app.py: " + words(10+r.IntN(200))),
	}
	textProtocol := r.IntN(3) == 0
	for turn := range 5 + r.IntN(40) {
		switch {
		case r.IntN(8) == 0:
			msgs = append(msgs, irtest.Assistant(words(5+r.IntN(60))), irtest.User("Also "+words(3+r.IntN(40))))
		case textProtocol:
			msgs = append(msgs, irtest.Assistant("THOUGHT: "+words(5+r.IntN(40))+"\n\n```bash\ncat src/f"+fmt.Sprint(turn)+".py\n```"),
				irtest.User(fmt.Sprintf("<returncode>%d</returncode>\n<output>\n%s\n</output>", r.IntN(2), words(r.IntN(2000)))))
		default:
			id := fmt.Sprint("c", turn)
			out := irtest.OutText(words(r.IntN(3000)))
			if r.IntN(6) == 0 {
				out = irtest.OutError("Error: " + words(r.IntN(50)))
			}
			msgs = append(msgs, irtest.Assistant(words(r.IntN(30)), irtest.Call(id, "read_file", fmt.Sprintf(`{"path":"src/f%d.py"}`, turn))),
				irtest.Result(id, "read_file", out))
		}
	}
	return msgs
}

// TestCompactFitsTheWindowAsCallersCount is the window promise with the options callers
// really send (issue 33): their own token counts (0.5, 0.8 and 1.25 of compactord's), a
// provider's reported usage, instructions for the summary, a target provider, and an LLM
// summarizer (the one-line model, through the official SDK). For every Compact that
// compacts, the conversation it returns, planned again as the caller would plan it (its own
// counts, as Compact returned them), counts at most tokens_after, and tokens_after is at
// most the trigger unless even the least the conversation can keep exceeds it (then within
// the usable window).
func TestCompactFitsTheWindowAsCallersCount(t *testing.T) {
	sum, err := measure.NewSummarizer("oneline")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sum.Close)
	srv := sum.Server(nil)
	var convs [][]*compactorv1.Message
	for _, f := range corpus.Files(t) {
		lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		convs = append(convs, lifted.GetMessages())
	}
	n := 15
	if testing.Short() {
		n = 5
	}
	for seed := range n {
		convs = append(convs, genAgentConversation(rand.New(rand.NewPCG(uint64(seed), 23))))
	}
	counted := func(scale float64) func([]*compactorv1.Message, *compactorv1.CompactRequest) {
		return func(msgs []*compactorv1.Message, req *compactorv1.CompactRequest) {
			plan, err := srv.Plan(context.Background(), &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1 << 40}})
			if err != nil {
				t.Fatal(err)
			}
			req.Messages = make([]*compactorv1.Message, len(msgs))
			for i, m := range msgs {
				c := proto.CloneOf(m)
				c.TokenCount = max(1, int64(math.Round(scale*float64(plan.GetMessageTokens()[i]))))
				req.Messages[i] = c
			}
		}
	}
	variants := []struct {
		name string
		edit func([]*compactorv1.Message, *compactorv1.CompactRequest)
	}{
		{"caller counts 0.5x", counted(0.5)},
		{"caller counts 0.8x", counted(0.8)},
		{"caller counts 1.25x", counted(1.25)},
		{"reported usage 0.8x of the first 70%", func(msgs []*compactorv1.Message, req *compactorv1.CompactRequest) {
			k := len(msgs) * 7 / 10
			p, err := srv.Plan(context.Background(), &compactorv1.PlanRequest{Messages: msgs[:k], Policy: &compactorv1.Policy{ContextWindow: 1 << 40}})
			if err != nil {
				t.Fatal(err)
			}
			req.Policy.ReportedUsage = &compactorv1.Usage{InputTokens: max(1, p.GetTokensBefore()*8/10), MessageCount: int32(k)}
		}},
		{"instructions", func(_ []*compactorv1.Message, req *compactorv1.CompactRequest) {
			req.Instructions = "Keep every file path and the failing test names."
		}},
		{"target provider", func(_ []*compactorv1.Message, req *compactorv1.CompactRequest) {
			req.TargetProvider = compactorv1.Provider_PROVIDER_GEMINI
		}},
		{"LLM summarizer", func(_ []*compactorv1.Message, req *compactorv1.CompactRequest) { req.Summarizer = sum.Name }},
	}
	ctx := context.Background()
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			compacted := 0
			for k, msgs := range convs {
				total := tokensOf(t, srv, msgs)
				for _, pct := range []int64{15, 45, 75} {
					for _, force := range []bool{false, true} {
						req := &compactorv1.CompactRequest{Messages: msgs, Force: force, Policy: &compactorv1.Policy{ContextWindow: max(total*pct/100, 16)}}
						v.edit(msgs, req)
						name := fmt.Sprintf("conversation %d at %d%%, force %v", k, pct, force)
						resp, err := srv.Compact(ctx, req)
						if err != nil {
							if status.Code(err) != codes.FailedPrecondition {
								t.Errorf("%s: %v", name, err)
							}
							continue
						}
						if !resp.GetCompacted() {
							continue
						}
						compacted++
						checkFits(t, srv, name, req.GetPolicy(), resp)
					}
				}
			}
			if compacted < len(convs) {
				t.Fatalf("%d compactions over %d conversations: the property was not exercised", compacted, len(convs))
			}
		})
	}
}

// checkFits checks the window promise of one compaction, planning what it returned again
// without the reported usage (a host has none yet for a conversation it has not sent).
func checkFits(t *testing.T, srv *service.Server, name string, policy *compactorv1.Policy, resp *compactorv1.CompactResponse) {
	t.Helper()
	policy = proto.CloneOf(policy)
	policy.ReportedUsage = nil
	again, err := srv.Plan(context.Background(), &compactorv1.PlanRequest{Messages: resp.GetMessages(), Policy: policy})
	if err != nil {
		t.Errorf("%s: planning the compacted conversation: %v", name, err)
		return
	}
	plan := resp.GetPlan()
	got, after, trigger := again.GetTokensBefore(), plan.GetTokensAfter(), plan.GetTriggerAtTokens()
	if got > after {
		t.Errorf("%s: the compacted conversation has %d tokens, more than tokens_after %d (%s)", name, got, after, plan.GetReason())
	}
	if after > trigger && (after > plan.GetUsableTokens() || plan.GetAction() == compactorv1.Action_ACTION_NONE) {
		t.Errorf("%s: tokens_after %d above the trigger %d (usable %d): %s", name, after, trigger, plan.GetUsableTokens(), plan.GetReason())
	}
}
