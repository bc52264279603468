package main

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// region is the messages of a plan with one disposition.
type region struct {
	label       string
	disposition compactorv1.Disposition
}

// regions are the rows of the explain table, in conversation order of their usual place.
var regions = []region{
	{"dropped (covered by an earlier summary)", compactorv1.Disposition_DISPOSITION_DROP},
	{"summarized", compactorv1.Disposition_DISPOSITION_SUMMARIZE},
	{"pruned (kept, tool outputs replaced)", compactorv1.Disposition_DISPOSITION_PRUNE},
	{"requests kept verbatim after the summary", compactorv1.Disposition_DISPOSITION_KEEP_REQUEST},
	{"kept verbatim", compactorv1.Disposition_DISPOSITION_KEEP},
}

// explain renders a plan as a short table: what it decided and why, the window's thresholds,
// then the messages and tokens of each region and the cut.
func explain(p *compactorv1.PlanResponse) []byte {
	var b bytes.Buffer
	action := strings.ToLower(strings.TrimPrefix(p.Action.String(), "ACTION_"))
	fmt.Fprintf(&b, "action  %s\nwhy     %s\n", action, p.Reason)
	fmt.Fprintf(&b, "window  usable %s, acts above %s, aims at %s tokens\n\n",
		thousands(p.UsableTokens), thousands(p.TriggerAtTokens), thousands(p.TargetTokens))

	t := table{{"region", "messages", "indexes", "tokens"}}
	for _, r := range regions {
		var idx []int
		tokens := int64(0)
		for i, d := range p.Dispositions {
			if d != r.disposition {
				continue
			}
			idx = append(idx, i)
			if i < len(p.MessageTokens) {
				tokens += p.MessageTokens[i]
			}
		}
		if len(idx) == 0 {
			continue
		}
		t = append(t, [4]string{r.label, fmt.Sprint(len(idx)), runs(idx), thousands(tokens)})
	}
	if p.PrunedTokens > 0 {
		t = append(t, [4]string{"removed by pruning and cutting", "", "", "-" + thousands(p.PrunedTokens)})
	}
	t = append(t, [4]string{"before", fmt.Sprint(len(p.Dispositions)), "", thousands(p.TokensBefore)},
		[4]string{"after (the summary at its budget)", "", "", thousands(p.TokensAfter)})
	t.write(&b)
	fmt.Fprintf(&b, "\nafter   head %s + summary %s + requests %s + tail %s = %s tokens\n",
		thousands(p.HeadTokens), thousands(p.SummaryTokens), thousands(p.KeptRequestTokens), thousands(p.TailTokens), thousands(p.TokensAfter))
	if p.CutTokens > 0 {
		fmt.Fprintf(&b, "        oversized tool outputs cut to their head and tail: -%s tokens (in the tail)\n", thousands(p.CutTokens))
	}

	if p.CutIndex >= 0 && p.PrefixHash != "" {
		fmt.Fprintf(&b, "\ncut     before message %d (prefix hash %.12s)\n", p.CutIndex, p.PrefixHash)
	}
	if p.SummaryIndex >= 0 {
		fmt.Fprintf(&b, "latest summary at message %d\n", p.SummaryIndex)
	}
	return b.Bytes()
}

// table is the region table: label, messages, indexes and tokens per row, the header first.
type table [][4]string

// minWidths are the table's narrowest columns, so that tables of small and large plans look
// alike; a longer cell widens its column.
var minWidths = [4]int{40, 8, 11, 9}

// write writes the table with every column as wide as its longest cell: the label and the
// indexes left-aligned, the counts right-aligned.
func (t table) write(b *bytes.Buffer) {
	w := minWidths
	for _, row := range t {
		for i, cell := range row {
			w[i] = max(w[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range t {
		fmt.Fprintf(b, "%-*s %*s  %-*s %*s\n", w[0], row[0], w[1], row[1], w[2], row[2], w[3], row[3])
	}
}

// runs writes ascending indexes as their runs, "0, 17-24", so that regions that interleave
// (the head kept before the summarized range, the tail after it) never seem to overlap.
func runs(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	if len(parts) > maxRuns {
		parts = append(parts[:maxRuns-1], "…")
	}
	return strings.Join(parts, ", ")
}

// maxRuns bounds the index runs a row shows; --json has them all.
const maxRuns = 4

// thousands formats n with comma separators: 12,345.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
