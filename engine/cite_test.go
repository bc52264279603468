package engine

import (
	"reflect"
	"strings"
	"testing"
)

func TestCitationString(t *testing.T) {
	hash := "1A2B3C4D" + strings.Repeat("0", 56)
	for _, tc := range []struct {
		c    Citation
		want string
	}{
		{Citation{Range: SourceRange{12, 12}}, "[m12]"},
		{Citation{Range: SourceRange{12, 18}}, "[m12–18]"},
		{Citation{Range: SourceRange{0, 3}}.Qualified(hash), "[s1a2b3c4d m0–3]"},
		{Citation{Source: "deadbeef", Range: SourceRange{4, 4}}.Qualified(hash), "[sdeadbeef m4]"},
		{Citation{Range: SourceRange{1, 1}}.Qualified("abc"), "[m1]"}, // too short to qualify
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
		if back := ParseCitations(tc.want); len(back) != 1 || back[0] != tc.c {
			t.Errorf("ParseCitations(%q) = %+v, want %+v", tc.want, back, tc.c)
		}
	}
	if got := Cite(9, 4); got != "[m4–9]" {
		t.Errorf("Cite(9, 4) = %q", got)
	}
}

func TestParseCitations(t *testing.T) {
	r := func(f, l int) SourceRange { return SourceRange{f, l} }
	for _, tc := range []struct {
		text string
		want []Citation
	}{
		{"- edited a.go [m3]", []Citation{{Range: r(3, 3)}}},
		{"- ran tests → 2 failed [m3–5] [sdeadbeef m0-m2]", []Citation{{Range: r(3, 5)}, {Source: "deadbeef", Range: r(0, 2)}}},
		{"list[m3] and x[1] and [m] and [m9–2] and [sXYZ m1]", []Citation{{Range: r(3, 3)}}},
		{"no citation here", nil},
	} {
		if got := ParseCitations(tc.text); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCitations(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

func TestParseCitation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Citation
		ok   bool
	}{
		{"[m12–18]", Citation{Range: SourceRange{12, 18}}, true},
		{"[s1a2b3c4d m12–18]", Citation{Source: "1a2b3c4d", Range: SourceRange{12, 18}}, true},
		{"s1a2b3c4d m12–18", Citation{Source: "1a2b3c4d", Range: SourceRange{12, 18}}, true},
		{"m12-m18", Citation{Range: SourceRange{12, 18}}, true},
		{"12", Citation{Range: SourceRange{12, 12}}, true},
		{"[s1a2b3c4d m18–12]", Citation{}, false},
		{"[s1a2 m1]", Citation{}, false},
		{"x [m1]", Citation{}, false},
	} {
		got, err := ParseCitation(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCitation(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestCutCitations(t *testing.T) {
	for _, tc := range []struct {
		line, rest string
		n          int
	}{
		{"- edited a.go [m3] [sdeadbeef m1–2]", "- edited a.go", 2},
		{"- edited a.go [m3]  ", "- edited a.go", 1},
		{"- a list [1, 2]", "- a list [1, 2]", 0},
		{"- plain", "- plain", 0},
		{"[m4]", "", 1},
	} {
		rest, cs := CutCitations(tc.line)
		if rest != tc.rest || len(cs) != tc.n {
			t.Errorf("CutCitations(%q) = %q, %+v; want %q and %d", tc.line, rest, cs, tc.rest, tc.n)
		}
	}
}

func TestQualifyCitations(t *testing.T) {
	hash := "deadbeef" + strings.Repeat("0", 56)
	text := "- edited a.go [m3]\n- ran it [m4–6] [s01234567 m2]\n- a list [1, 2]"
	want := "- edited a.go [sdeadbeef m3]\n- ran it [sdeadbeef m4–6] [s01234567 m2]\n- a list [1, 2]"
	if got := QualifyCitations(text, hash); got != want {
		t.Errorf("QualifyCitations = %q, want %q", got, want)
	}
	if got := QualifyCitations(text, ""); got != text {
		t.Errorf("without a hash: %q", got)
	}
	if got := WithoutCitations(want); got != "- edited a.go \n- ran it  \n- a list [1, 2]" {
		t.Errorf("WithoutCitations = %q", got)
	}
}
