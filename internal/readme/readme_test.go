package readme

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestExamplesAreTheTestedFiles: the README quotes each example file verbatim, so an example
// cannot drift from the code its test runs.
func TestExamplesAreTheTestedFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []Block
	for _, b := range Blocks(string(readme)) {
		if strings.HasPrefix(b.Marker, "example: ") {
			examples = append(examples, b)
		}
	}
	if len(examples) == 0 {
		t.Fatal("README.md has no <!-- example: path --> blocks")
	}
	for _, b := range examples {
		path, quoted := strings.TrimPrefix(b.Marker, "example: "), b.Text
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

// TestRunBlocks: the set-up and the quick start are made of blocks the README runner
// (internal/readme/run, which CI runs) executes; a block there that it does not run says why.
func TestRunBlocks(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, b := range Blocks(string(text)) {
		if b.Section == "Set up" || b.Section == "Quick start" {
			switch {
			case b.Marker == "":
				t.Errorf("README.md:%d: a block of %q that the runner does not run, and no <!-- not run: why --> before it", b.Line, b.Section)
			case strings.HasPrefix(b.Marker, NotRun) && len(strings.TrimPrefix(b.Marker, NotRun)) < 10:
				t.Errorf("README.md:%d: %q does not say why", b.Line, b.Marker)
			}
		}
		if b.Marker == Setup && b.Section != "Set up" || (b.Marker == Server || b.Marker == Step) && b.Section == "Set up" {
			t.Errorf("README.md:%d: a %q block in %q", b.Line, b.Marker, b.Section)
		}
		count[b.Marker]++
	}
	if count[Setup] < 3 || count[Server] != 1 || count[Step] < 1 {
		t.Errorf("set-up blocks %d (want the server's, Python's and Node's), server blocks %d (want 1), steps %d",
			count[Setup], count[Server], count[Step])
	}
}

// TestSetupRunsAsRoot: a set-up block calls sudo only through a variable that is empty for
// root, as a fresh Debian image has no sudo; CI runs the blocks as root without one.
func TestSetupRunsAsRoot(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bare := regexp.MustCompile(`(^|[^$\w])sudo\s+[\w-]`)
	for _, b := range Blocks(string(text)) {
		if b.Marker != Setup {
			continue
		}
		for i, line := range strings.Split(b.Text, "\n") {
			code, _, _ := strings.Cut(line, " #")
			if bare.MatchString(code) {
				t.Errorf("README.md:%d: %q runs sudo, which a root shell on a fresh Debian does not have", b.Line+1+i, line)
			}
		}
	}
}

// TestBlocks: markers apply to the block right after them, blank lines between allowed.
func TestBlocks(t *testing.T) {
	got := Blocks("## Set up\n<!-- run: setup -->\n\n```sh\nmake install\n```\nprose\n<!-- run -->\nprose\n```sh\nls\n```\n## Quick start\n```\nx\n```\n")
	want := []Block{
		{Marker: Setup, Lang: "sh", Text: "make install\n", Line: 4, Section: "Set up"},
		{Marker: "", Lang: "sh", Text: "ls\n", Line: 10, Section: "Set up"},
		{Marker: "", Lang: "", Text: "x\n", Line: 14, Section: "Quick start"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Blocks:\n got %+v\nwant %+v", got, want)
	}
}

// TestNodeEngines: the Node version the client's package.json requires is the one the README
// states, and every runtime package of its lockfile runs on it (the development ones, such
// as the code generator, are for `make generate` only). CI then runs the client's example on
// exactly that version (COMPACTORD_NODE_OLDEST).
func TestNodeEngines(t *testing.T) {
	root := filepath.Join("..", "..")
	var pkg struct {
		Engines struct{ Node string } `json:"engines"`
	}
	readJSON(t, filepath.Join(root, "clients/node/package.json"), &pkg)
	minimum, ok := strings.CutPrefix(pkg.Engines.Node, ">=")
	v, err := parseVersion(minimum)
	if !ok || err != nil {
		t.Fatalf("clients/node/package.json: engines.node %q is not >=X.Y.Z", pkg.Engines.Node)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Node.js " + minimum + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (clients/node/package.json's engines)", want)
	}
	var lock struct {
		Packages map[string]struct {
			Dev     bool `json:"dev"`
			Engines any  `json:"engines"`
		} `json:"packages"`
	}
	readJSON(t, filepath.Join(root, "clients/node/package-lock.json"), &lock)
	checked := 0
	for name, p := range lock.Packages {
		engines, _ := p.Engines.(map[string]any)
		rng, _ := engines["node"].(string)
		if name == "" || p.Dev || rng == "" {
			continue
		}
		ok, err := admits(rng, v)
		switch {
		case err != nil:
			t.Errorf("%s: engines.node %q: %v", name, rng, err)
		case !ok:
			t.Errorf("%s needs Node %s, above the client's engines %s", name, rng, pkg.Engines.Node)
		}
		checked++
	}
	if checked == 0 {
		t.Error("no runtime package of the lockfile states its engines: nothing was checked")
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// version is a semantic version's major, minor and patch; -1 is a wildcard (x, *, absent).
type version [3]int

func parseVersion(s string) (version, error) {
	v := version{-1, -1, -1}
	parts := strings.Split(s, ".")
	if len(parts) > 3 || s == "" {
		return v, fmt.Errorf("%q is not a version", s)
	}
	for i, p := range parts {
		if p == "x" || p == "*" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("%q is not a version", s)
		}
		v[i] = n
	}
	return v, nil
}

// cmp compares v (concrete) with w, reading w's wildcards as 0.
func (v version) cmp(w version) int {
	for i := range v {
		if c := v[i] - max(w[i], 0); c != 0 {
			return c
		}
	}
	return 0
}

// admits reports whether v satisfies an npm engines range made of ||-alternatives of
// space-separated comparators (>=, >, <=, <, ^, ~, or a version with wildcards); any other
// syntax is an error, so that the check never passes by not understanding a range.
func admits(rng string, v version) (bool, error) {
	spaced := regexp.MustCompile(`(>=|<=|>|<|=|\^|~)\s+`)
	for _, alt := range strings.Split(rng, "||") {
		all := true
		for _, c := range strings.Fields(spaced.ReplaceAllString(alt, "$1")) {
			op := strings.TrimRight(c, "0123456789.x*")
			w, err := parseVersion(strings.TrimPrefix(c, op))
			if err != nil {
				return false, err
			}
			var ok bool
			switch op {
			case ">=":
				ok = v.cmp(w) >= 0
			case ">":
				ok = v.cmp(w) > 0
			case "<=":
				ok = v.cmp(w) <= 0
			case "<":
				ok = v.cmp(w) < 0
			case "^":
				ok = v.cmp(w) >= 0 && v[0] == max(w[0], 0)
			case "~":
				ok = v.cmp(w) >= 0 && v[0] == max(w[0], 0) && v[1] == max(w[1], 0)
			case "", "=":
				ok = true
				for i := range w {
					ok = ok && (w[i] < 0 || v[i] == w[i])
				}
			default:
				return false, fmt.Errorf("comparator %q not understood", c)
			}
			all = all && ok
		}
		if all {
			return true, nil
		}
	}
	return false, nil
}

func TestAdmits(t *testing.T) {
	v := version{14, 13, 1}
	for rng, want := range map[string]bool{
		">=12.10.0": true, ">=14.13.1": true, ">=14.17": false, ">=22": false, ">= 10.*": true,
		"6.* || 8.* || >= 10.*": true, "6.* || 8.*": false, "^14.0.0": true, "^12.0.0": false,
		"~14.13.0": true, "~14.12.0": false, "14.x": true, ">=12 <14": false, ">=0.10.0": true,
	} {
		if got, err := admits(rng, v); err != nil || got != want {
			t.Errorf("admits(%q, 14.13.1) = %v, %v; want %v", rng, got, err, want)
		}
	}
	if _, err := admits("node >= 12", v); err == nil {
		t.Error("a range it does not understand passed")
	}
}

// TestToolVersionsHaveOneHome: a doc that names a version of grpcurl names the Makefile's pin
// (make grpcurl installs it); the README installs it with make, not by version.
func TestToolVersionsHaveOneHome(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^GRPCURL_VERSION\s*:=\s*(v\S+)`).FindSubmatch(mk)
	if pin == nil {
		t.Fatal("the Makefile pins no GRPCURL_VERSION")
	}
	named := regexp.MustCompile(`grpcurl(?:/cmd/grpcurl)?[@ ](v\d+\.\d+\.\d+)`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".bin" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range named.FindAllSubmatch(b, -1) {
			if string(m[1]) != string(pin[1]) {
				t.Errorf("%s names grpcurl %s; the Makefile pins %s", path, m[1], pin[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
