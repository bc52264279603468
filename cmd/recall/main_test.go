package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/compactord/compactord/fidelity"
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
		// Recoverable: what the compacted history keeps, and more from the sources it cites.
		for i, kept := range r.kept[methodCompact] {
			if kept && !r.recoverable[i] {
				t.Errorf("%s: %s is in the compacted history but not recoverable", r.name, r.needed[i].Text)
			}
		}
	}
	// A compaction whose summary names its source keeps every fact of the history
	// recoverable: the source is the whole history. At half the tokens the fixtures' summary
	// rooms are too small for the marker; at 90% some take it.
	o.window = 0.9
	wide, err := measureAll(context.Background(), o, files)
	if err != nil {
		t.Fatal(err)
	}
	citing := 0
	for _, r := range wide.rows {
		if r.err != nil {
			t.Errorf("%s at a window of 90%%: %v", r.name, r.err)
		}
		if !r.citing {
			continue
		}
		citing++
		if got := r.recoverableRecall(); got != 1 {
			t.Errorf("%s: recoverable recall %.3f with the source cited, want 1.00", r.name, got)
		}
	}
	if citing == 0 {
		t.Error("no fixture's compaction cites its source at a window of 90%: the recoverable measure reads none")
	}
	m := rep.means()
	if m.n != len(files) || m.bare > 0.1 || m.nameRuns > nameRunGoal {
		t.Errorf("means over %d of %d conversations, bare-name share %.3f, characters in bare name runs %.3f", m.n, len(files), m.bare, m.nameRuns)
	}
	var b bytes.Buffer
	writeMarkdown(&b, rep)
	for _, want := range []string{"## Means over", "| compactord |", "| truncation |", "| observation masking |",
		"## Recall by kind of fact", "## Per conversation", "## Facts compaction lost most often", "make recall", "bare name runs",
		"| compactord, recoverable (the compacted history or the sources it cites, through Expand) |", "recoverable recall below 1.00"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestMeansLeaveOutNothingNeeded: a conversation whose history holds nothing the agent uses
// next is not measured (every method would keep all of nothing), and counted as such.
func TestMeansLeaveOutNothingNeeded(t *testing.T) {
	half := row{name: "half", needed: []fidelity.Fact{{Text: "a.go"}, {Text: "b.go"}}}
	for k := range numMethods {
		half.kept[k] = []bool{true, false}
	}
	half.recoverable = []bool{true, true}
	m := report{rows: []row{half, {name: "nothing"}}}.means()
	if m.n != 1 || m.nothingNeeded != 1 || m.recall[methodCompact] != 0.5 {
		t.Errorf("n %d, nothing needed %d, recall %.3f; want 1, 1, 0.500", m.n, m.nothingNeeded, m.recall[methodCompact])
	}
}
