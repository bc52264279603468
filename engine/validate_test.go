package engine_test

import (
	"errors"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"google.golang.org/protobuf/proto"
)

// Helpers that build IR messages tersely.

func irText(s string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}
}

func irCall(id, name, input string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{ToolCallId: id, ToolName: name, InputJson: input}}}
}

func irResult(id, out string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
		ToolCallId: id, Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: out}},
	}}}
}

func contentResult(id string, parts ...*compactorv1.Part) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
		ToolCallId: id, Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}},
	}}}
}

func provider(prov, typ, raw string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Provider{Provider: &compactorv1.ProviderPart{Provider: prov, Type: typ, Json: raw}}}
}

func irMsg(role compactorv1.Role, parts ...*compactorv1.Part) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: parts}
}

const (
	irSys  = compactorv1.Role_ROLE_SYSTEM
	irUsr  = compactorv1.Role_ROLE_USER
	irAsst = compactorv1.Role_ROLE_ASSISTANT
	irTool = compactorv1.Role_ROLE_TOOL
)

func TestValidate(t *testing.T) {
	approvalReq := &compactorv1.Part{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{ApprovalId: "a1", ToolCallId: "c1"}}}
	approvalResp := &compactorv1.Part{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: "a1", Approved: true}}}
	img := func(img *compactorv1.ImagePart) *compactorv1.Part {
		return &compactorv1.Part{Content: &compactorv1.Part_Image{Image: img}}
	}
	withID := func(m *compactorv1.Message, id string) *compactorv1.Message { m.Id = id; return m }
	withKind := func(m *compactorv1.Message, k compactorv1.MessageKind) *compactorv1.Message { m.Kind = k; return m }

	tests := []struct {
		name string
		msgs []*compactorv1.Message
		want []string // field paths of the expected violations, in order; nil = valid
	}{
		{"valid tool turn", []*compactorv1.Message{
			irMsg(irSys, irText("be brief")),
			irMsg(irUsr, irText("weather?")),
			irMsg(irAsst, irText("checking"), irCall("c1", "get_weather", `{"city":"Paris"}`), irCall("c2", "get_time", `{}`)),
			irMsg(irTool, irResult("c1", "sunny"), irResult("c2", "noon")),
			irMsg(irAsst, irText("sunny at noon")),
		}, nil},
		{"reused call id after answer is fine", []*compactorv1.Message{
			irMsg(irUsr, irText("go")),
			irMsg(irAsst, irCall("c1", "t", `{}`)), irMsg(irTool, irResult("c1", "a")),
			irMsg(irAsst, irCall("c1", "t", `{}`)), irMsg(irTool, irResult("c1", "b")),
		}, nil},
		{"empty conversation", nil, []string{"messages"}},
		{"null message", []*compactorv1.Message{nil}, []string{"messages[0]"}},
		{"missing role and parts", []*compactorv1.Message{{}}, []string{"messages[0].role", "messages[0].parts"}},
		{"unknown role", []*compactorv1.Message{irMsg(compactorv1.Role(9), irText("x"))}, []string{"messages[0].role"}},
		{"empty part", []*compactorv1.Message{irMsg(irUsr, &compactorv1.Part{})}, []string{"messages[0].parts[0]"}},
		{"tool call in user message", []*compactorv1.Message{irMsg(irUsr, irCall("c1", "t", "{}"))}, []string{"messages[0].parts[0]"}},
		{"text in tool message", []*compactorv1.Message{irMsg(irTool, irText("x"))}, []string{"messages[0].parts[0]"}},
		{"image in system message", []*compactorv1.Message{irMsg(irSys, img(&compactorv1.ImagePart{Source: &compactorv1.ImagePart_Url{Url: "https://x/y.png"}}))}, []string{"messages[0].parts[0]"}},
		{"result without call", []*compactorv1.Message{irMsg(irUsr, irText("x")), irMsg(irTool, irResult("nope", "x"))}, []string{"messages[1].parts[0].tool_result.tool_call_id"}},
		{"result before call", []*compactorv1.Message{irMsg(irTool, irResult("c1", "x")), irMsg(irAsst, irCall("c1", "t", "{}"))}, []string{"messages[0].parts[0].tool_result.tool_call_id"}},
		{"second result for one call", []*compactorv1.Message{
			irMsg(irAsst, irCall("c1", "t", "{}")), irMsg(irTool, irResult("c1", "a"), irResult("c1", "b")),
		}, []string{"messages[1].parts[1].tool_result.tool_call_id"}},
		{"duplicate pending call id", []*compactorv1.Message{irMsg(irAsst, irCall("c1", "t", "{}"), irCall("c1", "t", "{}"))}, []string{"messages[0].parts[1].tool_call.tool_call_id"}},
		{"call without id and name", []*compactorv1.Message{irMsg(irAsst, irCall("", "", "{}"))}, []string{"messages[0].parts[0].tool_call.tool_name", "messages[0].parts[0].tool_call.tool_call_id"}},
		{"result without output", []*compactorv1.Message{
			irMsg(irAsst, irCall("c1", "t", "{}")),
			irMsg(irTool, &compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{ToolCallId: "c1"}}}),
		}, []string{"messages[1].parts[0].tool_result.output"}},
		{"assistant holds result of a normal call", []*compactorv1.Message{irMsg(irAsst, irCall("c1", "t", "{}"), irResult("c1", "x"))}, []string{"messages[0].parts[1].tool_result"}},
		{"assistant holds result of its provider-executed call", []*compactorv1.Message{irMsg(irAsst,
			&compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{ToolCallId: "ws", ToolName: "web_search", InputJson: "{}", ProviderExecuted: true}}},
			irResult("ws", "results"))}, nil},
		{"duplicate message id", []*compactorv1.Message{withID(irMsg(irUsr, irText("a")), "m1"), withID(irMsg(irAsst, irText("b")), "m1")}, []string{"messages[1].id"}},
		{"approval pair", []*compactorv1.Message{irMsg(irAsst, irCall("c1", "rm", "{}"), approvalReq), irMsg(irTool, approvalResp)}, nil},
		{"approval response without request", []*compactorv1.Message{irMsg(irUsr, irText("x")), irMsg(irTool, approvalResp)}, []string{"messages[1].parts[0].approval_response.approval_id"}},
		{"approval answered twice", []*compactorv1.Message{irMsg(irAsst, irCall("c1", "rm", "{}"), approvalReq), irMsg(irTool, approvalResp), irMsg(irTool, approvalResp)}, []string{"messages[2].parts[0].approval_response.approval_id"}},
		{"approval request for unknown call", []*compactorv1.Message{irMsg(irAsst, approvalReq)}, []string{"messages[0].parts[0].approval_request.tool_call_id"}},
		{"image without source", []*compactorv1.Message{irMsg(irUsr, img(&compactorv1.ImagePart{MediaType: "image/png"}))}, []string{"messages[0].parts[0].image"}},
		{"file without media type", []*compactorv1.Message{irMsg(irUsr, &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{Source: &compactorv1.FilePart_Url{Url: "https://x/a.pdf"}}}})}, []string{"messages[0].parts[0].file.media_type"}},
		{"summary with a tool call", []*compactorv1.Message{withKind(irMsg(irAsst, irCall("c1", "t", "{}")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY)}, []string{"messages[0].parts[0]"}},
		{"summary as tool message", []*compactorv1.Message{withKind(irMsg(irTool, irText("s")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY)}, []string{"messages[0].kind", "messages[0].parts[0]"}},
		{"dynamic user message", []*compactorv1.Message{{Role: irUsr, Lifecycle: compactorv1.Lifecycle_LIFECYCLE_DYNAMIC, Parts: []*compactorv1.Part{irText("x")}}}, []string{"messages[0].lifecycle"}},
		{"tool content with a tool call", []*compactorv1.Message{
			irMsg(irAsst, irCall("c1", "t", "{}")),
			irMsg(irTool, &compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{ToolCallId: "c1", Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: []*compactorv1.Part{irText("ok"), irCall("c2", "t", "{}")}}}}}}}),
		}, []string{"messages[1].parts[0].tool_result.output.content.parts[1]"}},
		{"tool content with a provider block", []*compactorv1.Message{
			irMsg(irAsst, irCall("c1", "t", "{}")),
			irMsg(irTool, contentResult("c1", irText("ok"), provider("anthropic", "search_result", `{"type":"search_result"}`))),
		}, nil},
		{"tool content with a bad provider block", []*compactorv1.Message{
			irMsg(irAsst, irCall("c1", "t", "{}")),
			irMsg(irTool, contentResult("c1", irText("ok"), provider("acme", "", `[1]`))),
		}, []string{"messages[1].parts[0].tool_result.output.content.parts[1].provider.provider",
			"messages[1].parts[0].tool_result.output.content.parts[1].provider.type",
			"messages[1].parts[0].tool_result.output.content.parts[1].provider.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := engine.DefaultLimits().Validate(tt.msgs)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: unexpected error: %v", err)
				}
				return
			}
			var ve *engine.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *ValidationError", err)
			}
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid")
			}
			var got []string
			for _, v := range ve.Violations {
				got = append(got, v.Field)
				if v.Description == "" {
					t.Errorf("%s: empty description", v.Field)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("violations = %q, want %q (%v)", got, tt.want, err)
			}
		})
	}
}

func TestValidateLimits(t *testing.T) {
	lim := engine.Limits{MaxMessages: 2, MaxParts: 2, MaxPartBytes: 4}
	tests := []struct {
		name  string
		msgs  []*compactorv1.Message
		field string
	}{
		{"too many messages", []*compactorv1.Message{irMsg(irUsr, irText("a")), irMsg(irAsst, irText("b")), irMsg(irUsr, irText("c"))}, "messages"},
		{"too many parts", []*compactorv1.Message{irMsg(irUsr, irText("a"), irText("b"), irText("c"))}, "messages[0].parts"},
		{"part too big", []*compactorv1.Message{irMsg(irUsr, irText("a")), irMsg(irAsst, irText("hello"))}, "messages[1].parts[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := lim.Validate(tt.msgs)
			var ve *engine.ValidationError
			if !errors.As(err, &ve) || !ve.Limit || !errors.Is(err, engine.ErrTooLarge) {
				t.Fatalf("Validate = %v, want a limit ValidationError", err)
			}
			if ve.Violations[0].Field != tt.field {
				t.Errorf("field = %q, want %q", ve.Violations[0].Field, tt.field)
			}
		})
	}
	if err := lim.Validate([]*compactorv1.Message{irMsg(irUsr, irText("abcd"))}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

func TestValidateCapsViolations(t *testing.T) {
	msgs := make([]*compactorv1.Message, 50)
	for i := range msgs {
		msgs[i] = &compactorv1.Message{}
	}
	err := engine.Limits{MaxViolations: 10}.Validate(msgs)
	var ve *engine.ValidationError
	if !errors.As(err, &ve) {
		t.Fatal(err)
	}
	if len(ve.Violations) != 11 || !strings.Contains(ve.Violations[10].Description, "90 more") {
		t.Errorf("got %d violations, last %v", len(ve.Violations), ve.Violations[len(ve.Violations)-1])
	}
}

// FuzzValidate feeds arbitrary protobuf bytes, decoded as a PlanRequest, to Validate: it must
// never panic, and a conversation it accepts must stay accepted after a proto round trip.
func FuzzValidate(f *testing.F) {
	seeds := [][]*compactorv1.Message{
		{irMsg(irUsr, irText("hi")), irMsg(irAsst, irCall("c1", "t", "{}")), irMsg(irTool, irResult("c1", "ok"))},
		{irMsg(irAsst, irCall("c1", "t", "{}"), irCall("c1", "t", "{}"))},
		{{}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(&compactorv1.PlanRequest{Messages: s})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req compactorv1.PlanRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		err := engine.DefaultLimits().Validate(req.Messages)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) && !errors.Is(err, engine.ErrTooLarge) {
				t.Fatalf("unexpected error type: %v", err)
			}
			return
		}
		b, merr := proto.Marshal(&req)
		if merr != nil {
			t.Fatal(merr)
		}
		var again compactorv1.PlanRequest
		if uerr := proto.Unmarshal(b, &again); uerr != nil {
			t.Fatal(uerr)
		}
		if err := engine.DefaultLimits().Validate(again.Messages); err != nil {
			t.Fatalf("valid conversation invalid after round trip: %v", err)
		}
	})
}
