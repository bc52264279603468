package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/recalltool"
	"google.golang.org/protobuf/proto"
)

// modelCall appends to body (a request in format p) the assistant turn of a model calling
// recall_context with input, in p's tool-call shape.
func modelCall(t *testing.T, p compactorv1.Provider, body, input string) string {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatal(err)
	}
	var args any
	if err := json.Unmarshal([]byte(input), &args); err != nil {
		t.Fatal(err)
	}
	key, turn := "messages", map[string]any{}
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		turn = map[string]any{"role": "assistant", "content": []any{map[string]any{
			"type": "tool_use", "id": "toolu_recall", "name": recalltool.ToolName, "input": args}}}
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		turn = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_recall", "type": "function", "function": map[string]any{"name": recalltool.ToolName, "arguments": input}}}}
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		key = "input"
		turn = map[string]any{"type": "function_call", "call_id": "call_recall", "name": recalltool.ToolName, "arguments": input}
	case compactorv1.Provider_PROVIDER_GEMINI:
		key = "contents"
		turn = map[string]any{"role": "model", "parts": []any{map[string]any{
			"functionCall": map[string]any{"name": recalltool.ToolName, "args": args}}}}
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		turn = map[string]any{"role": "assistant", "content": []any{map[string]any{
			"toolUse": map[string]any{"toolUseId": "tooluse_recall", "name": recalltool.ToolName, "input": args}}}}
	}
	list, _ := b[key].([]any)
	b[key] = append(list, turn)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// summaryCitation is the summary's first per-line citation ("[m12–m18]"), else the range
// its source marker names.
var summaryCitation = regexp.MustCompile(`\[(m\d+(?:[–-]m?\d+)?)\]`)

// TestBinaryRecallToolAnswersFromSources runs a host's loop against the binary for each
// provider format: it compacts a corpus conversation, offers the model the recall_context
// tool (Compact's definition, Lower writing it into the body), reads back the scripted
// model's call to it with a citation from the summary (Lift of the model's turn), answers it
// with package recall through Expand, and checks the answer is the cited originals' text,
// byte for byte.
func TestBinaryRecallToolAnswersFromSources(t *testing.T) {
	p := startBinary(t, nil)
	client := compactorv1.NewCompactorServiceClient(p.dial(t))
	ctx := t.Context()
	f := corpus.Named(t, "claudecode-python-to-rust-port-ed152cd4.anthropic.json")
	lifted, err := client.Lift(ctx, &compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
	if err != nil {
		t.Fatal(err)
	}
	original := lifted.GetMessages()

	for _, tt := range []struct {
		provider compactorv1.Provider
		// cite writes the model's citation of range rng ("m3–m5") of source hash.
		cite func(hash, rng string) string
	}{
		{compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, func(_, rng string) string { return rng }},
		{compactorv1.Provider_PROVIDER_OPENAI_CHAT, func(_, rng string) string { return strings.ReplaceAll(rng, "–m", "-") }},
		{compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, func(h, rng string) string { return h + " " + rng }},
		{compactorv1.Provider_PROVIDER_GEMINI, func(_, rng string) string { return "[" + rng + "]" }},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, func(h, rng string) string { return "compactord source " + h + " " + rng }},
	} {
		t.Run(tt.provider.String(), func(t *testing.T) {
			resp, err := client.Compact(ctx, &compactorv1.CompactRequest{
				Messages: original, Force: true, TargetProvider: tt.provider,
				Policy: &compactorv1.Policy{ContextWindow: 16000},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.GetCompacted() || resp.GetSourceHash() == "" || resp.GetRecallToolJson() == "" {
				t.Fatalf("Compact: compacted %v, source %q, recall tool %q; want a compaction that kept its source and offers the tool (%s)",
					resp.GetCompacted(), resp.GetSourceHash(), resp.GetRecallToolJson(), resp.GetReason())
			}
			if !proto.Equal(resp.GetRecallTool(), recalltool.Tool()) {
				t.Errorf("recall_tool = %v, want recalltool.Tool()", resp.GetRecallTool())
			}
			compacted := resp.GetMessages()
			lowered, err := client.Lower(ctx, &compactorv1.LowerRequest{Messages: compacted, Provider: tt.provider,
				Model: "model-x", BaseBody: `{"max_tokens":1024}`, RecallTool: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(lowered.GetBody(), resp.GetRecallToolJson()) {
				t.Fatalf("the lowered body does not offer the tool as Compact wrote it:\n%s\nin\n%.2000s", resp.GetRecallToolJson(), lowered.GetBody())
			}

			rng := citedRange(t, compacted)
			cr, err := recalltool.ParseCitation(rng)
			if err != nil {
				t.Fatal(err)
			}
			input := fmt.Sprintf(`{"citation":%q}`, tt.cite(resp.GetSourceHash(), rng))
			turn, err := client.Lift(ctx, &compactorv1.LiftRequest{Body: modelCall(t, tt.provider, lowered.GetBody(), input), Provider: tt.provider})
			if err != nil {
				t.Fatal(err)
			}
			msgs := turn.GetMessages()
			var call *compactorv1.ToolCallPart
			for _, part := range msgs[len(msgs)-1].GetParts() {
				if c := part.GetToolCall(); c.GetToolName() == recalltool.ToolName {
					call = c
				}
			}
			if call == nil {
				t.Fatalf("the model's turn lifts to %v: no %s call", msgs[len(msgs)-1], recalltool.ToolName)
			}

			a := recalltool.Answerer{Client: client, MaxTokens: 1 << 20}
			answer, err := a.Answer(ctx, msgs[:len(msgs)-1], call.GetInputJson())
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			first, last := rangeBounds(t, cr.Range)
			for i := first; i <= last; i++ {
				fmt.Fprintf(&want, "[%s m%d %s]\n%s\n", resp.GetSourceHash(), i,
					strings.ToLower(strings.TrimPrefix(original[i].GetRole().String(), "ROLE_")), recalltool.Text(original[i]))
			}
			t.Logf("the model cites %s: %d bytes of originals", input, len(answer))
			if answer != want.String() {
				t.Errorf("answer to %s:\n%s\nwant the originals' text:\n%s", input, answer, want.String())
			}
			parsed, err := recalltool.ParseCall(call.GetInputJson())
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Cited(ctx, compacted, parsed.Citation)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != last-first+1 {
				t.Errorf("%q cites %d messages, want %d", parsed.Citation, len(got), last-first+1)
			}
			for _, s := range got {
				gb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(s.Message)
				wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(original[s.Index])
				if string(gb) != string(wb) {
					t.Errorf("m%d: Expand gave %v, want the original %v", s.Index, s.Message, original[s.Index])
				}
			}
		})
	}
}

// citedRange is a range the summary in msgs cites: its first per-line citation, else three
// messages of the range its source marker names, from its second message.
func citedRange(t *testing.T, msgs []*compactorv1.Message) string {
	t.Helper()
	for _, m := range msgs {
		if m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			continue
		}
		text := recalltool.Text(m)
		if c := summaryCitation.FindStringSubmatch(text); c != nil {
			return c[1]
		}
		mk := regexp.MustCompile(`\[compactord source [0-9a-f]{64} m(\d+)[–-]m(\d+)`).FindStringSubmatch(text)
		if mk == nil {
			t.Fatalf("the summary names no source:\n%s", text)
		}
		var first, last int
		fmt.Sscan(mk[1], &first)
		fmt.Sscan(mk[2], &last)
		if last-first < 3 {
			t.Fatalf("the summary covers m%d–m%d: too few to cite a range of", first, last)
		}
		return fmt.Sprintf("m%d–m%d", first+1, first+3)
	}
	t.Fatal("no summary message in the compacted conversation")
	return ""
}

// rangeBounds reads a range such as m3–m5 or m3.
func rangeBounds(t *testing.T, rng string) (first, last int) {
	t.Helper()
	m := regexp.MustCompile(`(\d+)(?:\D+(\d+))?`).FindStringSubmatch(rng)
	fmt.Sscan(m[1], &first)
	last = first
	if m[2] != "" {
		fmt.Sscan(m[2], &last)
	}
	return first, last
}
