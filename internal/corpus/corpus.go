// Package corpus finds the shared corpus of real agent conversations for tests and
// benchmarks. The corpus lives in ../shared/corpus/real beside the repository checkout; the
// COMPACTORD_CORPUS environment variable overrides the location.
package corpus

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// File is one corpus conversation.
type File struct {
	Name string // base name, e.g. "taubench-airline-t08-r2.openai.json"
	Path string
	// Format is "openai" (Chat Completions shape) or "anthropic" (Messages shape).
	Format string
}

// Dir returns the corpus directory, failing the test when it cannot be found.
func Dir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("COMPACTORD_CORPUS"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			c := filepath.Join(filepath.Dir(d), "shared", "corpus", "real")
			if _, err := os.Stat(c); err != nil {
				tb.Fatalf("corpus not found at %s (set COMPACTORD_CORPUS): %v", c, err)
			}
			return c
		}
		if filepath.Dir(d) == d {
			tb.Fatalf("corpus: no go.mod above %s", wd)
		}
	}
}

// Files lists the corpus conversations in name order.
func Files(tb testing.TB) []File {
	tb.Helper()
	dir := Dir(tb)
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(names)
	files := make([]File, 0, len(names))
	for _, p := range names {
		base := filepath.Base(p)
		f := File{Name: base, Path: p}
		switch {
		case strings.HasSuffix(base, ".openai.json"):
			f.Format = "openai"
		case strings.HasSuffix(base, ".anthropic.json"):
			f.Format = "anthropic"
		default:
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		tb.Fatalf("corpus: no conversations in %s", dir)
	}
	return files
}

// LoadTestConversation is the conversation whose first 20 messages the load test's
// 20-message scenarios send (loadtest/scenarios.yaml); benchmarks of the same work use it.
const LoadTestConversation = "sweagent-marshmallow-1867-fc-replace-from-source.openai.json"

// Named returns the corpus file called name, failing tb when there is none.
func Named(tb testing.TB, name string) File {
	tb.Helper()
	for _, f := range Files(tb) {
		if f.Name == name {
			return f
		}
	}
	tb.Fatalf("corpus: no conversation %s", name)
	return File{}
}

// Read returns a file's bytes.
func Read(tb testing.TB, f File) []byte {
	tb.Helper()
	b, err := os.ReadFile(f.Path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Largest returns the biggest corpus file.
func Largest(tb testing.TB) File {
	tb.Helper()
	var best File
	var size int64 = -1
	for _, f := range Files(tb) {
		st, err := os.Stat(f.Path)
		if err != nil {
			tb.Fatal(err)
		}
		if st.Size() > size {
			best, size = f, st.Size()
		}
	}
	return best
}
