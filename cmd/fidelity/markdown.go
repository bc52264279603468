package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/compactord/compactord/service"
)

// means are a report's figures over its conversations.
type means struct {
	requests, paths, compression                float64
	errors, overBudget, notCompacted, compacted int
	// irreducible counts the errors that are FAILED_PRECONDITION CONTEXT_IRREDUCIBLE; neverCut
	// those of them whose floor is what no compaction cuts (the head and the newest request).
	irreducible, neverCut int
	// unholdable counts the compactions whose summary budget cannot hold the requests and
	// paths it must (see row.holdable): left out of the means, listed with their numbers.
	unholdable int
}

func (r report) means() means {
	var m means
	var nComp int
	for _, x := range r.rows {
		if x.err != nil {
			m.errors++
			if is, never := service.Irreducible(x.err); is {
				m.irreducible++
				if never {
					m.neverCut++
				}
			}
			continue
		}
		if x.compacted && !x.holdable() {
			m.unholdable++
			continue
		}
		m.requests += x.fid.Requests
		m.paths += x.fid.Paths
		if !x.withinBudget {
			m.overBudget++
		}
		if !x.compacted {
			m.notCompacted++
			continue
		}
		m.compacted++
		if x.replacedTokens > 0 {
			m.compression += float64(x.summaryTokens) / float64(x.replacedTokens)
			nComp++
		}
	}
	if n := len(r.rows) - m.errors - m.unholdable; n > 0 {
		m.requests /= float64(n)
		m.paths /= float64(n)
	}
	if nComp > 0 {
		m.compression /= float64(nComp)
	}
	return m
}

// writeMarkdown writes the reports: the means first, then one table per summarizer.
func writeMarkdown(w io.Writer, dir string, reports []report) {
	fmt.Fprintf(w, "## Fidelity of forced compaction\n\n")
	// The directory's name only: a path on the measuring machine means nothing to a reader.
	fmt.Fprintf(w, "Corpus: the directory `%s` (`-corpus`; default the real conversations in internal/corpus/testdata/real, or `$COMPACTORD_CORPUS`). Method: issue 16 (Lift; Compact with force, context window 60%% and 30%% of the conversation's tokens (`-window`), 4,000 at least; requests = share of each request's lines of 15+ characters found verbatim, whitespace-normalised, mean over requests then files; paths = share of agent-named `dir/…/name.ext` paths found; compression = summary tokens / replaced tokens). A conversation not compacted (the range could not pay for a summary) counts 1.0 and is listed with its reason; one whose summary budget cannot hold the requests and paths it must (the window leaves too little beside the head) is left out of the means and listed with its numbers.\n\n", filepath.Base(dir))
	fmt.Fprintf(w, "An error is counted as irreducible when Compact answered FAILED_PRECONDITION (CONTEXT_IRREDUCIBLE), and as *never cut* when what no compaction cuts, the head (system prompt) and the user's newest request, alone exceeds the usable window.\n\n")
	fmt.Fprintf(w, "| window | summarizer | conversations | compacted | requests | paths | compression | over budget | errors | irreducible | of which never cut |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reports {
		m := r.means()
		fmt.Fprintf(w, "| %.0f%% | %s | %d | %d | %.3f | %.3f | %.3f | %d | %d | %d | %d |\n", 100*r.share, r.summarizer, len(r.rows), m.compacted, m.requests, m.paths, m.compression, m.overBudget, m.errors, m.irreducible, m.neverCut)
	}
	for _, r := range reports {
		fmt.Fprintf(w, "\n### %s at %.0f%%\n\n", r.summarizer, 100*r.share)
		fmt.Fprintf(w, "| conversation | tokens | window | requests (n) | paths (n) | summary / replaced tokens | budget | appended by check | note |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.rows {
			note := ""
			switch {
			case x.err != nil:
				note = "ERROR: " + x.err.Error()
			case !x.compacted:
				note = "not compacted: " + x.reason
			case !x.withinBudget:
				note = "OVER BUDGET"
			case !x.holdable():
				note = fmt.Sprintf("not in the means: the requests and paths the summary must hold are %d tokens, its budget %d", x.mustHold, x.budget)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %.3f (%d) | %.3f (%d) | %d / %d | %d | %d | %s |\n", x.name, x.tokens, x.window,
				x.fid.Requests, x.fid.NumRequests, x.fid.Paths, x.fid.NumPaths, x.summaryTokens, x.replacedTokens, x.budget, x.appended, note)
		}
	}
}
