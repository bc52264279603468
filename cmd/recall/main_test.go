package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/corpus"
)

// TestRecallOnFixtures runs the measure on the project's fixtures: every conversation is
// compacted and measured against both baselines at the same budget, and the report gives
// the means, the kinds of facts, each conversation and the facts lost most often.
func TestRecallOnFixtures(t *testing.T) {
	dir, err := corpus.FixtureDir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := corpus.List(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures in %s: %v", dir, err)
	}
	o := options{summarizer: "extractive", split: 0.7, window: 0.5}
	rep, err := measureAll(context.Background(), o, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.rows {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		if r.budget <= 0 || r.budget > r.window {
			t.Errorf("%s: compacted to %d tokens, window %d", r.name, r.budget, r.window)
		}
		if len(r.needed) == 0 {
			t.Errorf("%s: no needed facts: the split or the measure is wrong", r.name)
		}
		for k := range numMethods {
			if len(r.kept[k]) != len(r.needed) {
				t.Errorf("%s: %s measured %d of %d facts", r.name, methodNames[k], len(r.kept[k]), len(r.needed))
			}
		}
	}
	m := rep.means()
	if m.n != len(files) || m.bare > 0.1 || m.nameRuns > nameRunGoal {
		t.Errorf("means over %d of %d conversations, bare-name share %.3f, characters in bare name runs %.3f", m.n, len(files), m.bare, m.nameRuns)
	}
	var b bytes.Buffer
	writeMarkdown(&b, rep)
	for _, want := range []string{"## Means over", "| compactord |", "| truncation |", "| observation masking |",
		"## Recall by kind of fact", "## Per conversation", "## Facts compaction lost most often", "make recall", "bare name runs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
