package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/cputime"
)

// regexp2 is the oracle: tiktoken-go matches the pre-tokenizer patterns with it, and the
// scanners of pretok.go must find the same pieces.

// pretokCase is one encoding's pre-tokenizer: the scanner and the pattern it reproduces.
type pretokCase struct {
	name    string
	piece   pieceFunc
	pattern string
}

var pretokCases = []pretokCase{
	{NameO200k, o200kPiece, o200kPattern},
	{NameCl100k, cl100kPiece, cl100kPattern},
}

// compileOracle compiles pattern as tiktoken-go does, once per pattern.
var compileOracle = sync.OnceValue(func() func(string) *regexp2.Regexp {
	var mu sync.Mutex
	cache := map[string]*regexp2.Regexp{}
	return func(pattern string) *regexp2.Regexp {
		mu.Lock()
		defer mu.Unlock()
		re, ok := cache[pattern]
		if !ok {
			re = regexp2.MustCompile(pattern, regexp2.None)
			cache[pattern] = re
		}
		return re
	}
})

// oraclePieces returns the matches of re in s, with each byte of s that is not part of valid
// UTF-8 read as U+FFFD (as eachPiece and tiktoken-go read it).
func oraclePieces(tb testing.TB, re *regexp2.Regexp, s string) []string {
	tb.Helper()
	if !utf8.ValidString(s) {
		s = replaceInvalidUTF8(s)
	}
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// scannerPieces returns the pieces eachPiece finds in s with the scanner piece.
func scannerPieces(piece pieceFunc, s string) []string {
	var out []string
	(&Encoder{piece: piece}).eachPiece(s, func(p string) { out = append(out, p) })
	return out
}

// checkSamePieces fails t unless the scanner of pc splits s as regexp2 does with its
// pattern, reporting the first differing piece.
func checkSamePieces(t *testing.T, pc pretokCase, name, s string) {
	t.Helper()
	got := scannerPieces(pc.piece, s)
	want := oraclePieces(t, compileOracle()(pc.pattern), s)
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Errorf("%s %s (%d bytes): piece %d: got %q, want %q (regexp2 pieces %q)", pc.name, name, len(s), i,
				got[i:min(i+3, len(got))], want[i:min(i+3, len(want))], want[max(0, i-2):min(i+3, len(want))])
			return
		}
	}
}

// allRunes returns every Unicode code point but the surrogates, which valid UTF-8 cannot
// hold.
func allRunes() []rune {
	rs := make([]rune, 0, utf8.MaxRune+1)
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		rs = append(rs, r)
	}
	return rs
}

// TestPretokClassesMatchRegexp2: for every rune, each character class the scanners test
// agrees with regexp2 compiled for that class alone. regexp2 runs once per class over one
// string of all runes, and reports the runs of runes in the class.
func TestPretokClassesMatchRegexp2(t *testing.T) {
	classIs := func(want runeClass) func(string) bool {
		return func(s string) bool { c, _ := classAt(s, 0); return c&want != 0 }
	}
	tests := []struct {
		class string // a regexp2 character class matching one rune
		in    func(s string) bool
	}{
		{`\p{L}`, classIs(classLetter)},
		{`\p{N}`, classIs(classNumber)},
		{`\s`, classIs(classSpace)},
		{`[\r\n]`, classIs(classNewline)},
		{`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, classIs(classUpper)},
		{`[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, classIs(classLower)},
		{`[^\r\n\p{L}\p{N}]`, func(s string) bool { c, _ := classAt(s, 0); return isPrefix(c) }},
		{`[^\s\p{L}\p{N}]`, func(s string) bool { c, _ := classAt(s, 0); return isOther(c) }},
		// The runes of the case-insensitive contractions, as (?i:…) matches them.
		{`(?i:')`, func(s string) bool { return s[0] == '\'' }},
	}
	for _, c := range "strevmld" {
		tests = append(tests, struct {
			class string
			in    func(s string) bool
		}{fmt.Sprintf("(?i:%c)", c), func(s string) bool { return foldsTo(s, 0, byte(c)) }})
	}
	runes := allRunes()
	text := string(runes)
	for _, tt := range tests {
		re := regexp2.MustCompile(`(?:`+tt.class+`)+`, regexp2.None)
		in := make([]bool, len(runes))
		m, err := re.FindStringMatch(text)
		for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
			for i := m.Index; i < m.Index+m.Length; i++ {
				in[i] = true
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, r := range runes {
			if got := tt.in(string(r)); got != in[i] {
				if bad++; bad <= 5 {
					t.Errorf("%s: U+%04X %q: scanner says %v, regexp2 %v", tt.class, r, r, got, in[i])
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s: %d runes disagree in all", tt.class, bad)
		}
	}
}

// pretokEdgeCases are texts at the edges of the patterns' alternatives, beyond bpeEdgeCases.
func pretokEdgeCases() []struct{ name, text string } {
	var cases []struct{ name, text string }
	add := func(name, text string) { cases = append(cases, struct{ name, text string }{name, text}) }
	for n := 1; n <= 7; n++ {
		d := strings.Repeat("7", n)
		add(fmt.Sprintf("%d digits", n), d)
		add(fmt.Sprintf("%d digits in text", n), "a"+d+"b "+d+" x"+d+".\n"+d)
		add(fmt.Sprintf("%d other digits", n), strings.Repeat("٣", n)+"½"+strings.Repeat("Ⅻ", n))
	}
	for _, c := range []string{"s", "t", "re", "ve", "m", "ll", "d", "x", "r", "l", "v", ""} {
		for _, v := range []string{c, strings.ToUpper(c), strings.ToUpper(c[:min(1, len(c))]) + c[min(1, len(c)):],
			c[:min(1, len(c))] + strings.ToUpper(c[min(1, len(c)):])} {
			for _, before := range []string{"", "a", "A", "AB", "ǅ", "中", "e\u0301", "\u0301", " ", "1", ".", "'"} {
				add("contraction", before+"'"+v+"x "+before+"'"+v+" "+before+"'"+v)
			}
		}
	}
	for _, r := range []string{"ſ", "K", "İ", "ı", "Ⅼ", "ﬅ"} {
		add("fold "+r, "it'"+r+" IT'"+r+"'"+r+"e '"+r+"l")
	}
	for _, ws := range []string{" ", "  ", "\t", "\n", "\r\n", " \n", "\n ", " \r\n ", "\u00a0", "\u3000", "\u2028", "\u0085", "\v\f"} {
		for _, next := range []string{"", "a", "A", "1", ".", "\n", " ", "'s", "\u0301", "中", "/"} {
			add("space", "x"+ws+next+ws+ws+next)
		}
	}
	add("crlf runs", strings.Repeat("\r\n", 5)+"  \r\n\r\n  \r\r\n\n\r x\r\n")
	add("trailing whitespace", "end  \t ")
	add("slashes", "a/b//c/\n/\r\n// x /\n/ /")
	add("mixed scripts", "Hello世界Привет123мир ΑΒΓαβγ ǅǆǄ ʰʱ ᾈᾀ ﬁ Ⅻⅻ 𝐀𝐚 🙂a")
	add("marks", "\u0301\u0301A\u0301a \u0301A \u0301AB\u0301C ÀB\u0300 a\u0903b A\u20dd ʰA ǅA Aǅ")
	add("upper then marks", "ABC\u0301 ABC\u0301DEF ABC\u0301\u0302DEF's AB中CD AʰB")
	add("very long letters", strings.Repeat("A", 5000)+strings.Repeat("b", 5000))
	add("very long marks", "a"+strings.Repeat("\u0301", 3000))
	add("very long spaces", strings.Repeat(" ", 5000)+"x"+strings.Repeat("\t", 5000))
	add("very long other", strings.Repeat(".", 5000)+strings.Repeat("\n", 5000))
	return cases
}

// pretokAlphabet are runes of every class the patterns tell apart; TestPretokMatchesRegexp2
// tries every string of up to three of them.
var pretokAlphabet = []string{"a", "s", "l", "A", "S", "ǅ", "ʰ", "中", "\u0301", "\u0903", "1", "٣", "½",
	" ", "\t", "\r", "\n", "\u00a0", "\u2028", "'", ".", "/", "😀", "\u200d", "\xff"}

// TestPretokMatchesRegexp2: for both encodings, the scanner splits every corpus string, the
// edge cases and every short string over pretokAlphabet as regexp2 does with the pattern.
func TestPretokMatchesRegexp2(t *testing.T) {
	var texts []struct{ name, text string }
	texts = append(texts, bpeEdgeCases()...)
	texts = append(texts, pretokEdgeCases()...)
	var short func(prefix string, n int)
	short = func(prefix string, n int) {
		texts = append(texts, struct{ name, text string }{"short", prefix})
		if n == 0 {
			return
		}
		for _, a := range pretokAlphabet {
			short(prefix+a, n-1)
		}
	}
	short("", 3)
	strs := corpusStrings(t)
	for _, pc := range pretokCases {
		t.Run(pc.name, func(t *testing.T) {
			for _, tc := range texts {
				checkSamePieces(t, pc, tc.name, tc.text)
			}
			for i, s := range strs {
				checkSamePieces(t, pc, fmt.Sprintf("corpus string %d", i), s)
			}
		})
	}
}

// TestEachPieceDoesNotAllocate: pre-tokenizing valid UTF-8 allocates nothing, in any
// script or class of rune.
func TestEachPieceDoesNotAllocate(t *testing.T) {
	s := "Hello, wörld! I'M 12345 日本語 Привет e\u0301 ǅA \t\r\n  \n👍🏽 a/b\n"
	for _, pc := range pretokCases {
		enc := &Encoder{piece: pc.piece}
		n := 0
		if a := testing.AllocsPerRun(100, func() { enc.eachPiece(s, func(string) { n++ }) }); a != 0 {
			t.Errorf("%s: eachPiece allocates %v times", pc.name, a)
		}
	}
}

// FuzzPretokMatchesRegexp2: for any text, both scanners split it as regexp2 does with their
// patterns.
func FuzzPretokMatchesRegexp2(f *testing.F) {
	for _, s := range []string{"", "hello world", "I'M here", " \x850", "👍🏽", "日本語", "\xff\xfe", "e\u0301",
		"  \n\n\t x", "1234567", "----====", "a'LL'd", "\u0301A ", "ABC\u0301DEF", "x  \r\n  y", "a/\n/ b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, pc := range pretokCases {
			checkSamePieces(t, pc, "fuzz input", s)
		}
	})
}

// BenchmarkPretokenizeLargest is the pre-tokenizer alone: every string of the largest corpus
// conversation split into pieces by the o200k_base pre-tokenizer, with no merging.
func BenchmarkPretokenizeLargest(b *testing.B) {
	strs, n := largestStrings(b)
	enc, err := Load(O200k)
	if err != nil {
		b.Fatal(err)
	}
	pieces := 0
	b.SetBytes(n)
	cputime.Loop(b, func() {
		for _, s := range strs {
			enc.eachPiece(s, func(string) { pieces++ })
		}
	})
	if pieces == 0 {
		b.Fatal("no pieces")
	}
}

// largestStrings returns the strings of the largest fixture or corpus conversation
// (fileStrings) and their total size.
func largestStrings(b *testing.B) ([]string, int64) {
	strs := fileStrings(b, corpus.Largest(b))
	var n int64
	for _, s := range strs {
		n += int64(len(s))
	}
	return strs, n
}
