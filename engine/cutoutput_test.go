package engine

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// TestCutTextsAcrossParts: the text parts of one output are cut as one text. The parts before
// the one where the head ends are kept whole, that one keeps a prefix and gets the note, the
// ones after it are gone or keep a suffix (the tail), and what is kept fits keep, with a
// bound at least what the parts then count.
func TestCutTextsAcrossParts(t *testing.T) {
	tc, err := tokenizer.New(tokenizer.O200k)
	if err != nil {
		t.Fatal(err)
	}
	long := func(n int, seed string) string { return plWords(n, seed) }
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("line " + strconv.Itoa(i) + " of the log\n")
		}
		return b.String()
	}
	cases := []struct {
		name  string
		texts []string
	}{
		{"one text", []string{long(3000, "w")}},
		{"one text of lines", []string{lines(600)}},
		{"three texts", []string{long(1000, "a"), long(1000, "b"), long(1000, "c")}},
		{"small texts around a large one", []string{"header", long(3000, "x"), "footer"}},
		{"many small texts", slices.Repeat([]string{long(40, "s")}, 80)},
		{"an empty text among them", []string{long(1500, "p"), "", long(1500, "q")}},
		{"multibyte text", []string{strings.Repeat("日本語のテキスト ", 600), strings.Repeat("ß", 900)}},
	}
	for _, c := range cases {
		var total int64
		for _, s := range c.texts {
			total += tc.Count(s)
		}
		for _, tt := range []struct {
			keep int64
			ref  string
		}{{MinCutOutputTokens, ""}, {400, ""}, {total / 2, ""}, {MinCutOutputTokens, OutputSource(strings.Repeat("c0ffee", 10)+"beef", 12)}} {
			keep, ref := tt.keep, tt.ref
			out, bound := cutTexts(c.texts, total, keep, ref, tc)
			if len(out) != len(c.texts) {
				t.Fatalf("%s, keep %d: %d texts out of %d", c.name, keep, len(out), len(c.texts))
			}
			noted, note := -1, ""
			var kept, got int64
			for k, s := range out {
				got += tc.Count(s)
				if i := strings.Index(s, "\n[… "); i >= 0 {
					if noted >= 0 {
						t.Fatalf("%s, keep %d: a second note in text %d", c.name, keep, k)
					}
					j := strings.Index(s, " …]\n") + len(" …]\n")
					head, tail := s[:i], s[j:]
					if !strings.HasPrefix(c.texts[k], head) || !strings.HasSuffix(c.texts[k], tail) || len(head)+len(tail) > len(c.texts[k]) {
						t.Fatalf("%s, keep %d: text %d is not its own head and tail around the note: %.80q", c.name, keep, k, s)
					}
					noted, note = k, s[i:j]
					kept += tc.Count(head) + tc.Count(tail)
					continue
				}
				switch {
				case noted < 0 && s != c.texts[k]:
					t.Fatalf("%s, keep %d: text %d before the note changed", c.name, keep, k)
				case noted >= 0 && s != "" && !strings.HasSuffix(c.texts[k], s):
					t.Fatalf("%s, keep %d: text %d after the note is not a tail of its own", c.name, keep, k)
				case noted >= 0 && s == "" && c.texts[k] != "" && k > noted+1 && out[k-1] != "":
					t.Fatalf("%s, keep %d: text %d is cut, after a kept one: the tail is not one piece", c.name, keep, k)
				case noted >= 0 && s != "" && s != c.texts[k] && k > noted+1 && out[k-1] != "":
					t.Fatalf("%s, keep %d: text %d is cut, after a kept one: the tail is not one piece", c.name, keep, k)
				}
				kept += tc.Count(s)
			}
			if noted < 0 {
				t.Fatalf("%s, keep %d: no note", c.name, keep)
			}
			if want := cutNote(total-kept, ref); note != want {
				t.Errorf("%s, keep %d: note %q, want %q", c.name, keep, note, want)
			}
			if kept > keep {
				t.Errorf("%s, keep %d: %d tokens kept", c.name, keep, kept)
			}
			if got > bound {
				t.Errorf("%s, keep %d: the cut texts count %d, over the bound %d", c.name, keep, got, bound)
			}
			// Deterministic: PruneAndCut cuts again what the plan cut.
			if again, b := cutTexts(c.texts, total, keep, ref, tc); !slices.Equal(again, out) || b != bound {
				t.Errorf("%s, keep %d: a second cut differs", c.name, keep)
			}
		}
	}
}

type outputShape struct {
	name string
	out  *compactorv1.ToolOutput
}

// outputShapes is the same text as a tool output of every shape that holds text: a text, an
// error text, the one text part of a content output, and the text parts of a content output
// around an image and a provider block (the first with provider options).
func outputShapes(text string) []outputShape {
	png := &compactorv1.Part{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{
		Source: &compactorv1.ImagePart_Data{Data: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x01\x00\x00\x00\x01\x00")}, MediaType: "image/png"}}}
	block := &compactorv1.Part{Content: &compactorv1.Part_Provider{Provider: &compactorv1.ProviderPart{
		Provider: ProviderAnthropic, Type: "search_result", Json: `{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"x"}]}`}}}
	cached := plText(text[:len(text)/2])
	cached.ProviderOptions = map[string]*structpb.Struct{"anthropic": {Fields: map[string]*structpb.Value{"cacheControl": structpb.NewStringValue("ephemeral")}}}
	content := func(parts ...*compactorv1.Part) *compactorv1.ToolOutput {
		return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}
	}
	return []outputShape{
		{"text", &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: text}}},
		{"error text", &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: text}}},
		{"content of one text", content(plText(text))},
		{"content of texts, an image and a provider block", content(cached, png, plText(text[len(text)/2:]), block)},
	}
}

// TestCutEveryOutputShape: the same 59k-token text, as a text output, as the one text part of
// a content output and as the text parts of a content output around an image and a provider
// block, is cut to fit (never irreducible): the content output keeps its shape, its image and
// its provider block, each text part its provider options, and what the plan counts is what
// PruneAndCut returns.
func TestCutEveryOutputShape(t *testing.T) {
	shapes := outputShapes(plWords(59000, "w"))
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			res := plResult("c1", "read", "")
			res.GetToolResult().Output = s.out
			msgs := []*compactorv1.Message{plSysMsg("sys"), plUserMsg("read the file"), plAsstMsg(plCall("c1", "read", `{}`)), plToolMsg(res)}
			p := &compactorv1.Policy{ContextWindow: 40000}
			counter := NewCounter(1 << 20)
			for _, source := range []string{"", testSource} {
				d := mustDecide(t, msgs, p, counter, Options{Source: source})
				if d.Response.Action != compactorv1.Action_ACTION_PRUNE || len(d.Cuts) != 1 || d.Cuts[0].Message != 3 || d.Response.CutTokens < 30000 {
					t.Fatalf("cuts %+v, cut_tokens %d: want the output cut by 30000 tokens at least (%s)", d.Cuts, d.Response.CutTokens, d.Response.Reason)
				}
				out := PruneAndCut(msgs, d)
				if err := DefaultLimits().Validate(out); err != nil {
					t.Fatal(err)
				}
				cut := out[3].GetParts()[0].GetToolResult().GetOutput()
				if c := s.out.GetContent(); c != nil {
					var kinds, want []string
					for _, p := range cut.GetContent().GetParts() {
						kinds = append(kinds, partName(p))
					}
					for _, p := range c.GetParts() {
						want = append(want, partName(p))
					}
					if !slices.Equal(kinds, want) {
						t.Errorf("cut content holds %v, want %v", kinds, want)
					}
					for k, p := range c.GetParts() {
						if p.GetText() == nil && !proto.Equal(p, cut.GetContent().GetParts()[k]) {
							t.Errorf("part %d (%s) changed", k, partName(p))
						}
						if !proto.Equal(&compactorv1.Part{ProviderOptions: p.GetProviderOptions()}, &compactorv1.Part{ProviderOptions: cut.GetContent().GetParts()[k].GetProviderOptions()}) {
							t.Errorf("part %d lost its provider options", k)
						}
					}
				} else if _, ok := outputText(cut); !ok || isError(cut) != isError(s.out) {
					t.Errorf("cut output %T from %T", cut.GetValue(), s.out.GetValue())
				}
				again, err := Plan(out, p, counter)
				if err != nil {
					t.Fatal(err)
				}
				if got, after := again.TokensBefore, d.Response.TokensAfter; got > after || got < after-(cutJoinMargin+2) {
					t.Errorf("the cut conversation counts %d, tokens_after %d", got, after)
				}
				if text := messageTextOf(out[3]); source != "" && !strings.Contains(text, OutputSource(source, 3)) || source == "" && !strings.Contains(text, "the full output is gone") {
					t.Errorf("source %q: the cut output's note does not say where the full output is", source)
				}
			}
		})
	}
}

func isError(o *compactorv1.ToolOutput) bool {
	switch o.GetValue().(type) {
	case *compactorv1.ToolOutput_ErrorText, *compactorv1.ToolOutput_ErrorJson:
		return true
	}
	return false
}

// TestCutObservationKeepsItsParts: an observation (a command's output sent as a user message)
// of two text parts is cut across them: the first keeps its provider options, neither is
// merged into the other, and what the plan counts is what PruneAndCut returns.
func TestCutObservationKeepsItsParts(t *testing.T) {
	first := plText("<returncode>0</returncode>\n<output>\n" + plWords(20000, "o"))
	first.ProviderOptions = map[string]*structpb.Struct{"anthropic": {Fields: map[string]*structpb.Value{"cacheControl": structpb.NewStringValue("ephemeral")}}}
	obs := plMsg(compactorv1.Role_ROLE_USER, first, plText(plWords(20000, "p")))
	msgs := []*compactorv1.Message{plUserMsg("list the files"), plAsstMsg(plText("```bash\nls\n```")), obs}
	p := &compactorv1.Policy{ContextWindow: 20000, KeepRecentTurns: 3} // nothing to summarize: cut
	counter := NewCounter(1 << 20)
	d := mustDecide(t, msgs, p, counter, Options{})
	if d.Response.Action != compactorv1.Action_ACTION_PRUNE || len(d.Cuts) != 1 || d.Cuts[0].Message != 2 || d.Cuts[0].Part != -1 {
		t.Fatalf("cuts %+v, want the observation (%s)", d.Cuts, d.Response.Reason)
	}
	out := PruneAndCut(msgs, d)
	parts := out[2].GetParts()
	if len(parts) != 2 || !proto.Equal(&compactorv1.Part{ProviderOptions: parts[0].GetProviderOptions()}, &compactorv1.Part{ProviderOptions: first.GetProviderOptions()}) {
		t.Fatalf("the cut observation has %d parts, the first with options %v: want its two parts, the first with its options", len(parts), parts[0].GetProviderOptions())
	}
	if !strings.HasPrefix(first.GetText().GetText(), strings.SplitN(parts[0].GetText().GetText(), "\n[…", 2)[0]) || !strings.HasSuffix(obs.GetParts()[1].GetText().GetText(), parts[1].GetText().GetText()) {
		t.Errorf("the parts are not the head of the first and the tail of the second")
	}
	again, err := Plan(out, p, counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, after := again.TokensBefore, d.Response.TokensAfter; got > after || got < after-(cutJoinMargin+2) {
		t.Errorf("the cut conversation counts %d, tokens_after %d", got, after)
	}
}

// TestPruneEveryOutputShape: an old tool output of every shape is pruned to its marker, and
// what the plan counts is what PruneAndCut returns: exactly, or at most when the marker names
// the source where the full output is.
func TestPruneEveryOutputShape(t *testing.T) {
	for _, s := range outputShapes(plWords(3000, "w")) {
		t.Run(s.name, func(t *testing.T) {
			old := plResult("c1", "read", "")
			old.GetToolResult().Output = s.out
			msgs := []*compactorv1.Message{plSysMsg("sys"), plUserMsg("read the file"), plAsstMsg(plCall("c1", "read", `{}`)), plToolMsg(old)}
			for _, id := range []string{"c2", "c3", "c4"} {
				msgs = append(msgs, plAsstMsg(plCall(id, "read", `{"n":"`+id+`"}`)), plToolMsg(plResult(id, "read", "ok "+id)))
			}
			p := &compactorv1.Policy{ContextWindow: 4000, KeepRecentTurns: 10}
			counter := NewCounter(1 << 20)
			// Pruning to the target cuts the output when that frees enough (prunetarget.go);
			// asked to free more than a cut can (it keeps MinCutOutputTokens and a note), the
			// plan prunes it.
			if d := mustDecide(t, msgs, p, counter, Options{}); len(d.Cuts) != 1 || len(d.Pruned) != 0 {
				t.Fatalf("cuts %+v, pruned %+v: want the old output cut to reach the target (%s)", d.Cuts, d.Pruned, d.Response.Reason)
			} else {
				p.Prune = &compactorv1.PrunePolicy{ClearAtLeastTokens: d.Cuts[0].Tokens - MinCutOutputTokens}
			}
			for _, source := range []string{"", testSource} {
				d := mustDecide(t, msgs, p, counter, Options{Source: source})
				if d.Response.Action != compactorv1.Action_ACTION_PRUNE || len(d.Pruned) != 1 || d.Pruned[0].Message != 3 {
					t.Fatalf("%v, pruned %+v: want the old output pruned (%s)", d.Response.Action, d.Pruned, d.Response.Reason)
				}
				out := PruneAndCut(msgs, d)
				if got := out[3].GetParts()[0].GetToolResult().GetOutput().GetText(); got != d.Pruned[0].Marker() {
					t.Errorf("the pruned output is %q, want its marker", got)
				}
				again, err := Plan(out, p, counter)
				if err != nil {
					t.Fatal(err)
				}
				if again.TokensBefore > d.Response.TokensAfter || source == "" && again.TokensBefore != d.Response.TokensAfter {
					t.Errorf("source %q: the pruned conversation counts %d, tokens_after %d", source, again.TokensBefore, d.Response.TokensAfter)
				}
				if got := out[3].GetParts()[0].GetToolResult().GetOutput().GetText(); source != "" && !strings.HasSuffix(got, " ["+OutputSource(source, 3)+"]") {
					t.Errorf("the pruned output's marker %q does not say where the full output is", got)
				}
			}
		})
	}
}

// testSource is a source hash for the plans that name one.
var testSource = strings.Repeat("5eed", 16)

// messageTextOf is the text of m's parts and tool outputs, joined.
func messageTextOf(m *compactorv1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		b.WriteString(p.GetText().GetText())
		if o := p.GetToolResult().GetOutput(); o != nil {
			t, _ := outputText(o)
			b.WriteString(t)
			b.WriteString(strings.Join(textsOf(o.GetContent().GetParts()), "\n"))
		}
	}
	return b.String()
}
