package service_test

import (
	"context"
	"strings"
	"testing"

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
