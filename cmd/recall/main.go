// Command recall measures continuation recall: how much of what an agent uses next a
// compacted conversation still holds, against two baselines given the same token budget.
//
// For each conversation of the corpus (*.openai.json, *.anthropic.json) it splits the
// messages at about 70% (-split), just before an assistant message; the history before the
// split is compacted by compactord (force, a context window of 50% of the whole
// conversation's tokens (-window), the summarizer under test), and cut to the same number of tokens, counted by the
// same tokenizer, by two baselines: truncation (the head, the first user message and the
// newest messages that fit) and observation masking (the oldest tool outputs replaced by a
// placeholder until it fits; arXiv 2508.21433). The needed facts are the identifiers (paths
// and file names, dotted, snake_case and CamelCase names, ids mixing letters and digits,
// numbers of three digits or more, short quoted strings; see fidelity.Facts) that occur in
// the history and again in what the agent itself wrote after the split (its text and its
// tool calls' arguments). Recall is the share of needed facts the compacted history shows.
//
// The report gives, per conversation, the recall of each method, the tokens, and the share
// of the summary's lines that state nothing but a name, and the share of its characters in
// bare name runs (four or more names in a row, fidelity.BareNameRuns; goal at most 5% on the
// mean); then the means, recall by kind of
// fact, and the facts compaction lost most often.
//
// Usage:
//
//	recall [-corpus DIR] [-summarizer extractive] [-split 0.7] [-window 0.5] [-o FILE]
//
// The corpus defaults to the project's own: the fixtures written for compactord and the real
// conversations copied into the repository (internal/corpus/testdata and its real/).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/compactord/compactord/internal/measure"
)

func main() {
	var o options
	flag.StringVar(&o.corpus, "corpus", "", "corpus directory (default: the project's corpus, the fixtures and real conversations under internal/corpus/testdata)")
	flag.StringVar(&o.summarizer, "summarizer", "extractive", "summarizer under test: extractive, or oneline (a fake LLM answering one line)")
	flag.Float64Var(&o.split, "split", 0.7, "where to split each conversation, as a share of its messages")
	flag.Float64Var(&o.window, "window", 0.5, "the context window of the compaction, as a share of the whole conversation's tokens")
	out := flag.String("o", "", "write the markdown report to this file (default: stdout)")
	flag.Parse()
	if err := run(context.Background(), o, *out); err != nil {
		fmt.Fprintln(os.Stderr, "recall:", err)
		os.Exit(1)
	}
}

type options struct {
	corpus, summarizer string
	split, window      float64
}

func run(ctx context.Context, o options, out string) error {
	if !(o.split > 0 && o.split < 1) || !(o.window > 0 && o.window <= 1) {
		return errors.New("-split must be in (0, 1) and -window in (0, 1]")
	}
	files, name, err := measure.Conversations(o.corpus)
	if err != nil {
		return err
	}
	rep, err := measureAll(ctx, o, files)
	if err != nil {
		return err
	}
	rep.corpus = name
	w, err := measure.Output(out)
	if err != nil {
		return err
	}
	defer w.Close()
	writeMarkdown(w, rep)
	m := rep.means()
	fmt.Fprintf(os.Stderr, "recall over %d conversations (%s): compactord %.3f, truncation %.3f, masking %.3f; bare-name lines %.1f%% (worst %.1f%%); characters in bare name runs %.1f%% (worst %.1f%%); not measured %d\n",
		m.n, rep.corpus, m.recall[methodCompact], m.recall[methodTruncate], m.recall[methodMask], 100*m.bare, 100*m.worstBare, 100*m.nameRuns, 100*m.worstRuns, m.errors+m.nothingNeeded)
	return nil
}
