package service_test

import (
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
)

// TestCompactCheckAppendsDroppedRequests: an LLM whose summary drops the task (one line)
// gets it appended verbatim by the check, within the summary budget; the response reports
// the check and a cache hit returns the same checked summary.
func TestCompactCheckAppendsDroppedRequests(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.Script(func(int64) (int, string) { return 0, "The user asked for some fixes." }, 0)
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{})})
	msgs := irtest.Conversation(20)
	req := compactReq(msgs)
	req.Policy.SummaryMaxTokens = 4000
	// Only the newest request stays a message (the user's newest text is never cut): the
	// summary must hold every other one.
	req.Policy.KeepUserMessagesTokens = -1
	resp, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, msgs, resp)
	sum := resp.GetSummary()
	if sum.GetRequestsTotal() < 2 || sum.GetRequestsKeptVerbatim() != 1 || sum.GetRequestsRetained() != 1 ||
		sum.GetRequestsAppended() != sum.GetRequestsTotal()-1 {
		t.Errorf("check = %d total, %d retained (%d kept as messages), %d appended; want every request but the newest appended",
			sum.GetRequestsTotal(), sum.GetRequestsRetained(), sum.GetRequestsKeptVerbatim(), sum.GetRequestsAppended())
	}
	if !strings.Contains(sum.GetText(), fidelity.CheckedHeading) {
		t.Fatalf("summary lacks the check's section:\n%s", sum.GetText())
	}
	cut := int(resp.GetPlan().GetCutIndex())
	var rng []*compactorv1.Message
	for i := 1; i < cut; i++ {
		rng = append(rng, msgs[i])
	}
	if f := fidelity.Measure(rng, resp.GetMessages()); f.Requests != 1 || f.Paths != 1 {
		t.Errorf("fidelity after the check = %+v, want every request and path kept", f)
	}
	// The check appends the task first: the first request of the range is in the summary.
	if first := fidelity.Requests(rng)[0].Lines[0]; !strings.Contains(fidelity.Normalize(sum.GetText()), first) {
		t.Errorf("the task %q is not in the checked summary", first)
	}
	again, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT ||
		again.GetSummary().GetText() != sum.GetText() || again.GetSummary().GetRequestsAppended() != sum.GetRequestsAppended() {
		t.Errorf("cache hit %v returned a different summary or check", again.GetCacheStatus())
	}
}

// TestCompactUnpaidRange: a forced compaction of a range too short for any summary to pay
// for itself answers compacted=false with the reason, not an error, and does not call the
// summarizer.
func TestCompactUnpaidRange(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm})
	msgs := []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{irtest.Text("hi")}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{irtest.Text("hello")}},
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{irtest.Text("fix it")}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{irtest.Text("done")}},
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{irtest.Text("thanks")}},
	}
	req := compactReq(msgs)
	req.Force = true
	for range 2 { // the same answer on retry
		resp, err := client.Compact(t.Context(), req)
		if err != nil {
			t.Fatalf("Compact = %v; a range no summary can pay for is not an error", err)
		}
		if resp.GetPlan().GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
			t.Fatalf("the plan did not summarize (%v: %s): the test needs a forced summary", resp.GetPlan().GetAction(), resp.GetPlan().GetReason())
		}
		if resp.GetCompacted() || len(resp.GetMessages()) != 0 || !strings.Contains(resp.GetReason(), "pay") {
			t.Errorf("compacted = %v, %d messages, reason %q; want compacted=false with the reason",
				resp.GetCompacted(), len(resp.GetMessages()), resp.GetReason())
		}
	}
	if llm.Calls() != 0 {
		t.Errorf("%d LLM calls for a range no summary can pay for", llm.Calls())
	}
}
