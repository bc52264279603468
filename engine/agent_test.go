package engine_test

import (
	"strings"
	"testing"

	"github.com/compactord/compactord/engine"
)

func TestPathsIn(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"edit src/_pytest/python.py and tests/test_foo.py.", []string{"src/_pytest/python.py", "tests/test_foo.py"}},
		{"see https://example.com/a/b.html or //x/y.go", nil},
		{"main.go alone, /etc/hosts, dir/ only, a/b.verylongext", nil},
		{"`./cmd/fidelity/main.go`", []string{"./cmd/fidelity/main.go"}},
	}
	for _, tt := range tests {
		got := engine.PathsIn(tt.text)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("PathsIn(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestIsFileNameAndPathLike(t *testing.T) {
	tests := []struct {
		w              string
		file, pathLike bool
	}{
		{"reproduce_issue.py", true, true},
		{"Cargo.toml", true, true},
		{"lib.rs", true, true},
		{"django.db.models", false, false},
		{"self.assertEqual", false, false},
		{"v1.2.3", false, false},
		{"src/lib", false, false},
		{"a/b/c", false, true},
		{"./run", false, true},
		{"/etc/hosts", false, true},
		{"/testbed/setup.cfg", false, true},
		{"https://x.org/a.py", false, false},
		{".py", false, false},
	}
	for _, tt := range tests {
		if got := engine.IsFileName(tt.w); got != tt.file {
			t.Errorf("IsFileName(%q) = %v, want %v", tt.w, got, tt.file)
		}
		if got := engine.IsPathLike(tt.w); got != tt.pathLike {
			t.Errorf("IsPathLike(%q) = %v, want %v", tt.w, got, tt.pathLike)
		}
	}
}

func TestObservationsAndDemonstrations(t *testing.T) {
	for _, tt := range []struct {
		text      string
		obs, demo bool
	}{
		{"<returncode>0</returncode>\n<output>\nok\n</output>", true, false},
		{"Found 1 matches for \"x.py\" in /repo:\n/repo/x.py\n(Open file: n/a)\n(Current directory: /repo)\nbash-$", true, false},
		{"OBSERVATION:\nfile written", true, false},
		{"Fix the bug in (Current directory: handling)", false, false},
		{"Here is a demonstration of how to correctly accomplish this task.", false, true},
		{"the example ends here\n--- END OF DEMONSTRATION ---\nnow your task", false, true},
		{"Please fix the parser.", false, false},
	} {
		if got := engine.IsObservation(tt.text); got != tt.obs {
			t.Errorf("IsObservation(%q) = %v", tt.text, got)
		}
		if got := engine.IsDemonstration(tt.text); got != tt.demo {
			t.Errorf("IsDemonstration(%q) = %v", tt.text, got)
		}
	}
}
