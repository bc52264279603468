package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// TestExplainTableAligned: the region table keeps its columns aligned whatever the length of
// its cells: a long index list (many runs, five-digit indexes) and large token counts widen
// their columns for every row.
func TestExplainTableAligned(t *testing.T) {
	const n = 40000
	p := &compactorv1.PlanResponse{Action: compactorv1.Action_ACTION_SUMMARIZE, Reason: "test", CutIndex: -1, SummaryIndex: -1,
		TokensBefore: 123456789012, TokensAfter: 1234, PrunedTokens: 98765432}
	for i := range n {
		d := compactorv1.Disposition_DISPOSITION_SUMMARIZE
		switch {
		case i < 3 || i >= n-5:
			d = compactorv1.Disposition_DISPOSITION_KEEP
		case i%1000 == 7: // a request kept here and there: the summarized range breaks into runs
			d = compactorv1.Disposition_DISPOSITION_KEEP_REQUEST
		}
		p.Dispositions = append(p.Dispositions, d)
		p.MessageTokens = append(p.MessageTokens, 3000000)
	}
	lines := strings.Split(string(explain(p)), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "region ") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no table:\n%s", strings.Join(lines, "\n"))
	}
	header := lines[start]
	indexes := strings.Index(header, "indexes")
	var rows int
	for _, row := range lines[start+1:] {
		if row == "" {
			break
		}
		rows++
		if utf8.RuneCountInString(row) != utf8.RuneCountInString(header) {
			t.Errorf("row %q is %d columns wide, the header %d: the counts are not aligned", row, utf8.RuneCountInString(row), utf8.RuneCountInString(header))
		}
		// A region's indexes start under the header's, after a space; the other rows have none.
		runes := []rune(row)
		hasIndexes := !strings.HasPrefix(row, "before") && !strings.HasPrefix(row, "after") && !strings.HasPrefix(row, "removed")
		if runes[indexes-1] != ' ' || (runes[indexes] != ' ') != hasIndexes {
			t.Errorf("row %q: its indexes do not start under the header's", row)
		}
	}
	if rows < 5 {
		t.Fatalf("%d rows:\n%s", rows, strings.Join(lines, "\n"))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "39995-39999") || !strings.Contains(strings.Join(lines, "\n"), "…") {
		t.Errorf("the table does not show the long index lists, abbreviated:\n%s", strings.Join(lines, "\n"))
	}
}
