package service

import (
	"context"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/summarize"
	"github.com/compactord/compactord/summary"
)

// capturingSummarizer records the request an LLM summarizer would be given.
type capturingSummarizer struct{ req summarize.Request }

func (c *capturingSummarizer) Summarize(_ context.Context, req summarize.Request) (summarize.Result, error) {
	c.req = req
	return summarize.Result{Output: summary.Output{Text: "the user asked to delete the weather folder."}, Attempts: 1}, nil
}

func (c *capturingSummarizer) Fingerprint() summarize.Fingerprint {
	return summarize.Fingerprint{Name: "capture", Model: "m"}
}

// TestLLMPromptShowsHostTextToSummarize: a kept request's parts of host text are folded into
// the summary (the compaction drops them from the request it keeps), so the transcript an LLM
// summarizer reads heads them as the range's, and only the user's words "kept verbatim after
// the summary: do not repeat".
func TestLLMPromptShowsHostTextToSummarize(t *testing.T) {
	continued := "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n" +
		"Summary:\n1. Primary Request and Intent: a single page weather app in graz, in weather/index.html.\n" + strings.Repeat("The app fetches open-meteo and renders a card. ", 120)
	words := "alright, i changed my mind, please delete the weather folder"
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(continued), irtest.Text(words)),
		irtest.Assistant("", irtest.Call("b1", "Bash", `{"command":"rm -rf weather"}`)),
		irtest.Result("b1", "Bash", irtest.OutText("")),
		irtest.Assistant("Weather folder deleted."),
		irtest.User("bye"),
		irtest.Assistant("Bye!"),
	}
	s := New(Options{})
	req := &compactorv1.CompactRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 4000}}
	d, err := engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Response.GetDispositions()[0] != compactorv1.Disposition_DISPOSITION_KEEP_REQUEST {
		t.Fatalf("message 0 is %v, want it kept as a request: %s", d.Response.GetDispositions()[0], d.Response.GetReason())
	}
	sum := &capturingSummarizer{}
	c, err := s.newCompaction(req, msgs, d, sum, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.job(c.start())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.call(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	prompt := engine.SummaryPrompt(sum.req.SummaryInput, engine.TranscriptOptions{})
	head := "[m0 user, kept verbatim after the summary: do not repeat]\n"
	at := strings.Index(prompt, head)
	if at < 0 {
		t.Fatalf("no kept message in the prompt:\n%s", prompt)
	}
	block, _, _ := strings.Cut(prompt[at+len(head):], "\n[m")
	if strings.Contains(block, "a single page weather app in graz") {
		t.Errorf("Claude Code's summary, which the compacted conversation drops, is shown to the summarizer as kept verbatim (do not repeat):\n%.400s", prompt[at:])
	}
}

// TestChunksCountHostText: a chunked summary's chunks stand for what the whole job stands for:
// the sum of the chunks' inTokens is j.inTokens, a kept request's host text (HostTokens)
// included, so that a chunk made mostly of Claude Code's own summary counts what it replaces
// (and chunkDone caches it).
func TestChunksCountHostText(t *testing.T) {
	continued := "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n" +
		"Summary:\n1. Primary Request and Intent: a single page weather app in graz.\n" + strings.Repeat("The app fetches open-meteo and renders a card. ", 120)
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(continued), irtest.Text("alright, please delete the weather folder")),
	}
	for i := range 12 {
		id := "c" + strings.Repeat("x", i)
		msgs = append(msgs, irtest.Assistant("reading", irtest.Call(id, "Read", `{"file_path":"/repo/f.go"}`)),
			irtest.Result(id, "Read", irtest.OutText(strings.Repeat("line of code ", 40))))
	}
	msgs = append(msgs, irtest.Assistant("done"))
	s := New(Options{})
	req := &compactorv1.CompactRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 4000, Prune: &compactorv1.PrunePolicy{Disabled: true}}}
	d, err := engine.Decide(msgs, req.GetPolicy(), s.counter, engine.Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Response.GetDispositions()[0] != compactorv1.Disposition_DISPOSITION_KEEP_REQUEST || d.HostTokens(0) == 0 {
		t.Fatalf("message 0 is %v with %d host tokens: %s", d.Response.GetDispositions()[0], d.HostTokens(0), d.Response.GetReason())
	}
	c, err := s.newCompaction(req, msgs, d, &billedSummarizer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.job(c.start())
	if err != nil {
		t.Fatal(err)
	}
	kept := map[*compactorv1.Message]bool{}
	for _, m := range j.kept {
		kept[m] = true
	}
	var sum int64
	for start := 0; start < len(j.in); start += 4 {
		sum += c.chunkJob(j, start, min(start+4, len(j.in)), kept).inTokens
	}
	first := c.chunkJob(j, 0, 1, kept)
	if sum != j.inTokens {
		t.Errorf("the chunks stand for %d tokens, the job for %d (host tokens of the kept request %d); the chunk of message 0 alone stands for %d",
			sum, j.inTokens, d.HostTokens(0), first.inTokens)
	}
}
