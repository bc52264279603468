package format

import (
	"encoding/json"
	"errors"
	"math/bits"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/compactord/compactord/engine"
)

func TestAppendStringIsJSON(t *testing.T) {
	cases := []string{
		"", "plain", `"quoted" \ back`, "tab\tnew\nline\rcr\b\f", "\x00\x01\x1f\x7f",
		"héllo 日本語 🚀", "\u2028\u2029", "<script>&amp;</script>", "bad \xff utf8 \xe2\x82", "\xed\xa0\x80 surrogate bytes",
	}
	for _, s := range cases {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, b, err)
		}
		if want := string([]rune(s)); got != want {
			t.Errorf("%q round-trips to %q, want %q", s, got, want)
		}
		if strings.ContainsAny(string(b), "\u2028\u2029") {
			t.Errorf("%q: U+2028/U+2029 left unescaped in %s", s, b)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "🚀\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("invalid JSON %q: %v", b, err)
		}
		if want := string([]rune(s)); got != want {
			t.Fatalf("round trip %q, want %q", got, want)
		}
	})
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, q := range []string{
		`""`, `"abc"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u65e5"`, `"\ud83d\ude80"`,
		`"\ud800 lone"`, `"\udc00"`, `"\ud83dx"`, `"mixed é \n"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(q), &want); err != nil {
			t.Fatal(err)
		}
		if got := unquote(q); got != want {
			t.Errorf("unquote(%s) = %q, want %q", q, got, want)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	valid := []string{`{}`, `[]`, ` {"a":[1,-2.5e+3,true,false,null,"x"]} `, `"s"`, `0`, `{"a":{"b":[{}]}}`}
	for _, s := range valid {
		if err := validateJSON(s, &jpath{key: "body"}); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		if !json.Valid([]byte(s)) {
			t.Fatalf("test case %s is not valid JSON", s)
		}
	}
	invalid := map[string]string{
		`{"a":}`:                          "body.a",
		`{"messages":[{"role":"user",}]}`: "body.messages[0]",
		`{"a":[1,2,]}`:                    "body.a[2]",
		`{"a":"\x01"}`:                    "body.a",
		`{"a":"\q"}`:                      "body.a",
		`{"a":01}`:                        "body",
		`{"a":1} x`:                       "body",
		`[`:                               "body[0]",
		`{"a":"unterminated`:              "body.a",
		"{\"a\":\"\xff\"}":                "body.a",
		`{"a":tru}`:                       "body.a",
		`{"a" 1}`:                         "body.a",
		``:                                "body",
	}
	for s, field := range invalid {
		err := validateJSON(s, &jpath{key: "body"})
		var ve *engine.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%q: got %v, want a ValidationError", s, err)
			continue
		}
		if !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%q: error does not wrap ErrInvalid", s)
		}
		if got := ve.Violations[0].Field; got != field {
			t.Errorf("%q: field %q, want %q (%v)", s, got, field, err)
		}
		if json.Valid([]byte(s)) && utf8.ValidString(s) {
			t.Fatalf("test case %q is valid JSON", s)
		}
	}
}

func TestValidateJSONDepthLimit(t *testing.T) {
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if err := validateJSON(deep, &jpath{key: "body"}); err != nil {
		t.Fatalf("%d levels must be accepted: %v", maxDepth, err)
	}
	deeper := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if err := validateJSON(deeper, &jpath{key: "body"}); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("%d levels must be refused, got %v", maxDepth+1, err)
	}
}

func TestMembersAndElems(t *testing.T) {
	obj := ` { "a" : [1, {"x":"y"} , "s\"q"] , "b\u0041":null,"c":{}} `
	obj = strings.TrimSpace(obj)
	var keys, vals []string
	for k, v := range members(obj) {
		keys = append(keys, k)
		vals = append(vals, v)
	}
	if strings.Join(keys, ",") != "a,bA,c" || strings.Join(vals, "|") != `[1, {"x":"y"} , "s\"q"]|null|{}` {
		t.Fatalf("members: %q %q", keys, vals)
	}
	var es []string
	for _, e := range elems(vals[0]) {
		es = append(es, e)
	}
	if strings.Join(es, "|") != `1|{"x":"y"}|"s\"q"` {
		t.Fatalf("elems: %q", es)
	}
	if got := sval(field(obj, "c")); got != "" {
		t.Fatalf("sval of an object: %q", got)
	}
}

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, -1.5, 1e21, 1e-7, 123456789, 0.000001} {
		want, _ := json.Marshal(f)
		if got := string(appendFloat(nil, f)); got != string(want) {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
}

// firstSpecial returns the index in s[i:i+8] (i+8 <= len(s)) of the first byte that needs
// work, or 8: what specialMask flags, as an index.
func firstSpecial(s string, i int) int {
	return bits.TrailingZeros64(specialMask(unsafe.StringData(s), i)) >> 3
}

func TestFirstSpecialIsExact(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	naive := func(w []byte) int {
		for k, c := range w {
			if !plain(c) {
				return k
			}
		}
		return 8
	}
	// Every byte value in every lane, among plain bytes and among bytes that borrow.
	for c := range 256 {
		for lane := range 8 {
			for _, fill := range []byte{'a', ' ', '!', '#', 0x7f} {
				w := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[lane] = byte(c)
				if got, want := firstSpecial(string(w), 0), naive(w); got != want {
					t.Fatalf("% x: firstSpecial %d, want %d", w, got, want)
				}
			}
		}
	}
	// Pairs of specials: the lower one must win whatever sits above it.
	specials := []byte{0, 0x1f, '"', '\\', 0x80, 0xff, '\n'}
	for _, a := range specials {
		for _, b := range specials {
			for la := range 8 {
				for lb := la + 1; lb < 8; lb++ {
					w := []byte("abcdefgh")
					w[la], w[lb] = a, b
					if got := firstSpecial(string(w), 0); got != la {
						t.Fatalf("% x: firstSpecial %d, want %d", w, got, la)
					}
				}
			}
		}
	}
}
