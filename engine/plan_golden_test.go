package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
)

// updateGolden reports whether -update was given (the flag is shared by the package's golden
// tests).
func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestPlanCorpusGolden records every real corpus plan (action, cut, totals, reason, or the
// irreducible error) at four windows in testdata/plan/corpus.golden, so that a change in
// counting or planning shows up as a reviewed diff. Run with -update to accept a change.
func TestPlanCorpusGolden(t *testing.T) {
	checkPlanGolden(t, corpus.Real(t), 0, []int64{8000, 32000, 128000, 200000}, filepath.Join("testdata", "plan", "corpus.golden"))
}

// TestPlanFixturesGolden is TestPlanCorpusGolden on the project's own fixtures, which every
// checkout has, at windows and a summary budget small enough for them to prune and summarize.
func TestPlanFixturesGolden(t *testing.T) {
	var fixtures []corpus.File
	for _, f := range corpus.Files(t) {
		if strings.HasPrefix(f.Name, "fixture-") {
			fixtures = append(fixtures, f)
		}
	}
	checkPlanGolden(t, fixtures, 300, []int64{1000, 1400, 1800, 2400}, filepath.Join("testdata", "plan", "fixtures.golden"))
}

// checkPlanGolden compares the plans of files at each window (and summaryMax, zero for the
// default) with the golden file at path.
func checkPlanGolden(t *testing.T, files []corpus.File, summaryMax int64, windows []int64, path string) {
	t.Helper()
	c := NewCounter(0)
	var b strings.Builder
	for _, f := range files {
		msgs := readCorpusFile(t, f)
		for _, w := range windows {
			fmt.Fprintf(&b, "%s @%d: ", f.Name, w)
			r, err := Plan(msgs, &compactorv1.Policy{ContextWindow: w, SummaryMaxTokens: summaryMax}, c)
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&b, "%v cut=%d tokens %d→%d pruned %d | %s\n", r.Action, r.CutIndex, r.TokensBefore, r.TokensAfter, r.PrunedTokens, r.Reason)
		}
	}
	if updateGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s line %d differs (run with -update after checking the change):\n got: %s\nwant: %s", path, i+1, g, w)
				break
			}
		}
	}
}
