package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
)

// anchoredSteps is how many compactions in a row TestCompactionsBuildOnSummaries makes of
// each session.
const anchoredSteps = 5

// markdownReply answers a summary prompt as an LLM that writes markdown headings: what the
// previous summary said under its Plan heading is replaced by a plan of its own, and it
// quotes only the newest line of the transcript's first user message, so that what the
// next compaction must keep of the earlier ones is what the summary check and the anchor
// reader carry.
func markdownReply(n int64, prompt string) (int, string) {
	t, _ := transcriptOf(prompt)
	first := ""
	for _, l := range strings.Split(t, "\n") {
		if l = strings.TrimSpace(l); len(l) > 20 && !strings.HasPrefix(l, "[") {
			first = l
			break
		}
	}
	return 0, fmt.Sprintf("## User requests and constraints\n- %q\n\n**Key decisions**\n- keep going (call %d)\n\n"+
		"## Files and identifiers\n- `src/app.py`: edited in call %d\n\n## Plan\n1. Finish the change of call %d\n2. Run the tests\n\n## Current work\nCall %d read the transcript.\n", first, n, n, n, n)
}

// TestCompactionsBuildOnSummaries is issue 32's item 2 as a property: every session of the
// corpus and of the generator is compacted anchoredSteps times in a row (each compaction's
// output plus the session's next turns is the next input), with the extractive summarizer
// and with an LLM (the local fake) that writes markdown headings; after each compaction:
//
//   - every request so far (the user's own words, engine.UserWords) is verbatim in what the
//     model is sent, or one of the session's compactions reported it dropped
//     (Summary.requests_dropped);
//   - every line of the standing instructions so far (engine.StandingPart) is there,
//     byte-identical;
//   - the summary holds a plan and where the work stopped when the previous one did, unless
//     the check reports it cut the summary (check_trimmed) to keep the requests, which rank
//     first;
//   - every file the previous summary's files ledger says was written (created, written or
//     edited) is still named.
func TestCompactionsBuildOnSummaries(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.ScriptPrompt(markdownReply, 0)
	reg, err := summarize.NewRegistry(&summarize.Config{Summarizers: []summarize.SummarizerConfig{{
		Name: "llm", Kind: summarize.KindOpenAI, BaseURL: llm.URL + "/v1", Model: "gpt-test", Timeout: 10 * time.Second,
	}}}, "", summarize.Options{Retry: summarize.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	n := 6
	if testing.Short() {
		n = 3
	}
	steps := 0
	for _, sum := range []string{"extractive", "llm"} {
		for _, s := range sessions(t, n) {
			srv := service.New(service.Options{Summarizers: reg, Cache: cache.NewMemory(cache.MemoryOptions{})})
			window := max(sessionMinWindow, int64(0.35*float64(tokensOf(t, srv, s.msgs))))
			name := fmt.Sprintf("%s by %s (window %d)", s.name, sum, window)
			steps += compactInSteps(t, srv, s, sum, window, func(k, turn int, resp *compactorv1.CompactResponse, prev string, dropped int) {
				where := fmt.Sprintf("%s, compaction %d (before message %d)", name, k, turn)
				sent := fidelity.NewHaystack(nil, sentMessages(resp.GetMessages()))
				if missing := missingRequests(sent, s.msgs[:turn]); len(missing) > dropped {
					t.Errorf("%s: %d requests lost, %d reported dropped so far; first lost: %q", where, len(missing), dropped, missing[0])
				}
				for _, l := range standingLines(s.msgs[:turn]) {
					if !sent.Has(l) {
						t.Errorf("%s: the standing instruction line %q is gone", where, l)
						break
					}
				}
				if prev == "" {
					return
				}
				now := resp.GetSummary().GetText()
				for _, h := range []string{"Plan", "Where it stopped"} {
					if strings.TrimSpace(section(prev, h)) != "" && strings.TrimSpace(section(now, h)) == "" && !resp.GetSummary().GetCheckTrimmed() {
						t.Errorf("%s: the previous summary said %q, this one does not:\n%s", where, h, now)
					}
				}
				for _, p := range writtenFiles(prev) {
					if !sent.Has(p) {
						t.Errorf("%s: the file %q the previous summary says was written is gone:\n%s", where, p, now)
						break
					}
				}
			})
		}
	}
	if steps < anchoredSteps*4 {
		t.Fatalf("only %d compactions: the property was hardly exercised", steps)
	}
}

// compactInSteps compacts s anchoredSteps times (forced) with summarizer sum at window: the
// held conversation plus the session's next turns up to the next step's assistant message,
// calling each with the compaction's number, the message it came before, the response, the
// previous compaction's summary ("" for the first) and the requests the compactions so far
// reported dropped. It returns the number of compactions made.
func compactInSteps(t *testing.T, srv *service.Server, s session, sum string, window int64, each func(k, turn int, resp *compactorv1.CompactResponse, prev string, dropped int)) int {
	t.Helper()
	var turns []int // the assistant messages, after the first message
	for i, m := range s.msgs {
		if i > 0 && m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			turns = append(turns, i)
		}
	}
	if len(turns) < anchoredSteps+1 {
		return 0
	}
	var held []*compactorv1.Message
	from, prev, dropped, k := 0, "", 0, 0
	for step := 1; step <= anchoredSteps; step++ {
		turn := turns[step*len(turns)/(anchoredSteps+1)]
		held = append(held, s.msgs[from:turn]...)
		from = turn
		resp, err := srv.Compact(context.Background(), &compactorv1.CompactRequest{Messages: held, Summarizer: sum, Force: true,
			Policy: &compactorv1.Policy{ContextWindow: window}})
		if err != nil {
			if is, _ := service.Irreducible(err); is {
				continue
			}
			t.Fatalf("%s by %s, step %d: %v", s.name, sum, step, err)
		}
		if !resp.GetCompacted() {
			continue
		}
		k++
		dropped += len(resp.GetSummary().GetRequestsDropped())
		each(k, turn, resp, prev, dropped)
		if w := strings.Join(resp.GetWarnings(), "\n"); len(resp.GetSummary().GetRequestsDropped()) > 0 && !strings.Contains(w, "messages[") {
			t.Errorf("%s by %s, step %d: requests %v dropped, no warning names their messages: %q", s.name, sum, step, resp.GetSummary().GetRequestsDropped(), w)
		}
		held, prev = resp.GetMessages(), engine.SummaryText(summaryMessage(resp.GetMessages()))
	}
	return k
}

// summaryMessage returns the COMPACT_SUMMARY message of msgs (nil for none).
func summaryMessage(msgs []*compactorv1.Message) *compactorv1.Message {
	for _, m := range msgs {
		if m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			return m
		}
	}
	return nil
}

// writtenFiles returns the files of a summary's files ledger (the sections whose heading
// starts with "Files") said to have been created, written or edited.
func writtenFiles(text string) []string {
	var out []string
	for _, l := range strings.Split(section(text, "Files"), "\n") {
		item, ok := strings.CutPrefix(strings.TrimSpace(l), "- ")
		if !ok {
			continue
		}
		path, acts, ok := strings.Cut(item, ": ")
		path = strings.Trim(path, "`")
		if ok && !strings.ContainsAny(path, " ,") && (strings.Contains(acts, "edited") || strings.Contains(acts, "created") || strings.Contains(acts, "written")) {
			out = append(out, path)
		}
	}
	return out
}
