// Package irtest builds IR conversations for tests.
package irtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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

// Msg returns a message of role with parts.
func Msg(role compactorv1.Role, parts ...*compactorv1.Part) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: parts}
}

// User returns a user message of text s.
func User(s string) *compactorv1.Message { return Msg(compactorv1.Role_ROLE_USER, Text(s)) }

// Assistant returns an assistant message with text s (when not empty) and tool calls.
func Assistant(s string, calls ...*compactorv1.Part) *compactorv1.Message {
	parts := calls
	if s != "" {
		parts = append([]*compactorv1.Part{Text(s)}, calls...)
	}
	return Msg(compactorv1.Role_ROLE_ASSISTANT, parts...)
}

// Call returns a tool-call part.
func Call(id, name, input string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
		ToolCallId: id, ToolName: name, InputJson: input}}}
}

// Result returns a tool message with the result of call id.
func Result(id, name string, out *compactorv1.ToolOutput) *compactorv1.Message {
	return Msg(compactorv1.Role_ROLE_TOOL, &compactorv1.Part{Content: &compactorv1.Part_ToolResult{
		ToolResult: &compactorv1.ToolResultPart{ToolCallId: id, ToolName: name, Output: out}}})
}

// OutText is a text tool output.
func OutText(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: s}}
}

// OutError is an error-text tool output.
func OutError(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: s}}
}

// ReadOpenAIChat reads an OpenAI Chat Completions request body ({"messages": [...]}) into
// IR messages. Test-only: it handles what the corpus uses (string / null / text-part
// content, tool_calls, tool messages), not the whole format.
func ReadOpenAIChat(t testing.TB, body []byte) []*compactorv1.Message {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	out := make([]*compactorv1.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		var text string
		if len(m.Content) > 0 && string(m.Content) != "null" {
			if err := json.Unmarshal(m.Content, &text); err != nil {
				var parts []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				if err := json.Unmarshal(m.Content, &parts); err != nil {
					t.Fatalf("messages[%d].content: %v", i, err)
				}
				var b []string
				for _, p := range parts {
					if p.Type == "text" {
						b = append(b, p.Text)
					}
				}
				text = strings.Join(b, "\n")
			}
		}
		switch m.Role {
		case "system", "developer":
			out = append(out, Msg(compactorv1.Role_ROLE_SYSTEM, Text(text)))
		case "user":
			out = append(out, User(text))
		case "assistant":
			var calls []*compactorv1.Part
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
				calls = append(calls, Call(c.ID, c.Function.Name, c.Function.Arguments))
			}
			out = append(out, Assistant(text, calls...))
		case "tool":
			name := m.Name
			if name == "" {
				name = names[m.ToolCallID]
			}
			out = append(out, Result(m.ToolCallID, name, OutText(text)))
		default:
			t.Fatalf("messages[%d]: role %q", i, m.Role)
		}
	}
	return out
}
