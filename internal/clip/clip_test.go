package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("a", 12), 10, "aaaaaaaaaa… (12 bytes)"},
		{"ééééé", 3, "é… (10 bytes)"}, // never half a rune
	} {
		if got := String(tt.in, tt.max); got != tt.want {
			t.Errorf("String(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("a\"b"); got != `"a\"b"` {
		t.Errorf("Quote = %s", got)
	}
	long := strings.Repeat("é", 1<<20)
	got := Quote(long)
	if len(got) > 2*Max+32 || !strings.HasSuffix(got, "… (2097152 bytes)") || !utf8.ValidString(got) {
		t.Errorf("Quote of 2 MiB: %d bytes, ending %q", len(got), got[len(got)-24:])
	}
}

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: not split
		{"héllo", 0, "…"},
	} {
		if got := Prefix(c.s, c.max); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
	}
}
