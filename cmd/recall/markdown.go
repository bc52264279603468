package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/service"
)

// minFacts is the number of needed facts from which a conversation is held to the goal of
// not falling more than goalSlack below the better baseline.
const (
	minFacts  = 20
	goalSlack = 0.05
)

// nameRunGoal is the most of a summary's characters that may be in bare name runs (four or
// more names in a row, fidelity.BareNameRuns), on the mean over conversations: a summary says
// what was done with names rather than listing them.
const nameRunGoal = 0.05

// means are a report's figures over its measured conversations.
type means struct {
	n, errors int
	// Of the errors: refused as irreducible (neverCut: because the head and the newest
	// request alone exceed the window) and not compacted (nothing for a summary to pay for).
	irreducible, neverCut, notCompacted int
	recall                              [numMethods]float64
	recoverable                         float64  // compactord's recoverable recall
	notRecoverable                      []string // conversations below 1.00 recoverable recall
	bare                                float64  // bare-name lines over all summary lines
	worstBare                           float64  // the largest share in one summary
	nameRuns, worstRuns                 float64  // characters in bare name runs: the mean share per summary, the largest
	overWindow                          int      // compacted histories above the window they were asked to fit
	overTrigger                         int      // … above the trigger (the next turn compacts again)
	belowBetter                         []string
	byKind                              [fidelity.NumFactKinds][numMethods][2]int // kept, needed
	lost                                map[string]int
	lostKind                            map[string]fidelity.FactKind
	neededFacts                         int
	nothingNeeded                       int // conversations whose history holds nothing the agent uses next
	largeCount                          int
}

func (r report) means() means {
	m := means{lost: map[string]int{}, lostKind: map[string]fidelity.FactKind{}}
	var bare, lines int
	for _, x := range r.rows {
		if x.err != nil {
			m.errors++
			switch is, never := service.Irreducible(x.err); {
			case never:
				m.neverCut++
				m.irreducible++
			case is:
				m.irreducible++
			case x.notCompacted:
				m.notCompacted++
			}
			continue
		}
		if len(x.needed) == 0 {
			// The agent writes nothing of the history again: every method keeps all of
			// nothing, which says nothing of any.
			m.nothingNeeded++
			continue
		}
		m.n++
		for k := range numMethods {
			m.recall[k] += x.recall(k)
		}
		m.recoverable += x.recoverableRecall()
		if x.recoverableRecall() < 1 {
			m.notRecoverable = append(m.notRecoverable, x.name)
		}
		bare += x.bare
		lines += x.lines
		m.nameRuns += x.nameRuns()
		m.worstRuns = max(m.worstRuns, x.nameRuns())
		if x.lines > 0 {
			m.worstBare = max(m.worstBare, float64(x.bare)/float64(x.lines))
		}
		if x.budget > x.window {
			m.overWindow++
		}
		if x.budget > x.trigger {
			m.overTrigger++
		}
		m.neededFacts += len(x.needed)
		for i, f := range x.needed {
			for k := range numMethods {
				m.byKind[f.Kind][k][1]++
				if x.kept[k][i] {
					m.byKind[f.Kind][k][0]++
				}
			}
			if !x.kept[methodCompact][i] {
				m.lost[f.Text]++
				m.lostKind[f.Text] = f.Kind
			}
		}
		if len(x.needed) >= minFacts {
			m.largeCount++
			if better := max(x.recall(methodTruncate), x.recall(methodMask)); x.recall(methodCompact) < better-goalSlack {
				m.belowBetter = append(m.belowBetter, x.name)
			}
		}
	}
	if m.n > 0 {
		for k := range numMethods {
			m.recall[k] /= float64(m.n)
		}
		m.nameRuns /= float64(m.n)
		m.recoverable /= float64(m.n)
	}
	if lines > 0 {
		m.bare = float64(bare) / float64(lines)
	}
	return m
}

func writeMarkdown(w io.Writer, r report) {
	m := r.means()
	fmt.Fprintf(w, "# Continuation recall on %s\n\n", r.corpus)
	corpusFlag := ""
	if r.opt.corpus != "" {
		corpusFlag = " -corpus " + r.opt.corpus
	}
	fmt.Fprintf(w, "Written by `go run ./cmd/recall%s -summarizer %s -split %v -window %v` (`make recall`). ",
		corpusFlag, r.summarizer, r.opt.split, r.opt.window)
	fmt.Fprintf(w, "Each conversation is split at about %.0f%% of its messages, before an assistant message; the history is compacted with force at a context window of %.0f%% of the whole conversation's tokens, and the baselines get the tokens the compacted history has. Recall is the share of the needed facts (identifiers of the history the agent writes again after the split) that each method keeps. See docs/FIDELITY.md.\n\n",
		100*r.opt.split, 100*r.opt.window)

	fmt.Fprintf(w, "## Means over %d conversations\n\n", m.n)
	fmt.Fprintf(w, "| method | recall |\n|---|---|\n")
	for k := range numMethods {
		fmt.Fprintf(w, "| %s | %.3f |\n", methodNames[k], m.recall[k])
	}
	better := max(m.recall[methodTruncate], m.recall[methodMask])
	fmt.Fprintf(w, "| compactord, recoverable (the compacted history or the sources it cites, through Expand) | %.3f |\n", m.recoverable)
	fmt.Fprintf(w, "\n- compactord − the better baseline: %+.3f\n", m.recall[methodCompact]-better)
	fmt.Fprintf(w, "- recoverable recall below 1.00 (goal: none, within the sources' TTL): %d %v\n", len(m.notRecoverable), m.notRecoverable)
	fmt.Fprintf(w, "- conversations with %d or more needed facts: %d; more than %.2f below the better baseline: %d %v\n",
		minFacts, m.largeCount, goalSlack, len(m.belowBetter), m.belowBetter)
	fmt.Fprintf(w, "- summary lines that state only a name: %.1f%% of all (the worst summary: %.1f%%)\n", 100*m.bare, 100*m.worstBare)
	fmt.Fprintf(w, "- summary characters in bare name runs (%d or more names in a row with only separators between): %.1f%% on the mean (the worst summary: %.1f%%; goal ≤ %.0f%%)\n",
		fidelity.MinNameRun, 100*m.nameRuns, 100*m.worstRuns, 100*nameRunGoal)
	fmt.Fprintf(w, "- compacted histories above the window asked for: %d; above the trigger: %d\n", m.overWindow, m.overTrigger)
	fmt.Fprintf(w, "- not measured: %d — refused as irreducible %d (of which %d because the system prompt and the newest request alone exceed the usable window), not compacted %d (nothing before the cut for a summary to pay for), other errors %d, nothing needed %d (the agent writes nothing of the history again)\n\n",
		m.errors+m.nothingNeeded, m.irreducible, m.neverCut, m.notCompacted, m.errors-m.irreducible-m.notCompacted, m.nothingNeeded)

	fmt.Fprintf(w, "## Recall by kind of fact\n\n| kind | needed |")
	for k := range numMethods {
		fmt.Fprintf(w, " %s |", methodNames[k])
	}
	fmt.Fprintf(w, "\n|---|---|---|---|---|\n")
	for kind := range fidelity.NumFactKinds {
		n := m.byKind[kind][methodCompact][1]
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %d |", kind, n)
		for k := range numMethods {
			fmt.Fprintf(w, " %.3f |", float64(m.byKind[kind][k][0])/float64(n))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "\n## Per conversation\n\n| conversation | msgs | split | history | window | compacted | needed | compactord | recoverable | truncation | masking | bare lines | name runs |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.rows {
		if x.err != nil {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | error: %v | %d | | | | | | |\n", x.name, x.msgs, x.split, x.history, x.window, x.err, len(x.needed))
			continue
		}
		share := 0.0
		if x.lines > 0 {
			share = 100 * float64(x.bare) / float64(x.lines)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.0f%% | %.1f%% |\n", x.name, x.msgs, x.split, x.history,
			x.window, x.budget, len(x.needed), x.recall(methodCompact), x.recoverableRecall(), x.recall(methodTruncate), x.recall(methodMask), share, 100*x.nameRuns())
	}

	type lostFact struct {
		text string
		n    int
	}
	var lost []lostFact
	for t, n := range m.lost {
		lost = append(lost, lostFact{t, n})
	}
	sort.Slice(lost, func(i, j int) bool {
		if lost[i].n != lost[j].n {
			return lost[i].n > lost[j].n
		}
		return lost[i].text < lost[j].text
	})
	fmt.Fprintf(w, "\n## Facts compaction lost most often\n\n| fact | kind | conversations |\n|---|---|---|\n")
	for i, l := range lost {
		if i == 25 {
			break
		}
		fmt.Fprintf(w, "| `%s` | %s | %d |\n", l.text, m.lostKind[l.text], l.n)
	}
}
