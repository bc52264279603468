package recalltool

import (
	"testing"

	"github.com/compactord/compactord/engine"
)

// recalltool reads, without importing engine (a host's client, like the Python and Node
// ones), what engine writes: source markers, the source a cut or pruned output names, and
// citations. These cases tie the two together, so that a change of engine's wording that
// recalltool no longer reads fails here.
func TestReadsWhatEngineWrites(t *testing.T) {
	r := engine.SourceRange{First: 3, Last: 40}
	for _, text := range []string{
		engine.WithSourceMarker("summary", engine.SourceMarker(hashA, r)),
		"[… 900 tokens cut …; " + engine.OutputSource(hashA, 7) + " …]",
	} {
		cs := citedIn(text)
		if len(cs) != 1 || cs[0].source != hashA {
			t.Errorf("citedIn(%q) = %+v, want one citation of %s", text, cs, hashA)
		}
	}
	for _, c := range []engine.Citation{
		{Range: r},
		{Range: engine.SourceRange{First: 5, Last: 5}},
		engine.Citation{Range: r}.Qualified(hashB),
	} {
		got, err := ParseCitation(c.String())
		if err != nil {
			t.Errorf("ParseCitation(%q): %v", c.String(), err)
			continue
		}
		// The server reads the range with engine.ParseCitation: it must name c again.
		if back, err := engine.ParseCitation(got.Range); err != nil || back != c {
			t.Errorf("ParseCitation(%q).Range = %q, which engine reads as %+v, %v; want %+v", c.String(), got.Range, back, err, c)
		}
	}
}
