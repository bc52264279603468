package format

import (
	"slices"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// TestCutLiftedToolOutputs: a tool output too large for the window, in the shape each
// provider's body gives it (an Anthropic array tool_result of text and an image, a Chat array
// content, a Responses array output, a Gemini functionResponse, a Bedrock toolResult of text,
// an image or JSON), lifted, planned and compacted: it is cut (never irreducible), its
// content keeps every part that is not text, in place, what the plan counts is what PruneAndCut
// returns, and the cut conversation lowers back to its provider in a body the SDK takes, its
// images and cut note in it.
func TestCutLiftedToolOutputs(t *testing.T) {
	big := func(seed string) string {
		var b strings.Builder
		for i := range 4000 {
			b.WriteString(seed + " line " + itoa(i) + ": some output of the tool\n")
		}
		return b.String()
	}
	q := func(s string) string { return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"` }
	const png = "iVBORw0KGgoAAAANSUhEUg=="
	cases := []struct {
		name string
		from compactorv1.Provider
		body string
		// kinds are the content parts of the lifted output ("" for a text or JSON output).
		kinds []string
	}{
		{"anthropic tool_result of text and an image", pA,
			aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":` + q(big("a")) + `},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}},{"type":"text","text":` + q(big("b")) + `}]}]}]}`,
			[]string{"text", "image", "text"}},
		{"anthropic tool_result of text and a search_result", pA,
			aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":` + q(big("a")) + `},` + searchResult + `]}]}]}`,
			[]string{"text", "provider"}},
		{"openai-chat tool message of text parts", pC,
			cHead + `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":` + q(big("a")) + `},{"type":"text","text":` + q(big("b")) + `}]}]}`,
			[]string{"text", "text"}},
		{"openai-responses output of text and an image", pR,
			rHead + `{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":` + q(big("a")) + `},{"type":"input_image","image_url":"data:image/png;base64,` + png + `"}]}]}`,
			[]string{"text", "image"}},
		{"gemini functionResponse of text", pG,
			gHead + `{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"f","response":{"name":"f","content":` + q(big("a")) + `}}}]}]}`,
			nil},
		{"gemini functionResponse of JSON", pG,
			gHead + `{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"f","response":{"lines":` + q(big("a")) + `}}}]}]}`,
			nil},
		{"bedrock toolResult of text and an image", pB,
			bHead + `{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":` + q(big("a")) + `},{"image":{"format":"png","source":{"bytes":"` + png + `"}}}]}}]}]}`,
			[]string{"text", "image"}},
		{"bedrock toolResult of JSON", pB,
			bHead + `{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"json":{"lines":` + q(big("a")) + `}}]}}]}]}`,
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lifted, err := Lift(&compactorv1.LiftRequest{Body: c.body, Provider: c.from})
			if err != nil {
				t.Fatal(err)
			}
			msgs := lifted.GetMessages()
			last := len(msgs) - 1
			out := msgs[last].GetParts()[0].GetToolResult().GetOutput()
			if got := contentKinds(out); !slices.Equal(got, c.kinds) {
				t.Fatalf("lifted output holds %v, want %v", got, c.kinds)
			}
			counter := engine.NewCounter(1 << 20)
			policy := &compactorv1.Policy{ContextWindow: 16000}
			d, err := engine.Decide(msgs, policy, counter, engine.Options{})
			if err != nil {
				t.Fatalf("not cut: %v", err)
			}
			if len(d.Cuts) != 1 || d.Cuts[0].Message != last || d.Response.GetCutTokens() == 0 {
				t.Fatalf("cuts %+v: want the tool output cut (%s)", d.Cuts, d.Response.GetReason())
			}
			compacted := engine.PruneAndCut(msgs, d)
			if err := engine.DefaultLimits().Validate(compacted); err != nil {
				t.Fatal(err)
			}
			cut := compacted[last].GetParts()[0].GetToolResult().GetOutput()
			if c.kinds != nil {
				if got := contentKinds(cut); !slices.Equal(got, c.kinds) {
					t.Errorf("the cut output holds %v, want %v: every part that is not text kept in place", got, c.kinds)
				}
				for k, p := range out.GetContent().GetParts() {
					if p.GetText() == nil && cut.GetContent().GetParts()[k] != p {
						t.Errorf("content part %d changed", k)
					}
				}
			}
			again, err := engine.Plan(compacted, policy, counter)
			if err != nil {
				t.Fatal(err)
			}
			if got, after := again.GetTokensBefore(), d.Response.GetTokensAfter(); got > after || got < after-8 {
				t.Errorf("the compacted conversation counts %d tokens, the plan's tokens_after is %d", got, after)
			}
			base := lifted.GetRestBody()
			lowered, err := Lower(&compactorv1.LowerRequest{Messages: compacted, Provider: c.from, BaseBody: base})
			if err != nil {
				t.Fatal(err)
			}
			checkConformance(t, c.from, lowered.GetBody())
			if !strings.Contains(lowered.GetBody(), "tokens cut from the middle of this output") {
				t.Errorf("no cut note in the lowered body")
			}
			if slices.Contains(c.kinds, "image") && !strings.Contains(lowered.GetBody(), png) {
				t.Errorf("the image is not in the lowered body")
			}
			if slices.Contains(c.kinds, "provider") && !strings.Contains(lowered.GetBody(), searchResult) {
				t.Errorf("the search_result is not in the lowered body")
			}
		})
	}
}

// contentKinds names the parts of a content output, or is nil for any other output.
func contentKinds(o *compactorv1.ToolOutput) []string {
	var kinds []string
	for _, p := range o.GetContent().GetParts() {
		switch p.GetContent().(type) {
		case *compactorv1.Part_Text:
			kinds = append(kinds, "text")
		case *compactorv1.Part_Image:
			kinds = append(kinds, "image")
		case *compactorv1.Part_File:
			kinds = append(kinds, "file")
		case *compactorv1.Part_Provider:
			kinds = append(kinds, "provider")
		}
	}
	return kinds
}
