package format

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/cputime"
)

func TestDetect(t *testing.T) {
	cases := []struct {
		body string
		want compactorv1.Provider
	}{
		{`{"input":"hi","messages":[]}`, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES},
		{`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE},
		{`{"system":[{"text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE},
		{`{"inferenceConfig":{},"messages":[]}`, compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE},
		{`{"system":"s","messages":[{"role":"user","content":"hi"}]}`, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES},
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]}]}`, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES},
		{`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES},
		{`{"messages":[{"role":"user","content":"hi"}]}`, compactorv1.Provider_PROVIDER_OPENAI_CHAT},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, compactorv1.Provider_PROVIDER_OPENAI_CHAT},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"toolConfig":{}}`, compactorv1.Provider_PROVIDER_GEMINI},
		{`{"model":"x"}`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
	}
	for _, c := range cases {
		if got := detect(c.body); got != c.want {
			t.Errorf("%s: detected %v, want %v", c.body, got, c.want)
		}
	}
}

// TestLiftErrorsNameThePath checks that bad input is an INVALID_ARGUMENT-class error naming
// the JSON path of the problem.
func TestLiftErrorsNameThePath(t *testing.T) {
	A := compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES
	C := compactorv1.Provider_PROVIDER_OPENAI_CHAT
	R := compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
	G := compactorv1.Provider_PROVIDER_GEMINI
	B := compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE
	U := compactorv1.Provider_PROVIDER_UNSPECIFIED
	cases := []struct {
		p     compactorv1.Provider
		body  string
		field string
	}{
		{U, ``, "body"},
		{U, `[1]`, "body"},
		{U, `{"model":"x"}`, "body"},
		{U, `{"messages":[{"role":"user","content":"x"},]}`, "body.messages[1]"},
		{A, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"bogus"}]}]}`, "body.messages[0].content[1].type"},
		{A, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"no type"}]}]}`, "body.messages[0].content[1].type"},
		{A, `{"messages":[{"role":"system","content":"x"}]}`, "body.messages[0].role"},
		{A, `{"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]}]}`, "body.messages[0].content[0].type"},
		{A, `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!"}}]}]}`, "body.messages[0].content[0].source.data"},
		{A, `{"messages":{}}`, "body.messages"},
		{A, `{"system":5,"messages":[]}`, "body.system"},
		{C, `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"arguments":"{}"}}]}]}`, "body.messages[0].tool_calls[0].function.name"},
		{C, `{"messages":[{"role":"tool","content":"x"}]}`, "body.messages[0].tool_call_id"},
		{C, `{"messages":[{"role":"function","content":"x"}]}`, "body.messages[0].role"},
		{C, `{"messages":[{"role":"user","content":7}]}`, "body.messages[0].content"},
		{R, `{"input":[{"type":"web_search_call","id":"x"}]}`, "body.input[0].type"},
		{R, `{"input":[{"type":"function_call","name":"n","arguments":"{}"}]}`, "body.input[0].call_id"},
		{G, `{"contents":[{"role":"model","parts":[{"executableCode":{}}]}]}`, "body.contents[0].parts[0]"},
		{G, `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`, "body.contents[0].parts[0].functionResponse.id"},
		{G, `{"contents":[{"role":"system","parts":[]}]}`, "body.contents[0].role"},
		{B, `{"messages":[{"role":"user","content":[{"video":{}}]}]}`, "body.messages[0].content[0]"},
		{B, `{"messages":[{"role":"user","content":[{"document":{"format":"exe","name":"a","source":{"bytes":""}}}]}]}`, "body.messages[0].content[0].document.format"},
		{B, `{"messages":[{"role":"assistant","content":[{"toolResult":{"toolUseId":"a","content":[]}}]}]}`, "body.messages[0].content[0].toolResult"},
	}
	for _, c := range cases {
		_, err := Lift(&compactorv1.LiftRequest{Body: c.body, Provider: c.p})
		var ve *engine.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: got %v, want an invalid-argument ValidationError", c.body, err)
			continue
		}
		if got := ve.Violations[0].Field; got != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.body, got, c.field, err)
		}
	}
}

func TestLowerRejectsBadBaseBody(t *testing.T) {
	msgs := []*compactorv1.Message{userMsg(tx("hi"))}
	for _, base := range []string{`[]`, `"x"`, `{"a":}`, `{"a":1}}`} {
		_, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: compactorv1.Provider_PROVIDER_OPENAI_CHAT, BaseBody: base})
		var ve *engine.ValidationError
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.Violations[0].Field, "base_body") {
			t.Errorf("base_body %s: got %v, want a ValidationError on base_body", base, err)
		}
	}
	if _, err := Lower(&compactorv1.LowerRequest{Messages: msgs}); err == nil {
		t.Error("unspecified provider accepted")
	}
}

// TestLiftReusedToolCallIDs: a result answers the nearest earlier call with its id, and gets
// that call's tool name.
func TestLiftReusedToolCallIDs(t *testing.T) {
	body := `{"messages":[
		{"role":"user","content":"go"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"first","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"x","content":"1"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"second","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"x","content":"2"}]}`
	resp, err := Lift(&compactorv1.LiftRequest{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.DefaultLimits().Validate(resp.GetMessages()); err != nil {
		t.Fatal(err)
	}
	if n := resp.GetMessages()[2].GetParts()[0].GetToolResult().GetToolName(); n != "first" {
		t.Errorf("first result named %q", n)
	}
	if n := resp.GetMessages()[4].GetParts()[0].GetToolResult().GetToolName(); n != "second" {
		t.Errorf("second result named %q", n)
	}
}

func TestLiftRestBody(t *testing.T) {
	cases := []struct{ body, rest string }{
		{`{"messages":[{"role":"user","content":"x"}]}`, `{}`},
		{`{"model":"m", "messages":[{"role":"user","content":"x"}], "tools":[ {"a":1} ],"stream":true}`, `{"model":"m","tools":[ {"a":1} ],"stream":true}`},
		{`{"system":"s","messages":[{"role":"user","content":"x"}],"max_tokens":5}`, `{"max_tokens":5}`},
		{`{"instructions":"i","input":"x","store":false}`, `{"store":false}`},
		{`{"system_instruction":{"parts":[{"text":"s"}]},"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{}}`, `{"generationConfig":{}}`},
	}
	for _, c := range cases {
		resp, err := Lift(&compactorv1.LiftRequest{Body: c.body})
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if resp.GetRestBody() != c.rest {
			t.Errorf("%s: rest_body %s, want %s", c.body, resp.GetRestBody(), c.rest)
		}
	}
}

// TestLiftHostileInputIsBounded lifts large hostile bodies (deep nesting, huge arrays, many
// tiny blocks, long escaped strings) and checks that each fails or succeeds without
// allocating more than a small multiple of its size.
func TestLiftHostileInputIsBounded(t *testing.T) {
	const size = 4 << 20
	repeat := func(prefix, unit, suffix string) string {
		n := (size - len(prefix) - len(suffix)) / len(unit)
		return prefix + strings.Repeat(unit, n) + suffix
	}
	bodies := map[string]string{
		"deep nesting":     repeat(`{"messages":`, "[", ""),
		"numbers":          repeat(`{"messages":[`, "0,", "0]}"),
		"empty objects":    repeat(`{"messages":[{"role":"user","content":[`, `{},`, `{}]}]}`),
		"tiny text blocks": repeat(`{"system":"s","messages":[{"role":"user","content":[`, `{"type":"text","text":""},`, `{"type":"text","text":""}]}]}`),
		"escaped string":   repeat(`{"messages":[{"role":"user","content":"`, `\u00e9\n`, `"}]}`),
		"many keys":        repeat(`{`, `"k":1,`, `"messages":[]}`),
		"backslashes":      repeat(`{"messages":[{"role":"user","content":"`, `\\`, `"}]}`),
	}
	for name, body := range bodies {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _ = Lift(&compactorv1.LiftRequest{Body: body})
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %.1f bytes allocated per body byte", name, float64(alloc)/float64(len(body)))
		if alloc > 16*uint64(len(body)) {
			t.Errorf("%s: %d MiB allocated for a %d MiB body", name, alloc>>20, len(body)>>20)
		}
	}
}

// TestLiftScalesLinearly lifts Responses bodies of n and 16n consecutive function_call items
// (one assistant message of many parts, the shape appendTo builds) and holds the CPU time's
// growth near 16× (at most 48×): a scan of the growing message per item made it 100×+ (issue 27's
// hostile input: 40,000 items, 2.9 MB, took 4.9 s). The least of three runs of each size is
// compared, so a busy machine inflates both sides alike.
func TestLiftScalesLinearly(t *testing.T) {
	body := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"input":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","name":"n","arguments":"{}"}`, i)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	least := func(body string) time.Duration {
		best := time.Duration(math.MaxInt64)
		for range 3 {
			start := cputime.Process()
			if _, err := Lift(&compactorv1.LiftRequest{Body: body}); err != nil {
				t.Fatal(err)
			}
			best = min(best, cputime.Process()-start)
		}
		return best
	}
	small, large := body(1250), body(20000)
	a, b := least(small), least(large)
	if a == 0 {
		t.Skip("no process CPU time on this platform")
	}
	ratio := float64(b) / float64(a)
	t.Logf("1,250 items %v, 20,000 items %v: %.1f×", a, b, ratio)
	if ratio > 48 {
		t.Errorf("16× the items took %.1f× the CPU time (%v against %v): Lift is not linear", ratio, b, a)
	}
}

func FuzzLift(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{"x":[1,{"y":null}]}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"r"}],"is_error":true}]}]}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"},{"type":"reasoning","id":"r","summary":[{"text":"t"}]}]}`,
		`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"parts":[{"functionResponse":{"name":"f","response":{"a":1}}}]}]}`,
		`{"messages":[{"role":"user","content":[{"text":"x"},{"cachePoint":{"type":"default"}},{"image":{"format":"png","source":{"bytes":"AAAA"}}}]}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":"{\"a\":\"\\u00e9\"}"}}]},{"role":"tool","tool_call_id":"c","name":"n","content":""}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"q","citations":[{"type":"x"}]}]},{"role":"assistant","content":[{"type":"compaction","content":"c"},{"type":"text","text":"a"}]}]}`,
		`{"input":[{"type":"compaction","encrypted_content":"e"},{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"t","annotations":[]},{"type":"refusal","refusal":"r"}]},{"type":"reasoning","id":"r","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}]}]}`,
		`{"messages":[{"role":"assistant","content":null,"refusal":"no","audio":{"id":"a"},"reasoning_content":"t","tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":"{}"},"extra_content":{"google":{"thought_signature":"s"}}}]},{"role":"tool","tool_call_id":"c","content":""}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral"},"citations":[{"type":"char_location","cited_text":"c"}]},{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"x"}]},{"type":"tool_reference","tool_name":"n"}],"is_error":true}]}]}`,
		`[[[[[[`, `{"a":"\ud800"}`, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`,
	} {
		f.Add(s, int32(0))
	}
	f.Fuzz(func(t *testing.T, body string, provider int32) {
		p := compactorv1.Provider(provider % 6)
		resp, err := Lift(&compactorv1.LiftRequest{Body: body, Provider: p})
		if err != nil {
			var ve *engine.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error is not a ValidationError: %v", err)
			}
			return
		}
		// Whatever lifted must lower to every format without error or panic.
		for _, to := range allProviders {
			out, err := Lower(&compactorv1.LowerRequest{Messages: resp.GetMessages(), Provider: to, BaseBody: resp.GetRestBody()})
			if err != nil {
				t.Fatalf("lower to %v: %v", to, err)
			}
			if validateJSON(out.GetBody(), nil) != nil {
				t.Fatalf("lower to %v: invalid JSON %q", to, out.GetBody())
			}
		}
	})
}

// FuzzLower lowers arbitrary protobuf-decoded requests, valid IR or not: Lower must not panic
// and must give valid JSON whenever it succeeds.
func FuzzLower(f *testing.F) {
	for _, c := range lowerCases() {
		b, err := proto.Marshal(c.req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req compactorv1.LowerRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		for _, p := range allProviders {
			req.Provider = p
			out, err := Lower(&req)
			if err != nil {
				continue
			}
			if validateJSON(out.GetBody(), nil) != nil {
				t.Fatalf("lower to %v: invalid JSON %q", p, out.GetBody())
			}
		}
	})
}

// TestLowerNeverPanicsOnBrokenIR: Lower is only specified for validated IR, but must not
// panic on anything else (nil messages, nil parts, empty oneofs, nil outputs).
func TestLowerNeverPanicsOnBrokenIR(t *testing.T) {
	msgs := []*compactorv1.Message{
		nil,
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{nil, {}}},
		{Role: compactorv1.Role_ROLE_SYSTEM, Lifecycle: compactorv1.Lifecycle_LIFECYCLE_DYNAMIC, Parts: []*compactorv1.Part{{}}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_ToolCall{}}, {Content: &compactorv1.Part_Reasoning{}}, {Content: &compactorv1.Part_Image{}},
		}},
		{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_ToolResult{}},
			{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{}}}}},
		}},
		{Role: compactorv1.Role(99), Parts: []*compactorv1.Part{tx("x")}},
	}
	for _, p := range allProviders {
		for _, s := range []*compactorv1.Session{nil, {Active: true, Cursor: 1}} {
			out, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: p, Session: s, InlineDynamicSystem: true, BaseBody: `{"store":false,"toolConfig":{}}`})
			if err != nil {
				t.Fatalf("%v: %v", p, err)
			}
			if validateJSON(out.GetBody(), nil) != nil {
				t.Fatalf("%v: invalid JSON %s", p, out.GetBody())
			}
		}
	}
}
