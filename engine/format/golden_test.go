package format

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// --- IR builders for tests ---

func msg(role compactorv1.Role, parts ...*compactorv1.Part) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: parts}
}
func sysMsg(texts ...string) *compactorv1.Message {
	m := msg(compactorv1.Role_ROLE_SYSTEM)
	for _, t := range texts {
		m.Parts = append(m.Parts, textPart(t))
	}
	return m
}
func userMsg(parts ...*compactorv1.Part) *compactorv1.Message {
	return msg(compactorv1.Role_ROLE_USER, parts...)
}
func asstMsg(parts ...*compactorv1.Part) *compactorv1.Message {
	return msg(compactorv1.Role_ROLE_ASSISTANT, parts...)
}
func toolMsg(parts ...*compactorv1.Part) *compactorv1.Message {
	return msg(compactorv1.Role_ROLE_TOOL, parts...)
}
func tx(s string) *compactorv1.Part { return textPart(s) }
func reasoning(text, sig string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: text, Signature: sig}}}
}
func redacted(data string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{RedactedData: data}}}
}
func result(id string, out *compactorv1.ToolOutput) *compactorv1.Part { return resultPart(id, "", out) }
func errText(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: s}}
}
func jsonOut(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Json{Json: s}}
}
func contentOut(parts ...*compactorv1.Part) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}
}
func withOpt(p *compactorv1.Part, provider, name string, v *structpb.Value) *compactorv1.Part {
	setOpt(&p.ProviderOptions, provider, name, v)
	return p
}
func ephemeral() *structpb.Value {
	return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("ephemeral")}})
}
func kind(m *compactorv1.Message, k compactorv1.MessageKind) *compactorv1.Message {
	m.Kind = k
	return m
}
func dynamic(m *compactorv1.Message) *compactorv1.Message {
	m.Lifecycle = compactorv1.Lifecycle_LIFECYCLE_DYNAMIC
	return m
}

// Tiny real image headers: the bytes are what media type checks look at.
var (
	pngBytes  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpegBytes = []byte("\xff\xd8\xff\xe0\x00\x10JFIF")
	pdfBytes  = []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
)

// lowerCase is one golden conversation, lowered to every provider.
type lowerCase struct {
	name string
	req  *compactorv1.LowerRequest // provider is filled per format
}

func lowerCases() []lowerCase {
	weather := callPart("call_1", "get_weather", `{"city":"Paris"}`)
	return []lowerCase{
		{"system_messages", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			sysMsg("You are terse."),
			sysMsg("Project rules:", "never push to main"),
			userMsg(tx("hi")),
			asstMsg(tx("hello")),
			dynamic(sysMsg("Todo: 1. write tests")),
			userMsg(tx("go on")),
		}}},
		{"developer_role", &compactorv1.LowerRequest{Model: "o3-mini", Messages: []*compactorv1.Message{
			sysMsg("Be brief."), userMsg(tx("hi")),
		}}},
		{"string_vs_parts", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx("one part")),
			asstMsg(tx("two "), tx("parts")),
			userMsg(tx("first"), tx("second")),
		}}},
		{"images_and_files", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(
				tx("look"),
				imageData(pngBytes, "image/png"),
				imageData(jpegBytes, "image/png"), // wrong declared type: corrected
				imageURL("https://example.com/cat.webp", "image/webp"),
				fileData(pdfBytes, "application/pdf", "report.pdf"),
				fileURL("https://example.com/spec.pdf", "application/pdf", "spec.pdf"),
				fileData([]byte("plain notes\n"), "text/plain", "notes.txt"),
			),
			asstMsg(tx("seen")),
		}}},
		{"parallel_tool_calls", &compactorv1.LowerRequest{BaseBody: `{"model":"m","toolConfig":{"tools":[]}}`, Messages: []*compactorv1.Message{
			userMsg(tx("weather in Paris and Rome?")),
			asstMsg(tx("Checking both."), weather, callPart("call_2", "get_weather", `{"city":"Rome"}`)),
			toolMsg(result("call_1", textOut("18C")), result("call_2", jsonOut(`{"temp":21,"unit":"C"}`))),
			asstMsg(tx("Paris 18C, Rome 21C.")),
		}}},
		{"error_tool_results", &compactorv1.LowerRequest{BaseBody: `{"toolConfig":{"tools":[]}}`, Messages: []*compactorv1.Message{
			userMsg(tx("read it")),
			asstMsg(callPart("c1", "read", `{"path":"/nope"}`)),
			toolMsg(result("c1", errText("ENOENT: no such file"))),
			asstMsg(callPart("c2", "read", `{"path":"/x"}`)),
			toolMsg(result("c2", &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorJson{ErrorJson: `{"code":403}`}})),
			asstMsg(callPart("c3", "rm", `{"path":"/"}`)),
			toolMsg(result("c3", &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Denied{Denied: "user denied"}})),
		}}},
		{"tool_result_then_user_text", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx("run ls")),
			asstMsg(callPart("c1", "bash", `{"cmd":"ls"}`)),
			toolMsg(result("c1", textOut("a.go\nb.go"))),
			userMsg(tx("now delete b.go")),
		}}},
		{"tool_output_media", &compactorv1.LowerRequest{BaseBody: `{"toolConfig":{"tools":[]}}`, Messages: []*compactorv1.Message{
			userMsg(tx("screenshot please")),
			asstMsg(callPart("c1", "screenshot", `{}`)),
			toolMsg(result("c1", contentOut(tx("here it is"), imageData(pngBytes, "image/png")))),
			userMsg(tx("thanks")),
		}}},
		{"consecutive_same_role", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx("a")), userMsg(tx("b")),
			asstMsg(tx("c")), asstMsg(tx("d")),
			userMsg(tx("e")),
		}}},
		{"reasoning", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx("think")),
			asstMsg(reasoning("signed thought", "sig-abc"), reasoning("unsigned thought", ""), redacted("opaque=="), tx("answer")),
			userMsg(tx("again")),
			asstMsg(
				withOpt(withOpt(reasoning("openai summary", ""), "openai", "itemId", structpb.NewStringValue("rs_1")), "openai", "reasoningEncryptedContent", structpb.NewStringValue("enc")),
				withOpt(reasoning("gemini thought", ""), "google", "thoughtSignature", structpb.NewStringValue("Z3NpZw==")),
				tx("answer 2"),
			),
		}}},
		{"reasoning_store_false", &compactorv1.LowerRequest{BaseBody: `{"model":"o4-mini","store":false,"include":["file_search_call.results"]}`, Messages: []*compactorv1.Message{
			userMsg(tx("think")),
			asstMsg(withOpt(withOpt(reasoning("summary", ""), "openai", "itemId", structpb.NewStringValue("rs_1")), "openai", "reasoningEncryptedContent", structpb.NewStringValue("enc")), tx("done")),
		}}},
		{"cache_breakpoints_over_limit", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			{Role: compactorv1.Role_ROLE_SYSTEM, Parts: []*compactorv1.Part{withOpt(tx("system one"), "anthropic", "cacheControl", ephemeral())}},
			{Role: compactorv1.Role_ROLE_SYSTEM, Parts: []*compactorv1.Part{withOpt(tx("system two"), "anthropic", "cacheControl", ephemeral())}},
			userMsg(withOpt(withOpt(tx("u1"), "anthropic", "cacheControl", ephemeral()), "bedrock", "cachePoint", structpb.NewBoolValue(true))),
			{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{tx("a1")},
				ProviderOptions: map[string]*structpb.Struct{"anthropic": {Fields: map[string]*structpb.Value{"cacheControl": ephemeral()}}}},
			userMsg(withOpt(tx("u2"), "anthropic", "cache_control", ephemeral())),
			userMsg(withOpt(tx("u3"), "anthropic", "cacheControl", ephemeral())),
		}}},
		{"unicode", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx("héllo wörld — 日本語 🚀 \u200d مرحبا \u2028 line sep \u2029 para \"quoted\" back\\slash \x01 ctl <tag> & amp\ttab")),
			asstMsg(tx("ok ✅")),
		}}},
		{"empty_texts", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx(""), tx("real")),
			asstMsg(tx("")),
			userMsg(tx("   ")),
			asstMsg(tx("prefill with trailing space  \n")),
		}}},
		{"message_kinds", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			sysMsg("sys"),
			kind(userMsg(tx("preface: repo is /src")), compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE),
			userMsg(tx("old question")),
			asstMsg(tx("old answer")),
			kind(userMsg(tx("summarize please")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT),
			kind(userMsg(tx("Summary: asked and answered")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY),
			userMsg(tx("new question")),
		}}},
		{"message_kinds_keep_history", &compactorv1.LowerRequest{KeepHistory: true, Messages: []*compactorv1.Message{
			sysMsg("sys"),
			userMsg(tx("old question")),
			kind(userMsg(tx("summarize please")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT),
			kind(userMsg(tx("Summary")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY),
			userMsg(tx("new question")),
		}}},
		{"session_delta", &compactorv1.LowerRequest{Session: &compactorv1.Session{Active: true, Cursor: 2}, Messages: []*compactorv1.Message{
			sysMsg("static system"),
			dynamic(sysMsg("todo: step 2")),
			userMsg(tx("first turn")),
			asstMsg(tx("first answer")),
			userMsg(tx("second turn")),
		}}},
		{"session_cursor_past_end", &compactorv1.LowerRequest{Session: &compactorv1.Session{Active: true, Cursor: 9}, Messages: []*compactorv1.Message{
			sysMsg("static system"), userMsg(tx("only turn")),
		}}},
		{"inline_dynamic_system", &compactorv1.LowerRequest{InlineDynamicSystem: true, Messages: []*compactorv1.Message{
			sysMsg("static"), userMsg(tx("q")), dynamic(sysMsg("now: 12:00")),
		}}},
		{"base_body_merge", &compactorv1.LowerRequest{
			BaseBody: `{"model":"x","messages":[{"role":"user","content":"replaced"}],"system":"replaced","input":"replaced","contents":[],"max_tokens":100,"temperature":0.5,"tools":[{"name":"t"}]}`,
			Messages: []*compactorv1.Message{sysMsg("s"), userMsg(tx("hi"))}}},
		{"invalid_tool_input", &compactorv1.LowerRequest{Messages: []*compactorv1.Message{
			userMsg(tx("go")),
			asstMsg(callPart("c1", "f", `not json`), callPart("c2", "g", ``)),
			toolMsg(result("c1", textOut("ok")), result("c2", textOut("ok"))),
		}}},
	}
}

// golden compares got with testdata/<name>, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test -update and review the diff):\n%s", path, got)
	}
}

// renderLower shows a response for review: the body indented (key order and escapes as
// produced), the warnings and the cursor.
func renderLower(t *testing.T, resp *compactorv1.LowerResponse) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(resp.GetBody()), "", "  "); err != nil {
		t.Fatalf("body is not valid JSON: %v\n%s", err, resp.GetBody())
	}
	b.WriteString("\n--- warnings\n")
	for _, w := range resp.GetWarnings() {
		b.WriteString(w)
		b.WriteByte('\n')
	}
	b.WriteString("--- cursor ")
	b.WriteString(itoa(int(resp.GetCursor())))
	b.WriteByte('\n')
	return b.Bytes()
}

// TestLowerGolden lowers every golden conversation to every format, compares with the files
// in testdata/lower, and checks that output is deterministic and lifts back into a valid IR.
func TestLowerGolden(t *testing.T) {
	for _, c := range lowerCases() {
		if err := engine.DefaultLimits().Validate(c.req.GetMessages()); err != nil {
			t.Fatalf("%s: test conversation is invalid: %v", c.name, err)
		}
		for _, p := range allProviders {
			t.Run(c.name+"/"+ProviderName(p), func(t *testing.T) {
				req := cloneReq(c.req)
				req.Provider = p
				resp, err := Lower(req)
				if err != nil {
					t.Fatal(err)
				}
				again, err := Lower(req)
				if err != nil || again.GetBody() != resp.GetBody() || strings.Join(again.GetWarnings(), "\n") != strings.Join(resp.GetWarnings(), "\n") {
					t.Fatalf("Lower is not deterministic")
				}
				golden(t, "lower/"+c.name+"."+ProviderName(p)+".golden", renderLower(t, resp))
				back, err := Lift(&compactorv1.LiftRequest{Body: resp.GetBody(), Provider: p})
				if err != nil {
					t.Fatalf("lowered body does not lift: %v", err)
				}
				if len(back.GetMessages()) > 0 {
					if err := engine.DefaultLimits().Validate(back.GetMessages()); err != nil {
						t.Fatalf("lowered body lifts to an invalid IR: %v", err)
					}
				}
			})
		}
	}
}

func cloneReq(r *compactorv1.LowerRequest) *compactorv1.LowerRequest {
	return &compactorv1.LowerRequest{
		Messages: r.GetMessages(), Model: r.GetModel(), BaseBody: r.GetBaseBody(), Session: r.GetSession(),
		KeepHistory: r.GetKeepHistory(), InlineDynamicSystem: r.GetInlineDynamicSystem(),
	}
}

// TestLiftGolden lifts every body in testdata/lift (format detected from the body), compares
// the IR with its golden, checks the IR is valid, and that Lower back to the same format with
// base_body = rest_body lifts to the same IR.
func TestLiftGolden(t *testing.T) {
	bodies, err := filepath.Glob(filepath.Join("testdata", "lift", "*.json"))
	if err != nil || len(bodies) == 0 {
		t.Fatalf("no lift inputs: %v", err)
	}
	for _, path := range bodies {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := Lift(&compactorv1.LiftRequest{Body: string(body)})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.SplitN(name, ".", 2)[0]; ProviderName(resp.GetProvider()) != want {
				t.Fatalf("detected %s, file is named for %s", ProviderName(resp.GetProvider()), want)
			}
			if err := engine.DefaultLimits().Validate(resp.GetMessages()); err != nil {
				t.Fatalf("lifted IR is invalid: %v", err)
			}
			golden(t, "lift/"+name+".golden", renderLift(t, resp))
			low, err := Lower(&compactorv1.LowerRequest{Messages: resp.GetMessages(), Provider: resp.GetProvider(), BaseBody: resp.GetRestBody()})
			if err != nil {
				t.Fatal(err)
			}
			again, err := Lift(&compactorv1.LiftRequest{Body: low.GetBody(), Provider: resp.GetProvider()})
			if err != nil {
				t.Fatal(err)
			}
			if !equalMessages(resp.GetMessages(), again.GetMessages()) {
				t.Fatalf("lift → lower → lift changed the IR: %s\nlowered: %s", firstDiff(resp.GetMessages(), again.GetMessages()), low.GetBody())
			}
			if again.GetRestBody() != resp.GetRestBody() {
				t.Fatalf("rest_body changed: %s vs %s", again.GetRestBody(), resp.GetRestBody())
			}
		})
	}
}

func renderLift(t *testing.T, resp *compactorv1.LiftResponse) []byte {
	t.Helper()
	var b bytes.Buffer
	mo := protojson.MarshalOptions{Multiline: true, Indent: "  "}
	for i, m := range resp.GetMessages() {
		j, err := mo.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// protojson output is deliberately unstable in whitespace; normalize it.
		var n bytes.Buffer
		if err := json.Indent(&n, compactJSON(t, j), "", "  "); err != nil {
			t.Fatal(err)
		}
		b.WriteString("--- message " + itoa(i) + "\n")
		b.Write(n.Bytes())
		b.WriteByte('\n')
	}
	b.WriteString("--- warnings\n")
	for _, w := range resp.GetWarnings() {
		b.WriteString(w)
		b.WriteByte('\n')
	}
	b.WriteString("--- rest_body\n")
	b.WriteString(resp.GetRestBody())
	b.WriteByte('\n')
	return b.Bytes()
}

func compactJSON(t *testing.T, j []byte) []byte {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, j); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}

// TestProviderNames: ParseProvider reads back the name of every provider format, and of
// nothing else.
func TestProviderNames(t *testing.T) {
	for v := range compactorv1.Provider_name {
		p := compactorv1.Provider(v)
		name := ProviderName(p)
		got, ok := ParseProvider(name)
		if known := slices.Contains(allProviders, p); ok != known || (ok && got != p) {
			t.Errorf("ParseProvider(ProviderName(%v) = %q) = %v, %v", p, name, got, ok)
		}
	}
	if _, ok := ParseProvider("Anthropic"); ok {
		t.Error(`ParseProvider("Anthropic") took a name in another case`)
	}
}
