package main

import (
	"flag"
	"slices"
	"testing"
)

// -server-arg takes any server flag, with or without a value, in order; -server-env only
// KEY=VALUE.
func TestServerArgsAndEnv(t *testing.T) {
	parse := func(args ...string) (flags, error) {
		var f flags
		fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
		f.register(fs)
		return f, fs.Parse(args)
	}
	f, err := parse("-server-arg=--cache-max-bytes=2MiB", "-server-arg", "--drain-timeout", "-server-arg", "1s", "-server-env", "GOGC=400")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--cache-max-bytes=2MiB", "--drain-timeout", "1s"}; !slices.Equal(f.serverArgs, want) {
		t.Errorf("server args %q, want %q", f.serverArgs, want)
	}
	if want := []string{"GOGC=400"}; !slices.Equal(f.serverEnv, want) {
		t.Errorf("server env %q, want %q", f.serverEnv, want)
	}
	if _, err := parse("-server-env", "GOGC"); err == nil {
		t.Errorf("-server-env GOGC accepted without a value")
	}
}
