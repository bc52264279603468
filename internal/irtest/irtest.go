// Package irtest builds IR conversations for tests.
package irtest

import (
	"fmt"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Text returns a text part.
func Text(s string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}
}

// Conversation builds a deterministic agent conversation: a system message, then turns of
// a user request, an assistant tool call, a large tool output and an assistant reply (about
// 520 o200k tokens a turn). Every text carries a marker of six characters at its start
// ("req-07", "out-07", "ans-07") so tests can see which messages a summarizer received.
// Conversation(n)'s messages are a prefix of Conversation(n+k)'s.
func Conversation(turns int) []*compactorv1.Message {
	filler := strings.Repeat("The quick brown fox jumps over the lazy dog while the build runs. ", 30)
	msgs := []*compactorv1.Message{{Role: compactorv1.Role_ROLE_SYSTEM, Parts: []*compactorv1.Part{Text("You are a careful coding agent.")}}}
	for i := range turns {
		id := fmt.Sprintf("call_%02d", i)
		msgs = append(msgs,
			&compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
				Text(fmt.Sprintf("req-%02d: please fix module m%02d.go. %s", i, i, filler[:300]))}},
			&compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ToolCall{
				ToolCall: &compactorv1.ToolCallPart{ToolCallId: id, ToolName: "read_file", InputJson: fmt.Sprintf(`{"path":"m%02d.go"}`, i)}}}}},
			&compactorv1.Message{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ToolResult{
				ToolResult: &compactorv1.ToolResultPart{ToolCallId: id, ToolName: "read_file",
					Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: fmt.Sprintf("out-%02d: %s", i, filler)}}}}}}},
			&compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
				Text(fmt.Sprintf("ans-%02d: fixed m%02d.go.", i, i))}},
		)
	}
	return msgs
}
