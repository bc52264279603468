package engine

import (
	"strconv"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
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

// TestSummaryRoomHoldsTheSourceMarker: a compaction that keeps a source reserves the summary's
// source marker in the summary room beside at least MinSummaryTextTokens of text; the marker
// yields to a room the caller set that cannot hold its bound (the room stays the same
// whatever the hash), and to the window (this source's own marker first, then none): over windows from the least that fits to a roomy one, the marker
// never makes a conversation irreducible that fits without it, and the windows where only a
// smaller marker or none fits plan one.
func TestSummaryRoomHoldsTheSourceMarker(t *testing.T) {
	msgs := []*compactorv1.Message{plSysMsg(plWords(600, "sys"))}
	for i := range 8 {
		msgs = append(msgs, plUserMsg(plWords(40, "u"+strconv.Itoa(i))), plAsstMsg(plText(plWords(80, "a"+strconv.Itoa(i)))))
	}
	counter := NewCounter(1 << 20)
	frame, err := counter.SummaryFrameTokens(len(msgs), "")
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	if err := p.keepSource(testSource, len(msgs)); err != nil {
		t.Fatal(err)
	}
	bound, exact := p.markerTokens, p.exactMarkerTokens()
	if exact >= bound || exact <= MessageOverheadTokens {
		t.Fatalf("this marker takes %d tokens, the bound %d", exact, bound)
	}
	text := func(d *Decision) int64 { return d.Response.GetSummaryTokens() - frame - d.MarkerTokens }

	for _, tc := range []struct {
		name string
		room int64 // summary_max_tokens; 0 for the default
		want int64
	}{
		{"default room", 0, bound},
		{"a room for any marker", frame + bound + MinSummaryTextTokens, bound},
		{"a room for this marker only", frame + exact + MinSummaryTextTokens, 0},
		{"a room for no marker", frame + MinSummaryTextTokens + 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &compactorv1.Policy{ContextWindow: 20000, SummaryMaxTokens: tc.room}
			d := mustDecide(t, msgs, pol, counter, Options{Force: true, Source: testSource})
			if d.Response.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
				t.Fatalf("%s: %s", d.Response.GetAction(), d.Response.GetReason())
			}
			if d.MarkerTokens != tc.want || text(d) < MinSummaryTextTokens {
				t.Errorf("marker %d tokens, text %d; want %d and at least %d", d.MarkerTokens, text(d), tc.want, MinSummaryTextTokens)
			}
			if tc.room > 0 && d.Response.GetSummaryTokens() > tc.room {
				t.Errorf("summary room %d, above the %d set", d.Response.GetSummaryTokens(), tc.room)
			}
			if d := mustDecide(t, msgs, pol, counter, Options{Force: true}); d.MarkerTokens != 0 {
				t.Errorf("without a source the plan reserves a %d-token marker", d.MarkerTokens)
			}
		})
	}

	seen := map[int64]bool{}
	for w := int64(700); w <= 4000; w += 10 {
		pol := &compactorv1.Policy{ContextWindow: w}
		plain, errPlain := Decide(msgs, pol, counter, Options{Force: true})
		d, err := Decide(msgs, pol, counter, Options{Force: true, Source: testSource})
		if (err == nil) != (errPlain == nil) {
			t.Fatalf("window %d: with a source %v, without %v", w, err, errPlain)
		}
		if err != nil || d.Response.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
			continue
		}
		checkInvariants(t, msgs, pol, d)
		if plain.Response.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
			t.Fatalf("window %d: %s without a source", w, plain.Response.GetAction())
		}
		if m := d.MarkerTokens; m != 0 && m != exact && m != bound || text(d) < MinSummaryTextTokens {
			t.Fatalf("window %d: marker %d tokens, text %d", w, m, text(d))
		}
		seen[d.MarkerTokens] = true
	}
	if !seen[0] || !seen[bound] {
		t.Errorf("markers planned over the windows: %v; want none at the least windows and the bound (%d) at the roomy ones", seen, bound)
	}
}

func TestParseOutputSource(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		text string
		i    int
		ok   bool
	}{
		{"[pruned: output of tool Bash, 766 tokens removed] [" + OutputSource(hash, 2) + "]", 2, true},
		{"[… 335 tokens cut from the middle of this output by compaction; " + OutputSource(hash, 123456789) + " …]", 123456789, true},
		{"full output in compactord source " + hash[:10] + " m2, for Expand", 0, false},
		{"no reference", 0, false},
	} {
		h, i, ok := ParseOutputSource(tt.text)
		if ok != tt.ok || ok && (h != hash || i != tt.i) {
			t.Errorf("ParseOutputSource(%.60q) = %q, %d, %v; want %d, %v", tt.text, h, i, ok, tt.i, tt.ok)
		}
	}
}
