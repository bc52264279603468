package engine

import (
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// keyTestMessage has a field of every kind the key reads: message and part options, strings
// of 0, 1-3, 4-8, 9-16 and longer lengths, inline data, tool content parts.
func keyTestMessage() *compactorv1.Message {
	opts, _ := structpb.NewStruct(map[string]any{"cacheControl": map[string]any{"type": "ephemeral"}})
	content := &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: []*compactorv1.Part{
		plText("inner text"),
		{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{Source: &compactorv1.ImagePart_Data{Data: []byte("\x89PNG....")}, MediaType: "image/png"}}},
	}}}}
	return &compactorv1.Message{
		Id:   "m1",
		Role: compactorv1.Role_ROLE_ASSISTANT,
		Parts: []*compactorv1.Part{
			plText("a text part long enough for the long-string hash"),
			{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: "thinking", Signature: "sig", RedactedData: ""}}},
			plCall("call_1", "read_file", `{"path":"a.go"}`),
			{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{ToolCallId: "call_0", ToolName: "grep", Output: content}}},
			{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{ToolCallId: "call_2", ToolName: "ls",
				Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Json{Json: `{"files":["a.go","b.go"]}`}}}}},
			{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{Source: &compactorv1.FilePart_Url{Url: "https://example.com/a.pdf"}, MediaType: "application/pdf", Filename: "a.pdf"}}},
			plApprovalReq("ap1", "call_1"),
			{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: "ap0", Approved: true, Reason: "fine"}}},
		},
		ProviderOptions: map[string]*structpb.Struct{"anthropic": opts},
		TokenCount:      42,
	}
}

// canonOf is Canon(m) as a string.
func canonOf(m *compactorv1.Message) string { return string(Canon(nil, m)) }

// unknown127 is an unknown field (number 127, varint v).
func unknown127(v byte) protoreflect.RawFields { return protoreflect.RawFields{0xf8, 0x07, v} }

// TestContentKeyFollowsCanon changes one thing at a time in a message, at every level: the
// key changes exactly when canon(m), which the prefix hash covers, does.
func TestContentKeyFollowsCanon(t *testing.T) {
	c := NewCounter(1 << 20)
	part := func(i int) func(m *compactorv1.Message) *compactorv1.Part {
		return func(m *compactorv1.Message) *compactorv1.Part { return m.Parts[i] }
	}
	tests := []struct {
		name   string
		change func(m *compactorv1.Message)
		same   bool // canon (and so the key) must not change
	}{
		{"id", func(m *compactorv1.Message) { m.Id = "other" }, true},
		{"token_count", func(m *compactorv1.Message) { m.TokenCount = 7 }, true},
		{"options rebuilt", func(m *compactorv1.Message) {
			opts, _ := structpb.NewStruct(map[string]any{"cacheControl": map[string]any{"type": "ephemeral"}})
			m.ProviderOptions = map[string]*structpb.Struct{"anthropic": opts}
		}, true},
		{"role", func(m *compactorv1.Message) { m.Role = compactorv1.Role_ROLE_USER }, false},
		{"unknown role value", func(m *compactorv1.Message) { m.Role = compactorv1.Role(-3) }, false},
		{"kind", func(m *compactorv1.Message) { m.Kind = compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY }, false},
		{"lifecycle", func(m *compactorv1.Message) { m.Lifecycle = compactorv1.Lifecycle_LIFECYCLE_DYNAMIC }, false},
		{"pinned", func(m *compactorv1.Message) { m.Pinned = true }, false},
		{"message options", func(m *compactorv1.Message) { m.ProviderOptions = nil }, false},
		{"message options value", func(m *compactorv1.Message) {
			opts, _ := structpb.NewStruct(map[string]any{"cacheControl": map[string]any{"type": "persistent"}})
			m.ProviderOptions = map[string]*structpb.Struct{"anthropic": opts}
		}, false},
		{"message unknown field", func(m *compactorv1.Message) { m.ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"part order", func(m *compactorv1.Message) { m.Parts[0], m.Parts[1] = m.Parts[1], m.Parts[0] }, false},
		{"part removed", func(m *compactorv1.Message) { m.Parts = m.Parts[:len(m.Parts)-1] }, false},
		{"nil content", func(m *compactorv1.Message) { m.Parts[1].Content = nil }, false},
		{"part options", func(m *compactorv1.Message) { m.Parts[0].ProviderOptions = m.ProviderOptions }, false},
		{"part unknown field", func(m *compactorv1.Message) { part(0)(m).ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"text part unknown field", func(m *compactorv1.Message) { m.Parts[0].GetText().ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"text unknown field value", func(m *compactorv1.Message) {
			m.Parts[0].GetText().ProtoReflect().SetUnknown(unknown127(2))
		}, false},
		{"tool call unknown field", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"tool result unknown field", func(m *compactorv1.Message) { m.Parts[3].GetToolResult().ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"tool output unknown field", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().ProtoReflect().SetUnknown(unknown127(1))
		}, false},
		{"tool content unknown field", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().ProtoReflect().SetUnknown(unknown127(1))
		}, false},
		{"nested part unknown field", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[0].ProtoReflect().SetUnknown(unknown127(1))
		}, false},
		{"reasoning unknown field", func(m *compactorv1.Message) { m.Parts[1].GetReasoning().ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"image unknown field", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[1].GetImage().ProtoReflect().SetUnknown(unknown127(1))
		}, false},
		{"file unknown field", func(m *compactorv1.Message) { m.Parts[5].GetFile().ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"approval request unknown field", func(m *compactorv1.Message) { m.Parts[6].GetApprovalRequest().ProtoReflect().SetUnknown(unknown127(1)) }, false},
		{"approval response unknown field", func(m *compactorv1.Message) {
			m.Parts[7].GetApprovalResponse().ProtoReflect().SetUnknown(unknown127(1))
		}, false},
		{"long text, one byte", func(m *compactorv1.Message) {
			m.Parts[0].GetText().Text = "a text part long enough for the long-string hasH"
		}, false},
		{"long text, one byte more", func(m *compactorv1.Message) { m.Parts[0].GetText().Text += " " }, false},
		{"empty text", func(m *compactorv1.Message) { m.Parts[0].GetText().Text = "" }, false},
		{"reasoning text 8 bytes, one byte", func(m *compactorv1.Message) { m.Parts[1].GetReasoning().Text = "thinkinG" }, false},
		{"signature 3 bytes, middle byte", func(m *compactorv1.Message) { m.Parts[1].GetReasoning().Signature = "sXg" }, false},
		{"redacted data set", func(m *compactorv1.Message) { m.Parts[1].GetReasoning().RedactedData = "r" }, false},
		{"a byte moves between strings", func(m *compactorv1.Message) {
			m.Parts[1].GetReasoning().Text, m.Parts[1].GetReasoning().Signature = "thinkin", "gsig"
		}, false},
		{"call id", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().ToolCallId = "call_9" }, false},
		{"tool name 9 bytes, one byte", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().ToolName = "read_filE" }, false},
		{"tool name 16 bytes", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().ToolName = "read_file_abcdef" }, false},
		{"tool name 17 bytes", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().ToolName = "read_file_abcdefg" }, false},
		{"input", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().InputJson = `{"path":"b.go"}` }, false},
		{"provider executed", func(m *compactorv1.Message) { m.Parts[2].GetToolCall().ProviderExecuted = true }, false},
		{"result call id", func(m *compactorv1.Message) { m.Parts[4].GetToolResult().ToolCallId = "call_3" }, false},
		{"json output as text", func(m *compactorv1.Message) {
			m.Parts[4].GetToolResult().Output = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: `{"files":["a.go","b.go"]}`}}
		}, false},
		{"json output as error json", func(m *compactorv1.Message) {
			m.Parts[4].GetToolResult().Output = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorJson{ErrorJson: `{"files":["a.go","b.go"]}`}}
		}, false},
		{"output denied", func(m *compactorv1.Message) {
			m.Parts[4].GetToolResult().Output = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Denied{Denied: `{"files":["a.go","b.go"]}`}}
		}, false},
		{"output empty", func(m *compactorv1.Message) { m.Parts[4].GetToolResult().Output = &compactorv1.ToolOutput{} }, false},
		{"output missing", func(m *compactorv1.Message) { m.Parts[4].GetToolResult().Output = nil }, false},
		{"nested text", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[0].GetText().Text = "inner texT"
		}, false},
		{"nested part removed", func(m *compactorv1.Message) {
			ct := m.Parts[3].GetToolResult().GetOutput().GetContent()
			ct.Parts = ct.Parts[:1]
		}, false},
		{"inline data, one byte", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[1].GetImage().Source = &compactorv1.ImagePart_Data{Data: []byte("\x89PNG...!")}
		}, false},
		{"inline data as url", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[1].GetImage().Source = &compactorv1.ImagePart_Url{Url: "\x89PNG...."}
		}, false},
		{"image without source", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[1].GetImage().Source = nil
		}, false},
		{"media type", func(m *compactorv1.Message) {
			m.Parts[3].GetToolResult().GetOutput().GetContent().GetParts()[1].GetImage().MediaType = "image/gif"
		}, false},
		{"file url", func(m *compactorv1.Message) {
			m.Parts[5].GetFile().Source = &compactorv1.FilePart_Url{Url: "https://example.com/b.pdf"}
		}, false},
		{"file name", func(m *compactorv1.Message) { m.Parts[5].GetFile().Filename = "b.pdf" }, false},
		{"file data", func(m *compactorv1.Message) {
			m.Parts[5].GetFile().Source = &compactorv1.FilePart_Data{Data: []byte("%PDF")}
		}, false},
		{"approval id", func(m *compactorv1.Message) { m.Parts[6].GetApprovalRequest().ApprovalId = "ap2" }, false},
		{"approval call id", func(m *compactorv1.Message) { m.Parts[6].GetApprovalRequest().ToolCallId = "call_2" }, false},
		{"approved", func(m *compactorv1.Message) { m.Parts[7].GetApprovalResponse().Approved = false }, false},
		{"approval reason", func(m *compactorv1.Message) { m.Parts[7].GetApprovalResponse().Reason = "fin" }, false},
	}
	base := keyTestMessage()
	bk, bc := c.keys.key(base), canonOf(base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := proto.Clone(keyTestMessage()).(*compactorv1.Message)
			tt.change(m)
			if canonSame := canonOf(m) == bc; canonSame != tt.same {
				t.Fatalf("canon unchanged = %v, want %v: the test case is wrong", canonSame, tt.same)
			}
			if k := c.keys.key(m); (k == bk) != tt.same {
				t.Errorf("key unchanged = %v, want %v", k == bk, tt.same)
			}
		})
	}
}

// TestContentKeyRandomMessages draws many messages from a small space (one or two parts of
// one kind, strings mostly of one to three a's, else one of two strings per length around the
// 8, 16 and 48 byte boundaries), so that many differ only in how lengths are spread over their
// strings, and checks that two have the same key exactly when they have the same canonical
// form, under two Counters.
func TestContentKeyRandomMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	str := func() string {
		if r.IntN(4) != 0 { // only their length tells these apart
			return strings.Repeat("a", r.IntN(4))
		}
		n := []int{4, 7, 8, 9, 15, 16, 17, 47, 48, 49, 97}[r.IntN(11)]
		return strings.Repeat("ab"[r.IntN(2):], n)[:n]
	}
	draw := func() *compactorv1.Message {
		m := &compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT, Pinned: r.IntN(8) == 0}
		kind := r.IntN(5)
		for range 1 + r.IntN(2) {
			var p *compactorv1.Part
			switch kind {
			case 0:
				p = plText(str())
			case 1:
				p = plCall(str(), str(), str())
			case 2:
				p = plResult(str(), str(), str())
			case 3:
				p = &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: str(), Signature: str(), RedactedData: str()}}}
			default:
				p = &compactorv1.Part{Content: &compactorv1.Part_Provider{Provider: &compactorv1.ProviderPart{
					Provider: str(), Type: str(), Json: str(), TokenCount: int64(r.IntN(3)), TokenCountEstimated: r.IntN(2) == 0}}}
			}
			if r.IntN(20) == 0 {
				p.ProtoReflect().SetUnknown(unknown127(byte(r.IntN(2))))
			}
			m.Parts = append(m.Parts, p)
		}
		return m
	}
	for _, c := range []*Counter{NewCounter(1 << 20), NewCounter(1 << 20)} {
		byKey := map[contentKey]string{}
		byCanon := map[string]contentKey{}
		draws := 0
		for range 50000 {
			m := draw()
			k, cn := c.keys.key(m), canonOf(m)
			if prev, ok := byKey[k]; ok && prev != cn {
				t.Fatalf("two canonical forms share a key:\n%x\n%x", prev, cn)
			}
			if prev, ok := byCanon[cn]; ok && prev != k {
				t.Fatalf("one canonical form has two keys")
			}
			if _, ok := byCanon[cn]; ok {
				draws++
			}
			byKey[k], byCanon[cn] = cn, k
		}
		if len(byCanon) < 5000 || draws < 5000 {
			t.Fatalf("%d distinct messages, %d drawn again: the space is too large or too small", len(byCanon), draws)
		}
	}
}

// TestContentKeyIsPerCounter: keys are keyed by a random seed per Counter, and a decoded copy
// of a message has the key of the original.
func TestContentKeyIsPerCounter(t *testing.T) {
	m := keyTestMessage()
	a, b := NewCounter(1<<20), NewCounter(1<<20)
	if a.keys.key(m) == b.keys.key(m) {
		t.Errorf("two Counters give one key")
	}
	wire, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var d compactorv1.Message
	if err := proto.Unmarshal(wire, &d); err != nil {
		t.Fatal(err)
	}
	if a.keys.key(&d) != a.keys.key(m) {
		t.Errorf("a decoded copy has another key")
	}
	if got, want := a.keys.key(m).n&^(1<<63), uint64(len(m.Parts[0].GetText().GetText())); got < want {
		t.Errorf("key length %d is below the %d bytes of the first part's text", got, want)
	}
}
