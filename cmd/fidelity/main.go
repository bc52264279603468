// Command fidelity measures what compaction keeps of real agent conversations and writes a
// markdown report. For each conversation (*.openai.json, *.anthropic.json) of the corpus it
// lifts the file, compacts it with force and a context window of 60% and 30% of its own token
// count (-window; 4,000 at least) with the summarizer under test, and measures, with package fidelity's
// rules (the rules the summary check enforces): the share of the summarized range's user
// requests kept verbatim, the share of the paths the agent named that are kept, the
// compression (summary tokens / replaced tokens), whether the summary is within its budget,
// and errors.
//
// Usage:
//
//	fidelity [-corpus DIR] [-summarizer extractive|oneline] [-window 0.6,0.3] [-o FILE]
//
// The corpus defaults to the real conversations copied into the repository
// (internal/corpus/testdata/real), or $COMPACTORD_CORPUS. "oneline" is an OpenAI-compatible
// summarizer whose model (a local httptest server reached through the official SDK) answers
// one line whatever it is asked: it shows what the summary check repairs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/measure"
)

func main() {
	corpusDir := flag.String("corpus", "", "corpus directory (default: the real corpus, internal/corpus/testdata/real, or $COMPACTORD_CORPUS)")
	names := flag.String("summarizer", "extractive,oneline", "comma-separated summarizers to measure: extractive, oneline (a fake LLM answering one line)")
	out := flag.String("o", "", "write the markdown report to this file (default: stdout)")
	windows := flag.String("window", "0.6,0.3", "comma-separated context windows to compact to, as shares of each conversation's tokens (4,000 at least)")
	flag.Parse()
	shares, err := measure.Shares("window", *windows)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(2)
	}
	if err := run(*corpusDir, strings.Split(*names, ","), shares, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
}

func run(dir string, summarizers []string, shares []float64, out string) error {
	if dir == "" {
		var err error
		if dir, err = corpus.Locate(); err != nil {
			return err
		}
	}
	list, err := corpus.List(dir)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("no conversations (*.openai.json, *.anthropic.json) in %s", dir)
	}
	files := make([]string, len(list))
	for i, f := range list {
		files[i] = f.Path
	}
	w, err := measure.Output(out)
	if err != nil {
		return err
	}
	defer w.Close()
	ctx := context.Background()
	var reports []report
	for _, share := range shares {
		for _, name := range summarizers {
			r, err := measureAll(ctx, strings.TrimSpace(name), files, share)
			if err != nil {
				return err
			}
			reports = append(reports, r)
		}
	}
	writeMarkdown(w, dir, reports)
	for _, r := range reports {
		m := r.means()
		fmt.Fprintf(os.Stderr, "%s at %.0f%%: %d conversations, requests %.3f, paths %.3f, errors %d (irreducible %d, of which the head and newest request alone %d), over budget %d\n",
			r.summarizer, 100*r.share, len(r.rows), m.requests, m.paths, m.errors, m.irreducible, m.neverCut, m.overBudget)
	}
	return nil
}
