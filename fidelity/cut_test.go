package fidelity

import (
	"strings"
	"testing"
)

// A cut summary keeps whole lines when they keep at least half of what it may: no heading or
// fact is left half written, while a summary of a few long lines keeps the head and tail of
// them rather than losing most of its text.
func TestCutKeepsWholeLines(t *testing.T) {
	lines := []string{"## Where it stopped", "- last intent: bind the lowercase String first [m8]",
		"## Files (what was done to each)", "- /tmp/t.txt: written [m11]", "- /home/dev/src/main.rs: read, edited ×4 [m3–14]",
		"## Next", "- run the tests again [m14]"}
	s := strings.Join(lines, "\n")
	longest := 0
	whole := map[string]bool{CutMarker: true}
	for _, l := range lines {
		whole[l] = true
		longest = max(longest, len(l)+1)
	}
	for n := len(s) - 1; n >= 4*longest; n -= 7 {
		got := cut(s, n)
		if !strings.Contains(got, CutMarker) {
			t.Fatalf("n=%d: no marker in %q", n, got)
		}
		if len(got) > n+len(CutMarker)+2 {
			t.Errorf("n=%d: %d bytes, more than asked: %q", n, len(got), got)
		}
		for _, l := range strings.Split(strings.TrimRight(got, "\n"), "\n") {
			if !whole[l] {
				t.Errorf("n=%d: %q is not a line of the summary: %q", n, l, got)
			}
		}
	}
	for _, tc := range []struct {
		name string
		s    string
	}{
		{"one line", strings.Repeat("héllo wörld ", 40)},
		{"a long line", "## Where it stopped\n" + strings.Repeat("the parser now handles nested quotes and its tests pass; ", 30) + "\n- next: run the linter [m14]"},
	} {
		for _, n := range []int{100, 500, len(tc.s) * 9 / 10} {
			got := cut(tc.s, n)
			kept := len(got) - len(CutMarker) - 2
			if !strings.Contains(got, CutMarker) || kept > n || kept < n/2 {
				t.Errorf("%s cut to %d bytes keeps %d: %q", tc.name, n, kept, got)
			}
		}
	}
	for n := range 40 { // no index out of range on short budgets and all-newline texts
		cut(strings.Repeat("\n", 30), n)
		cut("a\nb", n%3)
	}
}
