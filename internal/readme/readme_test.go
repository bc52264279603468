package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// example matches a marked block: the marker, then a fenced code block.
var example = regexp.MustCompile("(?s)<!-- example: ([^ ]+) -->\\s*```[a-z]*\\n(.*?)```")

// TestExamplesAreTheTestedFiles: the README quotes each example file verbatim, so an example
// cannot drift from the code its test runs.
func TestExamplesAreTheTestedFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := example.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no <!-- example: path --> blocks")
	}
	for _, b := range blocks {
		path, quoted := b[1], b[2]
		file, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("README.md quotes %s: %v", path, err)
			continue
		}
		if quoted != string(file) {
			t.Errorf("README.md's example differs from %s (copy the file into the README):\n--- README\n%s--- %s\n%s",
				path, quoted, path, file)
		}
		if strings.TrimSpace(quoted) == "" {
			t.Errorf("README.md's example of %s is empty", path)
		}
	}
}
