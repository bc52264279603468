package service_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
)

// The session replay of the property tests (issue 32): a host that, before each assistant
// message, plans what it holds at a context window of a share of the whole conversation's
// tokens (at least sessionMinWindow), compacts (not forced) when the plan acts, persists what
// Compact returns and appends the conversation's next messages.

// sessionMinWindow is the smallest context window a session is replayed at.
const sessionMinWindow = 8000

// sessionRatios are the context windows of the replays, as shares of each conversation's
// tokens.
var sessionRatios = []float64{0.35, 0.6}

// session is one conversation to replay.
type session struct {
	name string
	msgs []*compactorv1.Message
}

// sessions returns the corpus's conversations (Claude Code ones with the CLAUDE.md block where
// Claude Code puts it) and n generated agent runs, every third of them with the block too.
func sessions(t *testing.T, n int) []session {
	t.Helper()
	claudeMD, err := measure.ClaudeMD()
	if err != nil {
		t.Fatal(err)
	}
	var out []session
	for _, f := range corpus.Files(t) {
		lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		msgs := lifted.GetMessages()
		if measure.IsClaudeCode(f.Name, lifted.GetProvider(), msgs) {
			if _, _, own := measure.OwnClaudeMD(msgs); !own {
				msgs = measure.WithClaudeMD(msgs, claudeMD)
			}
		}
		out = append(out, session{f.Name, msgs})
	}
	for seed := range n {
		msgs := genAgentConversation(rand.New(rand.NewPCG(uint64(seed), 32)))
		if seed%3 == 0 {
			msgs = measure.WithClaudeMD(msgs, claudeMD)
		}
		out = append(out, session{fmt.Sprint("generated", seed), msgs})
	}
	return out
}

// step is one compaction of a replay.
type step struct {
	k    int // 1 for the session's first compaction
	turn int // the index in the conversation of the assistant message it came before
	// plan is the host's plan of what it held; resp what Compact returned; after a plan of
	// resp's messages at the same policy.
	plan  *compactorv1.PlanResponse
	resp  *compactorv1.CompactResponse
	after *compactorv1.PlanResponse
	// added is the tokens the conversation grew by since the previous model request;
	// consecutive is set when the previous request compacted too.
	added       int64
	consecutive bool
}

// replaySession replays s at window through srv as a host does, calling each for every
// compaction with the one before it (nil for the first). A failed call fails t.
func replaySession(t *testing.T, srv *service.Server, s session, window int64, each func(cur, prev *step)) (compactions int) {
	t.Helper()
	ctx := context.Background()
	policy := &compactorv1.Policy{ContextWindow: window}
	var held []*compactorv1.Message
	var prev *step
	var lastTokens int64 = -1 // the tokens of the previous model request
	lastCompacted := false
	for i, m := range s.msgs {
		if m.GetRole() != compactorv1.Role_ROLE_ASSISTANT || len(held) == 0 {
			held = append(held, m)
			continue
		}
		plan, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: held, Policy: policy})
		if err != nil {
			if is, _ := service.Irreducible(err); !is {
				t.Fatalf("%s at window %d, turn %d: Plan: %v", s.name, window, i, err)
			}
			held, lastTokens, lastCompacted = append(held, m), -1, false // no request is sent
			continue
		}
		sent, compacted := plan.GetTokensBefore(), false
		if plan.GetAction() != compactorv1.Action_ACTION_NONE {
			resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: held, Policy: policy})
			if err != nil {
				if is, _ := service.Irreducible(err); !is {
					t.Fatalf("%s at window %d, turn %d: Compact: %v", s.name, window, i, err)
				}
			} else if resp.GetCompacted() {
				after, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: resp.GetMessages(), Policy: policy})
				if err != nil {
					t.Fatalf("%s at window %d, turn %d: Plan of the compacted conversation: %v", s.name, window, i, err)
				}
				compactions++
				cur := &step{k: compactions, turn: i, plan: plan, resp: resp, after: after, consecutive: lastCompacted}
				if lastTokens >= 0 {
					cur.added = plan.GetTokensBefore() - lastTokens
				}
				each(cur, prev)
				prev, held, sent, compacted = cur, resp.GetMessages(), after.GetTokensBefore(), true
			}
		}
		lastTokens, lastCompacted = sent, compacted
		held = append(held, m)
	}
	return compactions
}

// TestSessionKeepsRequestsAndInstructions is issue 32's promise over whole sessions: every
// session of the corpus and of the generator, replayed as a host runs it at 35% and 60% of
// its tokens, and after each compaction:
//
//   - every line of every request so far (fidelity.Requests: the user's own words) is in
//     what the model is sent, unless the compaction reports it dropped (whole);
//   - every line of every standing instruction so far (engine.StandingPart: the CLAUDE.md
//     block among them) is in what the model is sent, always;
//   - the conversation is at most the plan's target, unless the plan's reason says why not;
//   - a compaction on the turn right after another only when that turn alone added more
//     than the gap between trigger and target;
//   - what the previous compaction's summary carried of the plan and the files is carried on.
func TestSessionKeepsRequestsAndInstructions(t *testing.T) {
	reg, err := summarize.NewRegistry(nil, "", summarize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 12
	if testing.Short() {
		n = 4
	}
	var total, withCheck, yielded, lostReported int
	for _, s := range sessions(t, n) {
		for _, ratio := range sessionRatios {
			srv := service.New(service.Options{Summarizers: reg, Cache: cache.NewMemory(cache.MemoryOptions{})})
			window := max(sessionMinWindow, int64(ratio*float64(tokensOf(t, srv, s.msgs))))
			name := fmt.Sprintf("%s at %.0f%% (window %d)", s.name, 100*ratio, window)
			dropped := 0 // the requests the session's compactions so far reported dropped
			total += replaySession(t, srv, s, window, func(cur, prev *step) {
				where := fmt.Sprintf("%s, compaction %d (before message %d)", name, cur.k, cur.turn)
				sent := fidelity.NewHaystack(nil, sentMessages(cur.resp.GetMessages()))
				missing := missingRequests(sent, s.msgs[:cur.turn])
				dropped += len(cur.resp.GetSummary().GetRequestsDropped())
				if len(missing) > dropped {
					t.Errorf("%s: %d requests lost, %d reported dropped so far; first lost: %q", where, len(missing), dropped, missing[0])
				}
				lostReported += min(len(missing), dropped)
				for _, l := range standingLines(s.msgs[:cur.turn]) {
					if !sent.Has(l) {
						t.Errorf("%s: the standing instruction line %q is gone", where, l)
						break
					}
				}
				if checkLanding(t, where, cur, prev) {
					yielded++
				}
				if prev == nil {
					return
				}
				withCheck++
				if lost := buildsOn(prev, cur); lost != "" {
					t.Errorf("%s: %s", where, lost)
				}
			})
		}
	}
	t.Logf("%d compactions, %d after another, %d on the turn right after one that landed above its target as its reason said; %d requests lost, all reported dropped",
		total, withCheck, yielded, lostReported)
	if withCheck == 0 {
		t.Fatal("no session compacted twice: the property was not exercised")
	}
}

// checkLanding checks where compaction cur landed: at most the target unless the reason says
// why (the target yields to the newest turn and the kept requests, or even the least exceeds
// the trigger); and, on the turn right after compaction prev, only when that turn alone added
// more than the gap between the trigger and prev's target (the headroom prev left; the target
// follows the session's median turn, so it moves), or prev landed above its target (as its
// reason said: then that headroom is not there). It reports whether cur is such a
// compaction after one above its target.
func checkLanding(t *testing.T, where string, cur, prev *step) (afterAbove bool) {
	t.Helper()
	plan := cur.resp.GetPlan()
	got, target, trigger := cur.after.GetTokensBefore(), plan.GetTargetTokens(), plan.GetTriggerAtTokens()
	if got > target && !strings.Contains(plan.GetReason(), " > target ") && !strings.Contains(plan.GetReason(), "is above the trigger") {
		t.Errorf("%s: %d tokens after it, above the target %d, and the reason does not say why: %s", where, got, target, plan.GetReason())
	}
	if !cur.consecutive {
		return false
	}
	if prev != nil {
		target = prev.resp.GetPlan().GetTargetTokens() // the headroom the previous compaction left
		if prev.after.GetTokensBefore() > target {
			return true
		}
	}
	if cur.added <= trigger-target {
		t.Errorf("%s: compacted on the turn right after another, which added %d tokens, no more than the gap %d between trigger %d and its target %d: %s",
			where, cur.added, trigger-target, trigger, target, plan.GetReason())
	}
	return false
}

// buildsOn returns what compaction cur lost of what prev's summary carried ("" for nothing):
// a file of its files ledger missing from what the model is sent after cur, or the plan it
// held (the latest one: a newer plan may replace it, none may not).
func buildsOn(prev, cur *step) string {
	sent := fidelity.NewHaystack(nil, sentMessages(cur.resp.GetMessages()))
	text, now := prev.resp.GetSummary().GetText(), cur.resp.GetSummary().GetText()
	for _, f := range ledgerFiles(section(text, "Files")) {
		if !sent.Has(f) {
			return fmt.Sprintf("the file %q of the previous summary's files ledger is gone", f)
		}
	}
	if strings.TrimSpace(section(text, "Plan")) != "" && strings.TrimSpace(section(now, "Plan")) == "" {
		return "the previous summary held a plan, this one holds none"
	}
	return ""
}

// section returns the body of the summary's sections whose heading starts with prefix ("" for
// none): the lines after "## heading" up to the next heading of that level.
func section(text, prefix string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(text, "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			in = strings.HasPrefix(h, prefix)
			continue
		}
		if in {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ledgerFiles returns the files a files ledger names at the start of its items
// ("- path: what was done").
func ledgerFiles(ledger string) []string {
	var out []string
	for _, l := range strings.Split(ledger, "\n") {
		item, ok := strings.CutPrefix(strings.TrimSpace(l), "- ")
		if !ok {
			continue
		}
		if path, _, ok := strings.Cut(item, ": "); ok && !strings.ContainsAny(path, " ,") {
			out = append(out, path)
		}
	}
	return out
}

// sentMessages returns the messages of msgs a model is sent (engine.Sent).
func sentMessages(msgs []*compactorv1.Message) []*compactorv1.Message {
	var out []*compactorv1.Message
	for i, s := range engine.Sent(msgs) {
		if s {
			out = append(out, msgs[i])
		}
	}
	return out
}

// missingRequests returns the first line of each request of msgs (fidelity.Requests) of which
// hay lacks a line.
func missingRequests(hay fidelity.Haystack, msgs []*compactorv1.Message) []string {
	var out []string
	for _, r := range fidelity.Requests(msgs) {
		for _, l := range r.Lines {
			if !hay.Has(l) {
				out = append(out, r.Lines[0])
				break
			}
		}
	}
	return out
}

// standingLines returns the lines of the standing instructions of msgs' user messages
// (engine.StandingPart).
func standingLines(msgs []*compactorv1.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.GetRole() != compactorv1.Role_ROLE_USER {
			continue
		}
		for _, p := range m.GetParts() {
			if engine.StandingPart(p) {
				out = append(out, fidelity.Lines(p.GetText().GetText())...)
			}
		}
	}
	return out
}
