package fidelity

import (
	"strings"
	"testing"
)

// A cut summary keeps whole lines when it has lines: no heading or fact is left half
// written; a text of one line is cut within it.
func TestCutKeepsWholeLines(t *testing.T) {
	lines := []string{"## Where it stopped", "- last intent: bind the lowercase String first [m8]",
		"## Files (what was done to each)", "- /tmp/t.txt: written [m11]", "- /home/dev/src/main.rs: read, edited ×4 [m3–14]",
		"## Next", "- run the tests again [m14]"}
	s := strings.Join(lines, "\n")
	whole := map[string]bool{CutMarker: true}
	for _, l := range lines {
		whole[l] = true
	}
	for n := len(s) - 1; n > 0; n -= 7 {
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
	one := strings.Repeat("héllo wörld ", 40)
	if got := cut(one, 100); !strings.Contains(got, CutMarker) || len(got) > 100+len(CutMarker)+2 || !strings.HasPrefix(one, strings.Split(got, "\n")[0]) {
		t.Errorf("one line cut to %q", got)
	}
}
