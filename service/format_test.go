package service_test

import (
	"encoding/json"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/service"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestLiftLowerOverGRPC lifts every corpus conversation through the RPC, lowers it to every
// provider and lifts the same-format body again to an equal conversation.
func TestLiftLowerOverGRPC(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	providers := []compactorv1.Provider{
		compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
		compactorv1.Provider_PROVIDER_OPENAI_CHAT,
		compactorv1.Provider_PROVIDER_OPENAI_RESPONSES,
		compactorv1.Provider_PROVIDER_GEMINI,
		compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE,
	}
	for _, f := range corpus.Files(t) {
		t.Run(f.Name, func(t *testing.T) {
			lifted, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
			if err != nil {
				t.Fatalf("Lift: %v", err)
			}
			for _, p := range providers {
				low, err := client.Lower(t.Context(), &compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, KeepHistory: true})
				if err != nil {
					t.Fatalf("Lower %v: %v", p, err)
				}
				if !json.Valid([]byte(low.GetBody())) {
					t.Fatalf("Lower %v: body is not JSON", p)
				}
				if p != lifted.GetProvider() {
					continue
				}
				again, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: low.GetBody(), Provider: p})
				if err != nil {
					t.Fatalf("Lift of own Lower: %v", err)
				}
				if len(again.GetMessages()) != len(lifted.GetMessages()) {
					t.Fatalf("round trip: %d messages, want %d", len(again.GetMessages()), len(lifted.GetMessages()))
				}
				for i := range again.GetMessages() {
					if !proto.Equal(again.GetMessages()[i], lifted.GetMessages()[i]) {
						t.Fatalf("round trip: messages[%d] differs:\n got %v\nwant %v", i, again.GetMessages()[i], lifted.GetMessages()[i])
					}
				}
			}
		})
	}
}

func TestLiftRejectsBadBodies(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	tests := []struct {
		name, body string
		provider   compactorv1.Provider
	}{
		{"not JSON", `{"messages": [`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
		{"not an object", `[1, 2]`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
		{"unknown shape", `{"prompt": "hi"}`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
		{"tool result answering nothing", `{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"x"}]}`, compactorv1.Provider_PROVIDER_OPENAI_CHAT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: tt.body, Provider: tt.provider})
			field := BadRequestField(t, err, codes.InvalidArgument)
			if len(field) < 4 || field[:4] != "body" {
				t.Errorf("field = %q, want a path under body", field)
			}
		})
	}
}

// TestStrictLowerIsFailedPrecondition: a strict Lower that would drop something is
// FAILED_PRECONDITION with a PreconditionFailure naming each field; a lossless one succeeds.
func TestStrictLowerIsFailedPrecondition(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	msgs := []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "q"}}}}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: "t", Signature: "sig"}}},
			{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "a"}}}}},
	}
	_, err := client.Lower(t.Context(), &compactorv1.LowerRequest{Messages: msgs, Provider: compactorv1.Provider_PROVIDER_GEMINI, Strict: true})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("code %v (%v), want FAILED_PRECONDITION", st.Code(), err)
	}
	var subjects []string
	for _, d := range st.Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				subjects = append(subjects, v.GetSubject())
			}
		}
	}
	if len(subjects) != 1 || subjects[0] != "messages[1].parts[0].reasoning.signature" {
		t.Errorf("violations name %q, want the signature", subjects)
	}
	if _, err := client.Lower(t.Context(), &compactorv1.LowerRequest{Messages: msgs, Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
		BaseBody: `{"model":"m","max_tokens":1}`, Strict: true}); err != nil {
		t.Errorf("lossless strict Lower: %v", err)
	}
}

// TestToolsOverGRPC: Lift returns a body's tools in the neutral form; Lower writes them in
// another format's; a strict Lower that would leave out another format's field of the
// input is FAILED_PRECONDITION naming it, and a tool base_body defines otherwise likewise.
func TestToolsOverGRPC(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	body := `{"model":"gpt-4o","seed":7,"temperature":0.2,"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}}],"messages":[{"role":"user","content":"ls"}]}`
	lifted, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if len(lifted.GetTools()) != 1 || lifted.GetTools()[0].GetInputSchemaJson() != `{"type":"object","properties":{"cmd":{"type":"string"}}}` {
		t.Fatalf("lifted tools %v", lifted.GetTools())
	}
	req := &compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE,
		RestBody: lifted.GetRestBody(), RestProvider: lifted.GetProvider(), Tools: lifted.GetTools()}
	low, err := client.Lower(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"toolConfig":{"tools":[{"toolSpec":{"name":"bash","inputSchema":{"json":{"type":"object","properties":{"cmd":{"type":"string"}}}}}}]}`; !strings.Contains(low.GetBody(), want) {
		t.Errorf("%s lacks %s", low.GetBody(), want)
	}
	if w := low.GetWarnings(); len(w) != 1 || w[0] != "rest_body.seed: not carried to bedrock" {
		t.Errorf("warnings %q", w)
	}
	req.Strict = true
	for _, c := range []struct{ base, subject string }{
		{"", "rest_body.seed"},
		{`{"seed":1,"toolConfig":{"tools":[{"toolSpec":{"name":"bash","inputSchema":{"json":{}}}}]}}`, "tools[0]"},
	} {
		req.RestBody = lifted.GetRestBody()
		if c.base != "" {
			req.RestBody, req.RestProvider = "", compactorv1.Provider_PROVIDER_UNSPECIFIED
		}
		req.BaseBody = c.base
		_, err = client.Lower(t.Context(), req)
		st := status.Convert(err)
		var subjects []string
		for _, d := range st.Details() {
			if pf, ok := d.(*errdetails.PreconditionFailure); ok {
				for _, v := range pf.GetViolations() {
					subjects = append(subjects, v.GetSubject())
				}
			}
		}
		if st.Code() != codes.FailedPrecondition || len(subjects) != 1 || subjects[0] != c.subject {
			t.Errorf("base %s: %v, violations %q; want FAILED_PRECONDITION naming %s", c.base, err, subjects, c.subject)
		}
	}
}

// TestCompactReplacesForeignCompaction: with target_provider set, a compaction another
// provider made is replaced (its readable summary folded into a compactord summary, with a
// warning); for its own provider it stays, byte for byte.
func TestCompactReplacesForeignCompaction(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	block := `{"type":"compaction","content":"The user is porting parser.py to Rust in src/parser.rs. ` + strings.Repeat("The tokenizer, the grammar tables and the error recovery were ported and reviewed one by one. ", 8) + `","encrypted_content":"gAAAA=="}`
	body := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"port parser.py"}]},` +
		`{"role":"assistant","content":[` + block + `]},` +
		`{"role":"user","content":[{"type":"text","text":"now add tests for src/parser.rs"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"Added tests in tests/parser_test.rs."}]},` +
		`{"role":"user","content":[{"type":"text","text":"run them"}]}]}`
	lifted, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	req := &compactorv1.CompactRequest{Messages: lifted.GetMessages(), Policy: &compactorv1.Policy{ContextWindow: 100000, KeepRecentTurns: 1, KeepRecentTokens: 1}}
	same, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(same.GetWarnings()) > 0 || same.GetCompacted() {
		t.Fatalf("no target: nothing to do, got compacted=%v warnings=%q", same.GetCompacted(), same.GetWarnings())
	}
	req.TargetProvider = compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES
	if own, err := client.Compact(t.Context(), req); err != nil || len(own.GetWarnings()) > 0 {
		t.Fatalf("own provider: %v %q", err, own.GetWarnings())
	}
	req.TargetProvider = compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
	moved, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(moved.GetWarnings()) != 1 || !moved.GetCompacted() {
		t.Fatalf("moved: compacted=%v reason=%q warnings=%q", moved.GetCompacted(), moved.GetReason(), moved.GetWarnings())
	}
	for _, m := range moved.GetMessages() {
		for _, p := range m.GetParts() {
			if p.GetProvider() != nil {
				t.Fatalf("the anthropic compaction is still in the result: %v", m)
			}
		}
	}
	if s := moved.GetSummary().GetText(); !strings.Contains(s, "parser.rs") {
		t.Errorf("the summary lost what the compaction said:\n%s", s)
	}
	low, err := client.Lower(t.Context(), &compactorv1.LowerRequest{Messages: moved.GetMessages(), Provider: compactorv1.Provider_PROVIDER_OPENAI_RESPONSES,
		BaseBody: `{"model":"gpt-5"}`, Strict: true})
	if err != nil {
		t.Fatalf("the moved conversation does not lower to the target losslessly: %v", err)
	}
	if strings.Contains(low.GetBody(), "compaction") {
		t.Errorf("lowered body holds the compaction: %s", low.GetBody())
	}
}

// TestLiftNamesTheBodyElement: a rule the lifted IR breaks is reported at the element of the
// caller's body it came from, not at the IR's index: the orphan tool result is the body's
// messages[2] (its fourth IR message, after the system message and a split), and its
// description keeps the IR path.
func TestLiftNamesTheBodyElement(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	body := `{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"nobody","content":"r"}]}]}`
	_, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: body})
	if field := BadRequestField(t, err, codes.InvalidArgument); field != "body.messages[2]" {
		t.Errorf("field %q, want body.messages[2]", field)
	}
	st := status.Convert(err)
	if msg := st.Message(); !strings.HasPrefix(msg, "body.messages[2]: ") || !strings.Contains(msg, "(lifted as messages[3].parts[0].tool_result.tool_call_id)") {
		t.Errorf("message %q: want the body element first, the IR path in parentheses", msg)
	}
}
