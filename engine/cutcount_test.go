package engine

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/compactord/compactord/engine/tokenizer"
)

// TestTextCountsAreTheTokenizers holds textCounts to the tokenizer: every prefix and suffix
// it counts, in any order and again, is what Count gives the same bytes, under each
// tokenizer (approx, whose count is not a sum, in one chunk).
func TestTextCountsAreTheTokenizers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var sb strings.Builder
	lines := []string{"+\tx := f(y)", "-// old", " context", "@@ -1,3 +1,4 @@", "diff --git a/x b/x", "", "  indented", "/path/at/start", "héllo wörld", "12345"}
	for sb.Len() < 40_000 {
		sb.WriteString(lines[r.IntN(len(lines))])
		sb.WriteByte('\n')
	}
	text := sb.String()
	for _, id := range []tokenizer.ID{tokenizer.O200k, tokenizer.Cl100k, tokenizer.Approx} {
		tc, err := tokenizer.New(id)
		if err != nil {
			t.Fatal(err)
		}
		c := newTextCounts(text, tc)
		if id != tokenizer.Approx && len(c.starts) < 5 {
			t.Fatalf("%v: %d chunks of %d bytes: the test needs several", id, len(c.starts), len(text))
		}
		for range 200 {
			i := r.IntN(len(text) + 1)
			if r.IntN(10) == 0 && len(c.starts) > 1 { // at a chunk's start exactly
				i = c.starts[r.IntN(len(c.starts))]
			}
			if got, want := c.prefix(i, tc), tc.Count(text[:i]); got != want {
				t.Fatalf("%v: prefix(%d) = %d, Count = %d", id, i, got, want)
			}
			if got, want := c.suffix(i, tc), tc.Count(text[i:]); got != want {
				t.Fatalf("%v: suffix(%d) = %d, Count = %d", id, i, got, want)
			}
		}
	}
}
