// Package corpus finds the corpus of real agent conversations for tests and benchmarks.
//
// The corpus is not part of the repository: COMPACTORD_CORPUS names its directory, else
// ../shared/corpus/real beside the repository checkout is used when it exists. Without either,
// every test or benchmark that asks for it is skipped with a message saying so, so a bare
// clone still passes `make test` on the fixtures under each package's testdata/.
package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// EnvVar names the environment variable that overrides the corpus directory.
const EnvVar = "COMPACTORD_CORPUS"

// Dir returns the corpus directory, skipping tb when there is none. A COMPACTORD_CORPUS that
// names a missing directory fails tb: the caller asked for a corpus and would otherwise get
// a silent skip.
func Dir(tb testing.TB) string {
	tb.Helper()
	d, err := Locate()
	if err != nil {
		tb.Fatal(err)
	}
	if d == "" {
		tb.Skip("real corpus not found: skipping — set " + EnvVar + " or check out ../shared/corpus/real beside the repository")
	}
	return d
}

// Locate returns the corpus directory: COMPACTORD_CORPUS when set (an error if it is not a
// directory), else ../shared/corpus/real above the module root containing the working
// directory when that exists, else "".
func Locate() (string, error) {
	if d := os.Getenv(EnvVar); d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s=%s is not a directory", EnvVar, d)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			// The loadtest module nests inside the main one: look beside the outermost.
			if _, err := os.Stat(filepath.Join(filepath.Dir(d), "go.mod")); err == nil {
				continue
			}
			c := filepath.Join(filepath.Dir(d), "shared", "corpus", "real")
			if st, err := os.Stat(c); err == nil && st.IsDir() {
				return c, nil
			}
			return "", nil
		}
		if filepath.Dir(d) == d {
			return "", nil
		}
	}
}

// Files lists the project's fixtures (testdata/ beside this package, written for compactord)
// followed by the real corpus conversations when a corpus is found, each group in name order.
// It never skips: on a bare clone it returns the fixtures alone.
func Files(tb testing.TB) []File {
	tb.Helper()
	files := list(tb, fixtureDir(tb))
	d, err := Locate()
	if err != nil {
		tb.Fatal(err)
	}
	if d == "" {
		tb.Logf("real corpus not found (%s unset, no ../shared/corpus/real): running on the %d fixtures only", EnvVar, len(files))
		return files
	}
	return append(files, list(tb, d)...)
}

// Real lists the real corpus conversations in name order, skipping tb when there is no corpus.
// Tests whose expectations are tied to those files (golden outputs) use it.
func Real(tb testing.TB) []File {
	tb.Helper()
	files := list(tb, Dir(tb))
	if len(files) == 0 {
		tb.Fatalf("corpus: no conversations in %s", Dir(tb))
	}
	return files
}

// list returns the conversations in dir in name order.
func list(tb testing.TB, dir string) []File {
	tb.Helper()
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
	return files
}

// fixtureDir is this package's testdata directory, found from the source file's location so
// that tests in any package of the module reach it.
func fixtureDir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("corpus: cannot locate the fixtures")
	}
	return filepath.Join(filepath.Dir(file), "testdata")
}

// LoadTestConversation is the conversation whose first 20 messages the load test's
// 20-message scenarios send (loadtest/scenarios.yaml); benchmarks of the same work use it.
const LoadTestConversation = "sweagent-marshmallow-1867-fc-replace-from-source.openai.json"

// Named returns the fixture or corpus file called name. It skips tb when name is not a
// fixture and there is no real corpus, and fails it when the corpus has no such file.
func Named(tb testing.TB, name string) File {
	tb.Helper()
	for _, f := range list(tb, fixtureDir(tb)) {
		if f.Name == name {
			return f
		}
	}
	for _, f := range Real(tb) {
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

// Largest returns the biggest file of Files: a real conversation when there is a corpus.
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
