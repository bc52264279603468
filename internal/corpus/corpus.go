// Package corpus finds the conversations tests, benchmarks and the fidelity and recall
// measures run on: the fixtures written for compactord (testdata/) and the real agent
// conversations copied into the repository (testdata/real/; its MANIFEST.md gives each one's
// source and license). COMPACTORD_CORPUS names another directory of real conversations to
// use instead of the copy. Nothing outside the repository is needed.
package corpus

import (
	"errors"
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

// EnvVar names the environment variable that overrides the real corpus's directory.
const EnvVar = "COMPACTORD_CORPUS"

// Dir returns the real corpus's directory (see Locate), failing tb when it cannot be found.
func Dir(tb testing.TB) string {
	tb.Helper()
	d, err := Locate()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// Locate returns the real corpus's directory: COMPACTORD_CORPUS when set (an error if it is
// not a directory), else the copy in the repository, internal/corpus/testdata/real.
func Locate() (string, error) {
	if d := os.Getenv(EnvVar); d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s=%s is not a directory", EnvVar, d)
		}
		return d, nil
	}
	d, err := FixtureDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "real"), nil
}

// FixtureDir returns this package's testdata directory, where the fixtures are: found from
// the source file's location, else from the module root above the working directory.
func FixtureDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Join(filepath.Dir(file), "testdata")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "internal", "corpus", "testdata")
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("corpus: internal/corpus/testdata not found above the working directory")
		}
	}
}

// All returns the fixtures followed by the real corpus's conversations, each group in name
// order.
func All() ([]File, error) {
	fd, err := FixtureDir()
	if err != nil {
		return nil, err
	}
	files, err := List(fd)
	if err != nil {
		return nil, err
	}
	rd, err := Locate()
	if err != nil {
		return nil, err
	}
	real, err := List(rd)
	if err != nil {
		return nil, err
	}
	return append(files, real...), nil
}

// Files lists the fixtures followed by the real corpus's conversations (see All).
func Files(tb testing.TB) []File {
	tb.Helper()
	files, err := All()
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// Real lists the real corpus's conversations in name order. Tests whose expectations are
// tied to those files (golden outputs) use it.
func Real(tb testing.TB) []File {
	tb.Helper()
	files := list(tb, Dir(tb))
	if len(files) == 0 {
		tb.Fatalf("corpus: no conversations in %s", Dir(tb))
	}
	return files
}

// list returns the conversations in dir in name order, failing tb on an error.
func list(tb testing.TB, dir string) []File {
	tb.Helper()
	files, err := List(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// List returns the conversations in dir (*.openai.json, *.anthropic.json) in name order.
func List(dir string) ([]File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
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
	return files, nil
}

// fixtureDir is FixtureDir, failing tb when it cannot be found.
func fixtureDir(tb testing.TB) string {
	tb.Helper()
	d, err := FixtureDir()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// LoadTestConversation is the conversation whose first 20 messages the load test's
// 20-message scenarios send (loadtest/scenarios.yaml); benchmarks of the same work use it.
const LoadTestConversation = "sweagent-marshmallow-1867-fc-replace-from-source.openai.json"

// Named returns the fixture or corpus file called name, failing tb when there is none.
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

// Largest returns the biggest file of Files.
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
