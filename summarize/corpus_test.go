package summarize

import (
	"context"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/corpus"
)

// TestSummariesOnCorpus lifts every corpus conversation (both formats) and checks what each
// summarizer would get: the extractive summary fits its budget and quotes the first request;
// the LLM prompt fits max_input_tokens.
func TestSummariesOnCorpus(t *testing.T) {
	ext := NewExtractive("", 0, Options{})
	for _, f := range corpus.Files(t) {
		t.Run(f.Name, func(t *testing.T) {
			lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
			if err != nil {
				t.Fatal(err)
			}
			msgs := lifted.GetMessages()
			res, err := ext.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: msgs}, MaxOutputTokens: 1500})
			if err != nil {
				t.Fatal(err)
			}
			if res.OutputTokens > 1500 || ApproxTokens(res.Text) > 1500 {
				t.Errorf("extractive summary is %d tokens", res.OutputTokens)
			}
			if first := firstRequest(msgs); first != "" && !strings.Contains(res.Text, first) {
				t.Errorf("summary does not quote the first request %q", first)
			}
			p := engine.FitSummaryPrompt(engine.SummaryInput{Messages: msgs}, 30000)
			if len(p) > 30000 {
				t.Errorf("prompt is %d bytes", len(p))
			}
		})
	}
}

// firstRequest returns the first line (≤ 40 bytes) of the first request a summary of msgs
// covers (see sumFirstUserText).
func firstRequest(msgs []*compactorv1.Message) string {
	return sumPrefix(sumFirstUserText(msgs), 40)
}
