package engine

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Builders for test conversations.

func plText(s string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}
}

func plCall(id, name, input string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
		ToolCallId: id, ToolName: name, InputJson: input}}}
}

func plResult(id, name, out string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
		ToolCallId: id, ToolName: name, Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: out}}}}}
}

func plApprovalReq(id, callID string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{
		ApprovalId: id, ToolCallId: callID}}}
}

func plApprovalResp(id string, ok bool) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{
		ApprovalId: id, Approved: ok}}}
}

func plMsg(role compactorv1.Role, parts ...*compactorv1.Part) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: parts}
}

func plSysMsg(s string) *compactorv1.Message  { return plMsg(compactorv1.Role_ROLE_SYSTEM, plText(s)) }
func plUserMsg(s string) *compactorv1.Message { return plMsg(compactorv1.Role_ROLE_USER, plText(s)) }
func plAsstMsg(parts ...*compactorv1.Part) *compactorv1.Message {
	return plMsg(compactorv1.Role_ROLE_ASSISTANT, parts...)
}
func plToolMsg(parts ...*compactorv1.Part) *compactorv1.Message {
	return plMsg(compactorv1.Role_ROLE_TOOL, parts...)
}

func plSummaryMsg(s string) *compactorv1.Message {
	m := plUserMsg(s)
	m.Kind = compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY
	return m
}

func plPromptMsg(s string) *compactorv1.Message {
	m := plUserMsg(s)
	m.Kind = compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT
	return m
}

func plPinned(m *compactorv1.Message) *compactorv1.Message {
	m.Pinned = true
	return m
}

// words returns n distinct-ish words, about n tokens under the BPE tokenizers.
func plWords(n int, seed string) string {
	b := make([]byte, 0, n*6)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, seed...)
		b = append(b, byte('a'+i%26))
	}
	return string(b)
}
