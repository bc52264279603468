package format

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
)

// TestLiftSources: every lifted part names the body element it was read from, in each
// format, through splits (a provider message holding tool results and text) and merges
// (OpenAI Responses items joined into one message).
func TestLiftSources(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
		want [][]string
	}{
		{"anthropic", `{"system":"s","messages":[{"role":"user","content":"q"},
			{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"},{"type":"text","text":"and?"}]}]}`,
			[][]string{{"body.system"}, {"body.messages[0]"}, {"body.messages[1]"}, {"body.messages[2]"}, {"body.messages[2]"}}},
		{"openai-chat", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"q"},
			{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"n","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"n","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"a","content":"r"},{"role":"tool","tool_call_id":"b","content":"r"}]}`,
			[][]string{{"body.messages[0]"}, {"body.messages[1]"}, {"body.messages[2]", "body.messages[2]"}, {"body.messages[3]"}, {"body.messages[4]"}}},
		{"openai-responses", `{"instructions":"s","input":[{"role":"user","content":"q"},
			{"type":"function_call","call_id":"a","name":"n","arguments":"{}"},{"type":"function_call","call_id":"b","name":"n","arguments":"{}"},
			{"type":"function_call_output","call_id":"a","output":"r"},{"type":"function_call_output","call_id":"b","output":"r"}]}`,
			[][]string{{"body.instructions"}, {"body.input[0]"}, {"body.input[1]", "body.input[2]"}, {"body.input[3]", "body.input[4]"}}},
		{"openai-responses string input", `{"input":"q"}`, [][]string{{"body.input"}}},
		{"gemini", `{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"functionCall":{"name":"n","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"n","response":{}}},{"text":"and?"}]}]}`,
			[][]string{{"body.systemInstruction"}, {"body.contents[0]"}, {"body.contents[1]"}, {"body.contents[2]"}, {"body.contents[2]"}}},
		{"bedrock", `{"system":[{"text":"s"}],"messages":[{"role":"user","content":[{"text":"q"}]},
			{"role":"assistant","content":[{"toolUse":{"toolUseId":"a","name":"n","input":{}}}]}]}`,
			[][]string{{"body.system"}, {"body.messages[0]"}, {"body.messages[1]"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &compactorv1.LiftRequest{Body: tt.body}
			resp, sources, err := LiftSources(req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(sources, tt.want, slices.Equal) {
				t.Errorf("sources %q, want %q", sources, tt.want)
			}
			checkSources(t, req, resp, sources)
		})
	}
}

// TestLiftSourcesCorpus: over every corpus conversation, LiftSources lifts what Lift lifts and
// gives every part a source that is a path into the body's conversation.
func TestLiftSourcesCorpus(t *testing.T) {
	for _, f := range corpus.Files(t) {
		req := &compactorv1.LiftRequest{Body: string(corpus.Read(t, f))}
		resp, sources, err := LiftSources(req)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		checkSources(t, req, resp, sources)
	}
}

// checkSources: the same response as Lift's, one source per part, each under "body.".
func checkSources(t *testing.T, req *compactorv1.LiftRequest, resp *compactorv1.LiftResponse, sources [][]string) {
	t.Helper()
	plain, err := Lift(req)
	if err != nil || !proto.Equal(plain, resp) {
		t.Fatalf("LiftSources lifted differently from Lift (%v)", err)
	}
	if len(sources) != len(resp.GetMessages()) {
		t.Fatalf("%d sources for %d messages", len(sources), len(resp.GetMessages()))
	}
	for i, m := range resp.GetMessages() {
		if len(sources[i]) != len(m.GetParts()) {
			t.Fatalf("message %d: %d sources for %d parts", i, len(sources[i]), len(m.GetParts()))
		}
		for _, s := range sources[i] {
			if !strings.HasPrefix(s, "body.") {
				t.Fatalf("message %d: source %q is not a path into the body", i, s)
			}
		}
	}
}
