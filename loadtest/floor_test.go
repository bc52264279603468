package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestCompareModules(t *testing.T) {
	mod := func(path, version string) *debug.Module { return &debug.Module{Path: path, Version: version} }
	replaced := func(path, to string) *debug.Module {
		return &debug.Module{Path: path, Version: "v0.0.0", Replace: &debug.Module{Path: to}}
	}
	compactord := &debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{
		mod("google.golang.org/grpc", "v1.85.0"),
		mod("google.golang.org/protobuf", "v1.36.12"),
		mod("github.com/redis/go-redis/v9", "v9.22.0"),
	}}
	for _, tc := range []struct {
		name string
		b    *debug.BuildInfo
		want string // in the versions, or in the error when wantErr
		err  bool
	}{
		{"same, and modules only one links", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{
			mod("google.golang.org/grpc", "v1.85.0"),
			mod("github.com/bojand/ghz", "v0.121.0"),
		}}, "go1.26.8, google.golang.org/grpc v1.85.0, google.golang.org/protobuf v1.36.12", false},
		{"another grpc", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{
			mod("google.golang.org/grpc", "v1.86.0"),
		}}, "google.golang.org/grpc v1.85.0 vs v1.86.0", true},
		{"a replaced module", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{
			replaced("google.golang.org/protobuf", "../protobuf"),
		}}, "google.golang.org/protobuf v1.36.12 vs ../protobuf@", true},
		{"another toolchain", &debug.BuildInfo{GoVersion: "go1.26.7"}, "built with go1.26.8 and go1.26.7", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compareModules(compactord, tc.b)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("compareModules = %q, %v; want an error containing %q", got, err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("compareModules = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
