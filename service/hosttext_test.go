package service_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/service"
)

// TestKeptRequestLeavesHostText: Claude Code, after compacting on its own, sends the user's next
// words in one message with its CLAUDE.md reminder, its summary and the files it read again.
// Compacting that conversation keeps the CLAUDE.md block in the head and the user's words
// verbatim after the summary; Claude Code's summary and re-read files are host text, which the
// summary folds: kept whole as the user's request they made the conversation irreducible.
func TestKeptRequestLeavesHostText(t *testing.T) {
	claudeMd := "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n" +
		"Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n- Always use egrep, never use grep!\n</system-reminder>"
	continued := "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n" +
		"Summary:\n1. Primary Request and Intent: a single page weather app in graz, in weather/index.html.\n" + strings.Repeat("The app fetches open-meteo and renders a card. ", 120)
	reread := "Result of calling the Read tool: \"" + strings.Repeat("<div class=\\\"card\\\">weather</div>\\n", 300) + "\""
	words := "alright, i changed my mind, please delete the weather folder"
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(claudeMd), irtest.Text(continued),
			irtest.Text("Called the Read tool with the following input: {\"file_path\":\"/repo/weather/index.html\"}"), irtest.Text(reread), irtest.Text(words)),
		irtest.Assistant("", irtest.Call("b1", "Bash", `{"command":"rm -rf weather"}`)),
		irtest.Result("b1", "Bash", irtest.OutText("")),
		irtest.Assistant("Weather folder deleted."),
		irtest.User("bye"),
		irtest.Assistant("Bye!"),
	}
	srv := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})})
	pol := &compactorv1.Policy{ContextWindow: 4000}
	ctx := context.Background()
	plan, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: pol})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		t.Fatalf("action %v: %s", plan.GetAction(), plan.GetReason())
	}
	resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: msgs, Policy: pol})
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	out := resp.GetMessages()
	sum := engine.LatestSummary(out)
	if sum < 0 {
		t.Fatalf("no summary in %d messages: compacted=%v %s", len(out), resp.GetCompacted(), resp.GetReason())
	}
	var head, kept []string
	for _, m := range out[:sum] {
		head = append(head, engine.UserWords(m)+messageText(m))
	}
	if !strings.Contains(strings.Join(head, "\n"), "Always use egrep, never use grep!") {
		t.Errorf("the CLAUDE.md block is not in the head: %q", head)
	}
	for _, m := range out[sum+1:] {
		if m.GetRole() == compactorv1.Role_ROLE_USER {
			kept = append(kept, messageText(m))
		}
	}
	if len(kept) == 0 || kept[0] != words {
		t.Errorf("the messages after the summary open with %q, want the user's words alone %q", kept, words)
	}
	if got := resp.GetPlan().GetTokensAfter(); got > plan.GetUsableTokens() {
		t.Errorf("tokens_after %d over the usable window %d", got, plan.GetUsableTokens())
	}
	if s := engine.SummaryText(out[sum]); !strings.Contains(s, "a single page weather app in graz") {
		t.Errorf("the summary does not carry Claude Code's summary:\n%s", s)
	}
}

// messageText is m's text parts, joined.
func messageText(m *compactorv1.Message) string {
	var b []string
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil {
			b = append(b, t.GetText())
		}
	}
	return strings.Join(b, "\n")
}

const hostClaudeMd = "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n" +
	"Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n- Always use egrep, never use grep!\n</system-reminder>"

func hostContinued() string {
	return "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n" +
		"Summary:\n1. Primary Request and Intent: a single page weather app in graz.\n" + strings.Repeat("The app fetches open-meteo and renders a card. ", 120)
}

func hostConversation(first *compactorv1.Message) []*compactorv1.Message {
	return []*compactorv1.Message{
		first,
		irtest.Assistant("", irtest.Call("b1", "Bash", `{"command":"rm -rf weather"}`)),
		irtest.Result("b1", "Bash", irtest.OutText("")),
		irtest.Assistant("Weather folder deleted."),
		irtest.User("bye"),
		irtest.Assistant("Bye!"),
	}
}

// checkCountsWhatItSends compacts msgs under window (scaled caller counts when scale > 0) and checks that the
// compacted conversation, planned again, counts at most tokens_after.
func checkCountsWhatItSends(t *testing.T, msgs []*compactorv1.Message, window int64, scale float64) *compactorv1.CompactResponse {
	t.Helper()
	srv := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})})
	ctx := context.Background()
	pol := &compactorv1.Policy{ContextWindow: window}
	if scale > 0 {
		p, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1 << 40}})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]*compactorv1.Message, len(msgs))
		for i, m := range msgs {
			c := proto.CloneOf(m)
			c.TokenCount = max(1, int64(math.Round(scale*float64(p.GetMessageTokens()[i]))))
			out[i] = c
		}
		msgs = out
	}
	resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: msgs, Policy: pol, Force: true})
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if !resp.GetCompacted() {
		t.Fatalf("not compacted: %s", resp.GetReason())
	}
	again, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: resp.GetMessages(), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	if got, after := again.GetTokensBefore(), resp.GetPlan().GetTokensAfter(); got > after {
		t.Errorf("scale %v: the compacted conversation counts %d tokens, more than tokens_after %d\nplan: %s", scale, got, after, resp.GetPlan().GetReason())
		for i, m := range resp.GetMessages() {
			t.Logf("out[%d] %v %d tokens (token_count %d): %.80q", i, m.GetRole(), again.GetMessageTokens()[i], m.GetTokenCount(), messageText(m))
		}
	}
	return resp
}

// TestKeptRequestWithHostTextCountsWhatItSends: whatever shape a request with a host's text
// takes, what Compact returns, planned again, counts at most the plan's tokens_after (with the
// tokenizer's counts and with the caller's, scaled): the user's words sharing a part with the
// CLAUDE.md reminder (they go to the head with it, and Claude Code's summary beside them is no
// request), words beside host parts, a reminder inside the words, a reminder part.
func TestKeptRequestWithHostTextCountsWhatItSends(t *testing.T) {
	first := irtest.Msg(compactorv1.Role_ROLE_USER,
		irtest.Text(hostClaudeMd+"\n\nalright, i changed my mind, please delete the weather folder"),
		irtest.Text(hostContinued()))
	msgs := hostConversation(first)
	for _, scale := range []float64{0, 0.5, 1.25} {
		checkCountsWhatItSends(t, msgs, 4000, scale)
	}
}

func TestKeptRequestWithHostTextVariants(t *testing.T) {
	reread := "Result of calling the Read tool: \"" + strings.Repeat("<div class=\\\"card\\\">weather</div>\\n", 300) + "\""
	words := "alright, i changed my mind, please delete the weather folder"
	cases := map[string]*compactorv1.Message{
		"claudeMd part, host parts, words": irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(hostClaudeMd), irtest.Text(hostContinued()),
			irtest.Text("Called the Read tool with the following input: {\"file_path\":\"/repo/weather/index.html\"}"), irtest.Text(reread), irtest.Text(words)),
		"host parts, words": irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(hostContinued()), irtest.Text(reread), irtest.Text(words)),
		"host parts, words with a reminder inside": irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(hostContinued()), irtest.Text(reread),
			irtest.Text("<system-reminder>todo list empty</system-reminder>\n"+words)),
		"host parts, reminder part, words": irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(hostContinued()),
			irtest.Text("<system-reminder>todo list empty</system-reminder>"), irtest.Text(words)),
	}
	for name, first := range cases {
		t.Run(name, func(t *testing.T) {
			for _, w := range []int64{1500, 2500, 4000} {
				for _, scale := range []float64{0, 0.5, 0.8, 1.25} {
					checkCountsWhatItSends(t, hostConversation(first), w, scale)
				}
			}
		})
	}
}

func hostAgent(first *compactorv1.Message, turns int) []*compactorv1.Message {
	msgs := []*compactorv1.Message{irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are Claude Code."+strings.Repeat(" be helpful.", 50))), first}
	for i := range turns {
		id := "c" + strings.Repeat("x", i)
		msgs = append(msgs, irtest.Assistant("reading", irtest.Call(id, "Read", `{"file_path":"/repo/f.go"}`)),
			irtest.Result(id, "Read", irtest.OutText(strings.Repeat("line of code ", 40+10*i))))
	}
	return append(msgs, irtest.Assistant("done"))
}

// TestKeptRequestWithHostTextSweep: the newest request, with a host's text, kept before the
// cut at windows from 10% to 90% of the conversation, with and without reported_usage.
func TestKeptRequestWithHostTextSweep(t *testing.T) {
	reread := "Result of calling the Read tool: \"" + strings.Repeat("<div class=\\\"card\\\">weather</div>\\n", 300) + "\""
	words := "alright, i changed my mind, please delete the weather folder"
	firsts := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(hostClaudeMd), irtest.Text(hostContinued()), irtest.Text(reread), irtest.Text(words)),
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(hostContinued()), irtest.Text(words)),
	}
	srv := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})})
	ctx := context.Background()
	for k, first := range firsts {
		msgs := hostAgent(first, 12)
		total := tokensOf(t, srv, msgs)
		for pct := int64(10); pct <= 90; pct += 10 {
			for _, usage := range []bool{false, true} {
				pol := &compactorv1.Policy{ContextWindow: total * pct / 100}
				if usage {
					n := len(msgs) * 7 / 10
					p, _ := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs[:n], Policy: &compactorv1.Policy{ContextWindow: 1 << 40}})
					pol.ReportedUsage = &compactorv1.Usage{InputTokens: max(1, p.GetTokensBefore()*8/10), MessageCount: int32(n)}
				}
				resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: msgs, Policy: pol, Force: true})
				if err != nil {
					continue // too small a window for the head: irreducible
				}
				if !resp.GetCompacted() {
					continue
				}
				pol2 := proto.CloneOf(pol)
				pol2.ReportedUsage = nil
				again, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: resp.GetMessages(), Policy: pol2})
				if err != nil {
					t.Fatal(err)
				}
				if got, after := again.GetTokensBefore(), resp.GetPlan().GetTokensAfter(); got > after {
					t.Errorf("%d %d%% usage %v: %d > tokens_after %d: %s", k, pct, usage, got, after, resp.GetPlan().GetReason())
				}
			}
		}
	}
}
