package format

import (
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// toolTextString is the text jw.toolText writes, built as a string: the definition its
// piecewise escaping must match.
func toolTextString(p *compactorv1.Part) string {
	if c := p.GetToolCall(); c != nil {
		return "[tool call " + c.GetToolName() + " " + c.GetInputJson() + "]"
	}
	r := p.GetToolResult()
	name := r.GetToolName()
	if name == "" {
		name = r.GetToolCallId()
	}
	prefix := "[tool result " + name + ": "
	if isErrorOutput(r.GetOutput()) {
		prefix = "[tool error " + name + ": "
	}
	return prefix + outputText(r.GetOutput()) + "]"
}

// TestBedrockToolTextMatchesString checks that writing a tool block's text piece by piece
// gives the JSON string of the whole text, for texts that need escaping at the edges of
// their pieces (quotes, controls, U+2028, invalid UTF-8) and every kind of output.
func TestBedrockToolTextMatchesString(t *testing.T) {
	pieces := []string{
		"", "x", "plain name", `say "hi"`, "line\nbreak\t", `back\slash`, "\u2028", "é", "日本語",
		"\xe2\x80", "\x80tail", "ends badly \xf0\x9f", "\xff", strings.Repeat("long text, ", 40) + "\"",
	}
	var parts []*compactorv1.Part
	for _, a := range pieces {
		for _, b := range pieces {
			parts = append(parts,
				callPart("id", a, b),
				resultPart("call_"+a, a, textOut(b)),
				resultPart("call_"+b, "", textOut(a)),
				resultPart("id", a, errText(b)),
				resultPart("id", a, jsonOut(b)),
				resultPart("id", a, &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorJson{ErrorJson: b}}),
				resultPart("id", a, &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Denied{Denied: b}}),
				resultPart("id", a, contentOut(tx(a), tx(b))),
				resultPart("id", a, contentOut(tx(""), reasoning(a, "sig"), tx(b), tx(a))),
			)
		}
	}
	parts = append(parts,
		resultPart("id", "", nil),
		resultPart("", "", contentOut()),
		resultPart("id", "n", &compactorv1.ToolOutput{}),
	)
	for _, p := range parts {
		want := string(appendString(nil, toolTextString(p)))
		for _, pre := range []string{"", `{"text":`} {
			w := jw{b: []byte(pre), first: true} // as after a key
			w.toolText(p)
			if got := string(w.b); got != pre+want {
				t.Fatalf("toolText(%v) = %q, want %q", p, got, pre+want)
			}
		}
	}
}
