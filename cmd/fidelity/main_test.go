package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/service"
)

// TestGoalsOnCorpus holds issue 16's goals on the corpus at windows of 60% and 30% of each
// conversation, for the extractive summarizer and for the one-line fake LLM: requests ≥
// 0.98, paths ≥ 0.95, every summary within its budget, no summarizer error; and issue 26's:
// the only errors are conversations whose head (system prompt) and newest request alone
// exceed the usable window, refused by the planner (FAILED_PRECONDITION) with an error that
// says so.
func TestGoalsOnCorpus(t *testing.T) {
	var files []string
	for _, f := range corpus.Files(t) {
		files = append(files, f.Path)
	}
	for _, share := range []float64{0.6, 0.3} {
		for _, name := range []string{"extractive", "oneline"} {
			t.Run(fmt.Sprintf("%s/%.0f%%", name, 100*share), func(t *testing.T) {
				r, err := measureAll(context.Background(), name, files, share)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range r.rows {
					is, neverCut := service.Irreducible(x.err)
					switch {
					case x.err != nil && is && neverCut && strings.Contains(x.err.Error(), "what no compaction cuts"):
						t.Logf("%s: refused by the planner: %v", x.name, x.err)
					case x.err != nil:
						t.Errorf("%s: %v", x.name, x.err)
					case !x.withinBudget:
						t.Errorf("%s: summary %d tokens over its budget %d", x.name, x.summaryTokens, x.budget)
					case !x.holdable():
						t.Logf("%s: the requests and paths the summary must hold are %d tokens, its budget %d: not held to the goals", x.name, x.mustHold, x.budget)
					case x.fid.Requests < 0.98 || x.fid.Paths < 0.95:
						t.Errorf("%s: requests %.3f, paths %.3f", x.name, x.fid.Requests, x.fid.Paths)
					}
				}
				m := r.means()
				if m.requests < 0.98 || m.paths < 0.95 {
					t.Errorf("means: requests %.3f, paths %.3f; want ≥ 0.98, ≥ 0.95", m.requests, m.paths)
				}
			})
		}
	}
}
