package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// splitAlphabet is the runes whose runs the pre-tokenizers' pieces are made of, the ones
// around a split point above all: line breaks, spaces, slashes, punctuation, letters of both
// cases, digits, a contraction's apostrophe, a no-break space and a non-ASCII letter.
var splitAlphabet = []string{"\n", "\n", "\r", " ", " ", "\t", "/", "+", "-", ";", "a", "Z", "7", "'", "s", "\u00a0", "é", "\xff"}

// checkSplits checks SplitsAt's promise on s at every split point it reports, with a and b
// drawn within span bytes around it.
func checkSplits(t *testing.T, tx Text, name, s string, span int, r *rand.Rand) {
	t.Helper()
	for i := 1; i < len(s); i++ {
		if !tx.SplitsAt(s, i) {
			continue
		}
		for range 3 {
			a, b := i-1-r.IntN(min(i, span)), i+1+r.IntN(min(len(s)-i, span))
			if whole, parts := tx.Count(s[a:b]), tx.Count(s[a:i])+tx.Count(s[i:b]); whole != parts {
				t.Fatalf("%s: split at %d of [%d:%d] %q: %d tokens whole, %d in two", name, i, a, b, s[max(a, i-20):min(b, i+20)], whole, parts)
			}
		}
	}
}

func TestSplitsAtAddsUp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, id := range []ID{O200k, Cl100k} {
		tx, err := New(id)
		if err != nil {
			t.Fatal(err)
		}
		for range 5000 {
			var sb strings.Builder
			for range 4 + r.IntN(40) {
				sb.WriteString(splitAlphabet[r.IntN(len(splitAlphabet))])
			}
			checkSplits(t, tx, id.String(), sb.String(), 64, r)
		}
		for _, s := range corpusStrings(t) {
			checkSplits(t, tx, id.String()+" corpus", s, 300, r)
		}
	}
}

func TestSplitsAt(t *testing.T) {
	o, err := New(O200k)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    string
		i    int
		want bool
	}{
		{"a\n+b", 2, true},
		{"a\nb", 2, true},
		{"a\n b", 2, false},  // the whitespace run goes on
		{"a\n\nb", 2, false}, // so do the line breaks
		{"a;\n/b", 3, false}, // punctuation takes the slash after its line break
		{"a\n\u00e9", 2, false},
		{"ab", 1, false},
		{"a\n", 2, false}, // at the end: nothing to split
		{"\na", 0, false},
	} {
		if got := o.SplitsAt(c.s, c.i); got != c.want {
			t.Errorf("SplitsAt(%q, %d) = %v, want %v", c.s, c.i, got, c.want)
		}
	}
	if (Text{}).SplitsAt("a\nb", 2) {
		t.Error("approx splits, but its count is not a sum")
	}
}
