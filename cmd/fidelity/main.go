// Command fidelity measures what compaction keeps of real agent conversations and writes a
// markdown report. For each conversation (*.openai.json, *.anthropic.json) of the corpus it
// lifts the file, compacts it with force and a context window of 60% of its own token count
// (4,000 at least) with the summarizer under test, and measures, with package fidelity's
// rules (the rules the summary check enforces): the share of the summarized range's user
// requests kept verbatim, the share of the paths the agent named that are kept, the
// compression (summary tokens / replaced tokens), whether the summary is within its budget,
// and errors.
//
// Usage:
//
//	fidelity [-corpus DIR] [-summarizer extractive|oneline] [-o FILE]
//
// The corpus defaults to $COMPACTORD_CORPUS, else ../shared/corpus/real beside the module
// root. "oneline" is an OpenAI-compatible summarizer whose model (a local httptest server
// reached through the official SDK) answers one line whatever it is asked: it shows what the
// summary check repairs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	corpusDir := flag.String("corpus", "", "corpus directory (default: $COMPACTORD_CORPUS, else ../shared/corpus/real beside the module root)")
	names := flag.String("summarizer", "extractive,oneline", "comma-separated summarizers to measure: extractive, oneline (a fake LLM answering one line)")
	out := flag.String("o", "", "write the markdown report to this file (default: stdout)")
	flag.Parse()
	if err := run(*corpusDir, strings.Split(*names, ","), *out); err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
}

func run(dir string, summarizers []string, out string) error {
	dir, err := findCorpus(dir)
	if err != nil {
		return err
	}
	files, err := conversations(dir)
	if err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	ctx := context.Background()
	var reports []report
	for _, name := range summarizers {
		r, err := measureAll(ctx, strings.TrimSpace(name), files)
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	writeMarkdown(w, dir, reports)
	for _, r := range reports {
		m := r.means()
		fmt.Fprintf(os.Stderr, "%s: %d conversations, requests %.3f, paths %.3f, errors %d, over budget %d\n",
			r.summarizer, len(r.rows), m.requests, m.paths, m.errors, m.overBudget)
	}
	return nil
}

// findCorpus resolves the corpus directory: dir, $COMPACTORD_CORPUS, or
// ../shared/corpus/real beside the module root.
func findCorpus(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("COMPACTORD_CORPUS")
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(filepath.Dir(d), "shared", "corpus", "real")
				break
			}
			if filepath.Dir(d) == d {
				return "", errors.New("no corpus: pass -corpus DIR or set COMPACTORD_CORPUS")
			}
		}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("no corpus at %s: pass -corpus DIR or set COMPACTORD_CORPUS", dir)
	}
	return dir, nil
}

// conversations lists the corpus conversations in name order.
func conversations(dir string) ([]string, error) {
	var files []string
	for _, pat := range []string{"*.openai.json", "*.anthropic.json"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no conversations (*.openai.json, *.anthropic.json) in %s", dir)
	}
	sort.Strings(files)
	return files, nil
}
