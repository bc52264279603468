package engine_test

import (
	"fmt"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

func textMessage(role compactorv1.Role, s string) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
}

// Plan a conversation that has outgrown an 8k window: it summarizes the old turns and keeps
// the recent ones verbatim, cutting at the start of a user turn; the user's first question
// (the task) stays verbatim right after the summary.
func ExamplePlan() {
	counter := engine.NewCounter(0) // one per process, shared by all requests
	msgs := []*compactorv1.Message{textMessage(compactorv1.Role_ROLE_SYSTEM, "You are a helpful assistant.")}
	for i := range 10 {
		msgs = append(msgs,
			textMessage(compactorv1.Role_ROLE_USER, fmt.Sprintf("question %d: %s", i, strings.Repeat("details ", 200))),
			textMessage(compactorv1.Role_ROLE_ASSISTANT, fmt.Sprintf("answer %d: %s", i, strings.Repeat("more ", 150))))
	}
	plan, err := engine.Plan(msgs, &compactorv1.Policy{ContextWindow: 8000, Tokenizer: "approx"}, counter)
	if err != nil {
		panic(err)
	}
	fmt.Println(plan.Action, "cut at", plan.CutIndex, "tokens", plan.TokensBefore, "→", plan.TokensAfter)
	fmt.Println(plan.Dispositions[0], plan.Dispositions[1], plan.Dispositions[2], plan.Dispositions[plan.CutIndex])
	fmt.Println("head", plan.HeadTokens, "+ summary", plan.SummaryTokens, "+ requests", plan.KeptRequestTokens, "+ tail", plan.TailTokens)
	// Output:
	// ACTION_SUMMARIZE cut at 19 tokens 6021 → 2520
	// DISPOSITION_KEEP DISPOSITION_KEEP_REQUEST DISPOSITION_SUMMARIZE DISPOSITION_KEEP
	// head 11 + summary 687 + requests 1221 + tail 601

}
