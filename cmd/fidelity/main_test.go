package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/compactord/compactord/internal/corpus"
)

// TestGoalsOnCorpus holds issue 16's goals on the corpus, for the extractive summarizer and
// for the one-line fake LLM: requests ≥ 0.98, paths ≥ 0.95, every summary within its budget,
// no summarizer error. A conversation whose last turns alone exceed the window is refused
// by the planner (FAILED_PRECONDITION, before any summary): it is logged, not a summary
// failure.
func TestGoalsOnCorpus(t *testing.T) {
	var files []string
	for _, f := range corpus.Files(t) {
		files = append(files, f.Path)
	}
	for _, name := range []string{"extractive", "oneline"} {
		t.Run(name, func(t *testing.T) {
			r, err := measureAll(context.Background(), name, files)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range r.rows {
				switch {
				case x.err != nil && status.Code(x.err) == codes.FailedPrecondition && strings.Contains(x.err.Error(), "irreducible"):
					t.Logf("%s: refused by the planner: %v", x.name, x.err)
				case x.err != nil:
					t.Errorf("%s: %v", x.name, x.err)
				case !x.withinBudget:
					t.Errorf("%s: summary %d tokens over its budget %d", x.name, x.summaryTokens, x.budget)
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

func TestFindCorpusNamesTheFix(t *testing.T) {
	_, err := findCorpus(filepath.Join(t.TempDir(), "missing"))
	if err == nil || !strings.Contains(err.Error(), "COMPACTORD_CORPUS") {
		t.Errorf("findCorpus of a missing dir = %v; want an error naming COMPACTORD_CORPUS", err)
	}
}
