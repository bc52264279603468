package engine

import (
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SourceRange
		ok   bool
	}{
		{"m12–m18", SourceRange{12, 18}, true},
		{"[m12-m18]", SourceRange{12, 18}, true},
		{"m7", SourceRange{7, 7}, true},
		{"12-18", SourceRange{12, 18}, true},
		{" m3 – m4 ", SourceRange{3, 4}, true},
		{"m18–m12", SourceRange{}, false},
		{"m-1", SourceRange{}, false},
		{"m1234567890", SourceRange{}, false},
		{"twelve", SourceRange{}, false},
		{"", SourceRange{}, false},
	} {
		got, err := ParseRange(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSourceMarkerRoundTrip(t *testing.T) {
	old, hash := strings.Repeat("a", 64), strings.Repeat("0f", 32)
	text := WithSourceMarker(WithSourceMarker("summary", SourceMarker(old, SourceRange{0, 3})), SourceMarker(hash, SourceRange{2, 40}))
	h, r, ok := ParseSourceMarker(text)
	if !ok || h != hash || r != (SourceRange{2, 40}) {
		t.Errorf("ParseSourceMarker = %q, %v, %v; want the newest marker, %s m2–m40", h, r, ok, hash)
	}
	for _, bad := range []string{"summary", "[compactord source abc m1]", "[compactord source " + hash + " m9–m2]"} {
		if _, _, ok := ParseSourceMarker(bad); ok {
			t.Errorf("ParseSourceMarker(%q) found a marker", bad)
		}
	}
	if got := (SourceRange{5, 5}).String(); got != "m5" {
		t.Errorf("one message: %q", got)
	}
}
