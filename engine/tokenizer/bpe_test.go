package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/compactord/compactord/internal/corpus"
)

// tiktoken-go is the oracle: the encoder compactord used before bpe.go, whose ids bpe must
// reproduce exactly.
var oracles [2]struct {
	once sync.Once
	enc  *tiktoken.Tiktoken
	err  error
}

func oracle(tb testing.TB, id ID) *tiktoken.Tiktoken {
	tb.Helper()
	o := &oracles[id]
	o.once.Do(func() {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		o.enc, o.err = tiktoken.GetEncoding(id.String())
	})
	if o.err != nil {
		tb.Fatal(o.err)
	}
	return o.enc
}

func testEncoder(tb testing.TB, id ID) *Encoder {
	tb.Helper()
	enc, err := Load(id)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

var bpeTokenizers = []ID{O200k, Cl100k}

func tokName(id ID) string { return id.String() }

// checkSameIDs fails t unless bpe's encode and count of s agree with tiktoken-go's
// EncodeOrdinary, reporting the first mismatch by token index and byte offset.
func checkSameIDs(t *testing.T, id ID, name, s string) {
	t.Helper()
	ref := oracle(t, id)
	enc := testEncoder(t, id)
	want := ref.EncodeOrdinary(s)
	got := enc.Encode(s)
	if i := firstMismatch(got, want); i >= 0 {
		// The byte offset in the text tiktoken-go tokenized (invalid UTF-8 read as U+FFFD).
		off := len(ref.Decode(want[:min(i, len(want))]))
		text := s
		if !utf8.ValidString(s) {
			text = string([]rune(s))
		}
		t.Errorf("%s (%d bytes): first mismatch at token %d (byte %d, near %q): got %v…, want %v…",
			name, len(s), i, off, text[off:min(off+24, len(text))], got[i:min(i+6, len(got))], want[i:min(i+6, len(want))])
		return
	}
	if n := enc.Count(s); n != len(want) {
		t.Errorf("%s (%d bytes): count = %d, want %d", name, len(s), n, len(want))
	}
}

// firstMismatch returns the index of the first difference of a and b, or -1.
func firstMismatch(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// bpeEdgeCases are texts at the edges of the pre-tokenizer, the merge and UTF-8 handling.
func bpeEdgeCases() []struct{ name, text string } {
	cases := []struct{ name, text string }{
		{"empty", ""},
		{"invalid lone continuation", "\x80"},
		{"invalid pair", "\xff\xfe"},
		{"truncated two-byte", "\xc3"},
		{"bad second byte", "\xc3\x28"},
		{"truncated three-byte", "\xe2\x82"},
		{"truncated emoji", "\xf0\x9f\x98"},
		{"surrogate", "\xed\xa0\x80"},
		{"overlong slash", "\xc0\xaf"},
		{"above U+10FFFF", "\xf4\x90\x80\x80"},
		{"invalid inside words", "abc\x80def ghi\xffjkl"},
		{"invalid between spaces", "  \xff  \xfe\n"},
		{"invalid after space", " \x85\x850"},
		{"literal U+FFFD", "\uFFFD \uFFFD\uFFFD"},
		{"literal and invalid", "\uFFFD\xff\uFFFD"},
		{"spaces", strings.Repeat(" ", 1000)},
		{"spaces then word", strings.Repeat(" ", 300) + "word"},
		{"newlines", strings.Repeat("\n", 1000)},
		{"space newline", strings.Repeat(" \n", 500)},
		{"crlf", strings.Repeat("\r\n", 200) + "x"},
		{"tabs", strings.Repeat("\t", 200) + "x\t\t"},
		{"mixed whitespace", "a \t\n\r\v\f\u00a0\u2003\u3000b  \n\n  c"},
		{"digits", "1234567890"},
		{"long digits", strings.Repeat("9876543210", 20)},
		{"numbers", "3.14159 1,000,000 -42 0x1F 1e-9 ٣٤٥ ５６"},
		{"contractions lower", "I'm you're they'll we've she'd it's don't"},
		{"contractions upper", "I'M YOU'RE THEY'LL WE'VE SHE'D IT'S DON'T"},
		{"contractions mixed", "'s'S'T're'RE'Ve'm'LL'd 'x '"},
		{"apostrophes", "'''' ’s rock'n'roll"},
		{"cjk", "日本語のテキストです。中文字符测试，한국어 텍스트"},
		{"emoji", "👍 👍🏽 👨‍👩‍👧‍👦 🇺🇸🇯🇵 ❤️ 🫠"},
		{"combining", "e\u0301 a\u0300\u0301\u0302 \u0301 \u0301\u0301x Zalgo: Z\u0351\u036b\u0343a\u0352l\u0350g\u0310o"},
		{"scripts", "नमस्ते Привет мир مرحبا שלום Γειά σου ไทย"},
		{"title case", "ǅemal ǈubljana ᾈ"},
		{"special tokens", "<|endoftext|> <|endofprompt|><|fim_prefix|><|fim_middle|><|fim_suffix|>"},
		{"dashes", strings.Repeat("-", 300)},
		{"equals", strings.Repeat("=", 80) + "\n" + strings.Repeat("=", 80)},
		{"punctuation run", strings.Repeat("!?.,;:()[]{}<>/\\|@#$%^&*~`", 12)},
		{"slashes and newlines", "path/to/file///\n\n\r\n/x"},
		{"json", `{"a":[1,2,3],"b":{"c":"d\n\"e\""},"f":null,"g":true}`},
		{"code", "func main() {\n\tfmt.Println(\"hello, world\")\n}\n"},
		{"base64", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="},
		{"long word", strings.Repeat("abcdefghij", 300)},
		{"long mixed-case word", strings.Repeat("aBcDeFgHiJ", 300)},
		{"long cjk", strings.Repeat("漢字仮名交じり文", 100)},
		{"long emoji", strings.Repeat("🙂", 200)},
		{"long invalid", strings.Repeat("\xff", 200)},
	}
	for c := 0; c < 256; c++ {
		cases = append(cases, struct{ name, text string }{fmt.Sprintf("byte %#02x", c), string([]byte{byte(c)})})
	}
	return append(cases, struct{ name, text string }{"100 KB random-ish", randomText(100 << 10)})
}

// randomText returns n bytes of text mixing words, numbers, punctuation, whitespace runs,
// other scripts, emoji, combining marks and invalid bytes, the same on every run.
func randomText(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	atoms := []string{
		"the", "The", "THE", " of", " and", "ing", "tion", "'s", "'LL", " don't",
		"0", "12", "345", "6789", ".", ",", "!", "?", "...", "--", "/", "\\", "{", "}", `"`, "'",
		" ", "  ", "\t", "\n", "\n\n", "\r\n", "   \n", "\u00a0",
		"日本", "語", "中文", "한국", "Ж", "ß", "é", "e\u0301", "\u0301", "ǅ", "ﬁ",
		"👍", "🏽", "\u200d", "🇺", "\uFFFD", "\xff", "\x80", "\xc3", "\xe2\x82", "\x00", "\x7f",
		"<|endoftext|>",
	}
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(atoms[r.IntN(len(atoms))])
	}
	return sb.String()
}

// corpusStrings returns the strings of every fixture and corpus conversation (fileStrings).
func corpusStrings(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, f := range corpus.Files(tb) {
		out = append(out, fileStrings(tb, f)...)
	}
	return out
}

// fileStrings returns every string of a conversation's JSON body, and the JSON text of every
// tool input object (what a tool call's input_json holds).
func fileStrings(tb testing.TB, f corpus.File) []string {
	tb.Helper()
	var body any
	if err := json.Unmarshal(corpus.Read(tb, f), &body); err != nil {
		tb.Fatalf("%s: %v", f.Name, err)
	}
	var out []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk("", e)
			}
		case map[string]any:
			if key == "input" || key == "args" {
				if b, err := json.Marshal(v); err == nil {
					out = append(out, string(b))
				}
			}
			for k, e := range v {
				walk(k, e)
			}
		}
	}
	walk("", body)
	return out
}

func TestBPEMatchesTiktoken(t *testing.T) {
	strs := corpusStrings(t)
	for _, id := range bpeTokenizers {
		t.Run(tokName(id), func(t *testing.T) {
			for _, tc := range bpeEdgeCases() {
				checkSameIDs(t, id, tc.name, tc.text)
			}
			if testing.Short() && id != O200k {
				return
			}
			for i, s := range strs {
				checkSameIDs(t, id, fmt.Sprintf("corpus string %d", i), s)
			}
		})
	}
}

// TestBPEMergeLargeMatchesSmall runs the heap merge (for long pieces) on short pieces too:
// it must find the same tokens as the quadratic merge it replaces.
func TestBPEMergeLargeMatchesSmall(t *testing.T) {
	pieces := []string{"ab", "abc", "hello", "   ", "\n\n\n\n", "aaaaaaaa", "abababab", "-----==-----",
		"🙂🙂🙂", "漢字仮名", "\xef\xbf\xbd\xef\xbf\xbd", "xyzzyqwfp", strings.Repeat("q", bpeSmall)}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := "aeiou tnsrl-=_.\n\xe2\x80\x94"
	for range 2000 {
		b := make([]byte, 2+r.IntN(bpeSmall-1))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		pieces = append(pieces, string(b))
	}
	for _, id := range bpeTokenizers {
		tbl := &testEncoder(t, id).ranks
		for _, p := range pieces {
			var start [bpeSmall + 1]uint8
			n := tbl.mergeSmall(p, &start)
			large := tbl.mergeLarge(p)
			same := n == len(large)
			for i := 0; same && i < n; i++ {
				same = int(start[i]) == int(large[i])
			}
			if !same {
				t.Errorf("%s: %q: mergeSmall bounds %v, mergeLarge %v", tokName(id), p, start[:n], large)
			}
		}
	}
}

func TestBPECountPieceDoesNotAllocate(t *testing.T) {
	tbl := &testEncoder(t, O200k).ranks
	for _, p := range []string{" hello", "xyzzyqwfp", " 日本語テキスト", "\n\n\n", strings.Repeat("-=", bpeSmall/2)} {
		if n := testing.AllocsPerRun(100, func() { _ = tbl.countPiece(p) }); n != 0 {
			t.Errorf("countPiece(%q) allocates %v times", p, n)
		}
	}
}

func TestNewRankTable(t *testing.T) {
	tooBig := int64(noRank)
	bad := []struct {
		name  string
		ranks map[string]int
	}{
		{"no tokens", map[string]int{}},
		{"empty token", map[string]int{"": 0, "a": 1}},
		{"negative rank", map[string]int{"a": -1}},
		{"token too long", map[string]int{strings.Repeat("a", 1<<16): 0}},
	}
	if strconv.IntSize == 64 {
		bad = append(bad, struct {
			name  string
			ranks map[string]int
		}{"rank too large", map[string]int{"a": int(tooBig)}})
	}
	for _, tt := range bad {
		if _, err := newRankTable(tt.ranks); err == nil {
			t.Errorf("%s: newRankTable succeeded, want an error", tt.name)
		}
	}

	tbl, err := newRankTable(map[string]int{"a": 0, "b": 1, "ab": 2, "abb": 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		s    string
		want uint32
	}{{"a", 0}, {"b", 1}, {"ab", 2}, {"abb", 7}, {"ba", noRank}, {"", noRank}, {"abbb", noRank}, {"c", noRank}} {
		if got := tbl.rank(tt.s); got != tt.want {
			t.Errorf("rank(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

func TestReplaceInvalidUTF8MatchesRuneConversion(t *testing.T) {
	tests := []string{"", "abc", "\xff", "a\xffb", "\xc3\x28", "\xed\xa0\x80", "\xf0\x9f\x98", "\xf0\x9f\x98\x80",
		"\uFFFD", "\xc0\xaf", "\xf4\x90\x80\x80", "ok é 👍 \x80\x80"}
	for _, s := range tests {
		if got, want := replaceInvalidUTF8(s), string([]rune(s)); got != want {
			t.Errorf("replaceInvalidUTF8(%q) = %q, want %q", s, got, want)
		}
	}
}

// pointerFree reports whether values of type t hold no pointers the GC would follow.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Slice, reflect.String,
		reflect.Interface, reflect.Chan, reflect.Func:
		return false
	}
	return true
}

// TestBPETablesHoldNoPointers: the rank table is two slices of pointer-free elements (and
// pointer-free fields), so loading a tokenizer adds a handful of objects the GC never scans;
// and the encoder the counter uses after Preload is that table, not tiktoken-go.
func TestBPETablesHoldNoPointers(t *testing.T) {
	tt := reflect.TypeFor[rankTable]()
	for i := range tt.NumField() {
		f := tt.Field(i)
		switch f.Name {
		case "bytes", "slots":
			if f.Type.Kind() != reflect.Slice || !pointerFree(f.Type.Elem()) {
				t.Errorf("rankTable.%s is %v, want a slice of pointer-free elements", f.Name, f.Type)
			}
		default:
			if !pointerFree(f.Type) {
				t.Errorf("rankTable.%s (%v) holds pointers", f.Name, f.Type)
			}
		}
	}
	if !pointerFree(reflect.TypeFor[rankSlot]()) {
		t.Error("rankSlot holds pointers")
	}

	// No type from tiktoken-go is reachable from what the counter holds.
	const oraclePkg = "github.com/pkoukk/tiktoken-go"
	seen := map[reflect.Type]bool{}
	var check func(reflect.Type, string)
	check = func(ty reflect.Type, path string) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		if ty.PkgPath() == oraclePkg {
			t.Errorf("%s is %v, from tiktoken-go", path, ty)
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map, reflect.Chan:
			check(ty.Elem(), path+"[]")
		case reflect.Struct:
			for i := range ty.NumField() {
				check(ty.Field(i).Type, path+"."+ty.Field(i).Name)
			}
		}
	}
	check(reflect.TypeFor[Text](), "Text")

	for _, id := range bpeTokenizers {
		if err := Preload(id); err != nil {
			t.Fatal(err)
		}
		tc, err := New(id)
		if err != nil {
			t.Fatal(err)
		}
		if tc.enc == nil || tc.enc != encoders[id].enc {
			t.Fatalf("%s: Text does not use the preloaded encoder", tokName(id))
		}
		tbl := &tc.enc.ranks
		if len(tbl.slots)&(len(tbl.slots)-1) != 0 {
			t.Errorf("%s: %d slots, want a power of two", tokName(id), len(tbl.slots))
		}
		tokens := 0
		for _, sl := range tbl.slots {
			if sl.n != 0 {
				tokens++
			}
		}
		if tokens < 100000 || 2*tokens > len(tbl.slots) {
			t.Errorf("%s: %d tokens in %d slots, want > 100000 at most half full", tokName(id), tokens, len(tbl.slots))
		}
	}
}

// FuzzBPEMatchesTiktoken: for any text, bpe's token ids under both encodings are tiktoken-go's
// EncodeOrdinary ids, and count is their number.
func FuzzBPEMatchesTiktoken(f *testing.F) {
	for _, s := range []string{"", "hello world", "I'M here", " \x850", "👍🏽", "日本語", "\xff\xfe", "e\u0301",
		"<|endoftext|>", "  \n\n\t x", "1234567", "----====", "a'LL'd", "\uFFFD\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range bpeTokenizers {
			checkSameIDs(t, id, tokName(id), s)
		}
	})
}

// Reference token ids. Sources: openai/tiktoken tests/test_encoding.py (cl100k_base: "hello
// world", "rer", "'rer", "today\n …", " \x850", "👍") and zurawiki/tiktoken-rs
// tests/tiktoken.rs ("This is a test …" for both encodings); "hello world" under o200k_base
// from the project brief.
func TestEncodeMatchesReferenceIDs(t *testing.T) {
	spaces := "This is a test" + strings.Repeat(" ", 9) + "with a lot of spaces"
	tests := []struct {
		tokenizer, text string
		want            []int
	}{
		{"o200k_base", "hello world", []int{24912, 2375}},
		{"", "hello world", []int{24912, 2375}},
		{"o200k_base", spaces, []int{2500, 382, 261, 1746, 269, 483, 261, 3261, 328, 18608}},
		{"cl100k_base", "hello world", []int{15339, 1917}},
		{"cl100k_base", spaces, []int{2028, 374, 264, 1296, 260, 449, 264, 2763, 315, 12908}},
		{"cl100k_base", "rer", []int{38149}},
		{"cl100k_base", "'rer", []int{2351, 81}},
		{"cl100k_base", "today\n ", []int{31213, 198, 220}},
		{"cl100k_base", "today\n \n", []int{31213, 27907}},
		{"cl100k_base", "today\n  \n", []int{31213, 14211}},
		{"cl100k_base", " \u00850", []int{220, 126, 227, 15}},
		{"cl100k_base", "👍", []int{9468, 239, 235}},
		{"cl100k_base", "", nil},
	}
	for _, tt := range tests {
		id, ok := Parse(tt.tokenizer)
		if !ok {
			t.Fatalf("Parse(%q) failed", tt.tokenizer)
		}
		got := testEncoder(t, id).Encode(tt.text)
		if len(got) != len(tt.want) || (len(got) > 0 && !slices.Equal(got, tt.want)) {
			t.Errorf("Encode(%q, %q) = %v, want %v", tt.text, tt.tokenizer, got, tt.want)
		}
	}
}
