// Package golden compares test output with files under testdata/.
package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// Check fails t unless got equals the file at path; with update it writes got there instead
// (creating its directory), for a reviewed change to be committed.
func Check(t *testing.T, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update after checking the change):\n--- got\n%s", path, got)
	}
}
