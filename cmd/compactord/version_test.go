package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: --version prints one line naming the module version, the revision when
// known, and the Go version, and serves nothing.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--version", "--listen", "127.0.0.1:1"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	// A test binary has no module version and no VCS stamp.
	if got, want := out.String(), "compactord devel "+runtime.Version()+"\n"; got != want {
		t.Errorf("--version = %q, want %q", got, want)
	}

	defer func(v, r string) { buildVersion, buildRevision = v, r }(buildVersion, buildRevision)
	buildVersion, buildRevision = "v1.2.3", "0123abcd"
	if got, want := readBuild().String(), "compactord v1.2.3 (revision 0123abcd) "+runtime.Version(); got != want {
		t.Errorf("with -X values: %q, want %q", got, want)
	}
	b := build{version: "v0.0.0-20251126063000-6bee727abcde+dirty", revision: "6bee727", time: "2025-11-26T06:30:00Z", modified: true, goVersion: "go1.26.8"}
	if got, want := b.String(), "compactord v0.0.0-20251126063000-6bee727abcde+dirty (revision 6bee727, 2025-11-26T06:30:00Z, modified) go1.26.8"; got != want {
		t.Errorf("stamped by the toolchain: %q, want %q", got, want)
	}
}

// TestBinaryVersionFromLdflags: the -X names the Makefile and the Dockerfile pass reach the
// binary (the linker ignores a misspelled one silently).
func TestBinaryVersionFromLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "compactord")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X main.buildVersion=v9.8.7 -X main.buildRevision=feedface", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "compactord v9.8.7 (revision feedface) "; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version = %q, want it to start %q", out, want)
	}
}
