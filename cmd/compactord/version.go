package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set with -ldflags "-X main.buildVersion=v1.2.3 -X main.buildRevision=<commit>" by builds
// that have no module version or VCS information of their own: the Dockerfile's, whose
// context has no .git. What the Go toolchain stamped wins.
var (
	buildVersion  string
	buildRevision string
)

// build is what the binary knows of its origin: the module version, the VCS revision and
// time, whether the tree had uncommitted changes, and the Go version.
type build struct {
	version, revision, time string
	modified                bool
	goVersion               string
}

// readBuild reads the binary's build information (runtime/debug.ReadBuildInfo), falling back
// on the -X values, then on "devel" for the version.
func readBuild() build {
	b := build{goVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.revision = s.Value
			case "vcs.time":
				b.time = s.Value
			case "vcs.modified":
				b.modified = s.Value == "true"
			}
		}
	}
	if b.version == "" {
		b.version = buildVersion
	}
	if b.revision == "" {
		b.revision = buildRevision
	}
	if b.version == "" {
		b.version = "devel"
	}
	return b
}

// String is the --version line: "compactord v0.1.0 (revision 6bee727…, 2025-11-26T06:30:00Z,
// modified) go1.26.8".
func (b build) String() string {
	var vcs []string
	if b.revision != "" {
		vcs = append(vcs, "revision "+b.revision)
	}
	if b.time != "" {
		vcs = append(vcs, b.time)
	}
	if b.modified {
		vcs = append(vcs, "modified")
	}
	s := "compactord " + b.version
	if len(vcs) > 0 {
		s += " (" + strings.Join(vcs, ", ") + ")"
	}
	return fmt.Sprintf("%s %s", s, b.goVersion)
}
