package fidelity

import (
	"strings"

	"github.com/compactord/compactord/engine"
)

// A bare name run is what a summary lists instead of saying: four or more names (words that
// are facts, see Facts) in a row on one line, with nothing between them but commas,
// semicolons, slashes and white space ("saw a.py, b.py, c_d, E1234"). A summary that tells
// the next turn what was done with each name has few; a dump of identifiers is all runs.
// Citations (engine.ParseCitations) are neither names nor separators.

// MinNameRun is the number of names in a row that makes a bare name run.
const MinNameRun = 4

// BareNameRuns returns the bytes of summary inside bare name runs (from the first name of
// each run to the end of its last) and the bytes of summary.
func BareNameRuns(summary string) (inRuns, total int) {
	for _, line := range strings.Split(summary, "\n") {
		inRuns += lineNameRuns(engine.WithoutCitations(line))
	}
	return inRuns, len(summary)
}

// lineNameRuns is the bytes of one line inside bare name runs.
func lineNameRuns(line string) int {
	out := 0
	n, start, end := 0, 0, 0 // the current run: names, where it starts and ends
	flush := func() {
		if n >= MinNameRun {
			out += end - start
		}
		n = 0
	}
	for i := 0; i < len(line); {
		if strings.IndexByte(" \t,;", line[i]) >= 0 {
			i++
			continue
		}
		j := i
		for j < len(line) && strings.IndexByte(" \t,;", line[j]) < 0 {
			j++
		}
		w := strings.Trim(line[i:j], "`'\"()[]{}.:")
		if line[i:j] == "/" {
			i = j // " / " joins the lines of an excerpt
			continue
		}
		if f := Facts(w); len(f) == 1 && f[0].Text == w {
			if n == 0 {
				start = i
			}
			n++
			end = j
		} else {
			flush()
		}
		i = j
	}
	flush()
	return out
}
