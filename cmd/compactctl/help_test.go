package main

import (
	"flag"
	"strings"
	"testing"
)

// TestHelp: -h, --help and `help` print to standard output and exit 0, so `compactctl -h |
// less` shows them; a command's help lists its own flags and not the others'.
func TestHelp(t *testing.T) {
	all := map[string]bool{}
	(&command{}).flags().VisitAll(func(f *flag.Flag) { all[f.Name] = true })
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}, {"--local", "help"}} {
		r := ctl(t, nil, "", args...)
		if r.code != exitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: compactctl") {
			t.Errorf("%q: exit %d, stderr %q, stdout %.80q; want the help on standard output, exit 0", args, r.code, r.stderr, r.stdout)
		}
		for name := range all {
			if !strings.Contains(r.stdout, "\n  --"+name+" ") && !strings.Contains(r.stdout, "\n  --"+name+"\n") {
				t.Errorf("%q: the help lacks --%s", args, name)
			}
		}
		if strings.Contains(r.stdout, "\n  -"+"addr") {
			t.Errorf("%q: the help names flags with one dash", args)
		}
	}
	for _, args := range [][]string{{"help", "plan"}, {"plan", "-h"}, {"plan", "--help"}, {"--local", "plan", "x.json", "--help"}} {
		r := ctl(t, nil, "", args...)
		if r.code != exitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: compactctl [flags] plan ") {
			t.Errorf("%q: exit %d, stderr %q, stdout %.80q; want plan's help, exit 0", args, r.code, r.stderr, r.stdout)
		}
		if !strings.Contains(r.stdout, "--context-window int") || strings.Contains(r.stdout, "--base-body") {
			t.Errorf("%q: plan's help should list --context-window and not --base-body:\n%s", args, r.stdout)
		}
	}
	if r := ctl(t, nil, "", "help", "plna"); r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "did you mean plan?") {
		t.Errorf("help plna: %+v; want exit 2 suggesting plan", r)
	}
	// Every command has its help, and every flag a command's help names exists.
	for name := range commands {
		doc, ok := docOf(name)
		if !ok {
			t.Errorf("command %s has no help (commandDocs)", name)
		}
		for _, f := range doc.flags {
			if !all[f] {
				t.Errorf("the help of %s names --%s, which does not exist", name, f)
			}
		}
	}
}

// TestMistypedFlag: a flag that does not exist gets one line naming the closest one and
// pointing at -h, exit 2, and no usage dump.
func TestMistypedFlag(t *testing.T) {
	for _, tt := range []struct{ typed, want string }{
		{"--context-windw", "--context-window"},
		{"--contextwindow", "--context-window"},
		{"-context_window", "--context-window"},
		{"--window", "--context-window"},
		{"--base_body", "--base-body"},
		{"--stirct", "--strict"},
		{"--summary-max-token=500", "--summary-max-tokens"},
		{"--xyzzy", ""},
	} {
		r := ctl(t, nil, "", "--local", "plan", tt.typed, "1000", fixture(t, swe))
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || r.stdout != "" || len(lines) != 1 || !strings.Contains(r.stderr, "compactctl -h") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line pointing at compactctl -h", tt.typed, r.code, r.stdout, r.stderr)
		}
		if hint := "did you mean " + tt.want + "?"; tt.want != "" && !strings.Contains(r.stderr, hint) {
			t.Errorf("%s: %q lacks %q", tt.typed, r.stderr, hint)
		}
		if tt.want == "" && strings.Contains(r.stderr, "did you mean") {
			t.Errorf("%s: %q suggests a flag nothing like it", tt.typed, r.stderr)
		}
	}
	if r := ctl(t, nil, "", "--local", "compat", fixture(t, swe)); r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "did you mean compact?") {
		t.Errorf("a mistyped command: %+v; want one line suggesting compact", r)
	}
	if r := ctl(t, nil, ""); r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "compactctl -h") {
		t.Errorf("no command: %+v; want one line pointing at compactctl -h", r)
	}
}

// TestInterleavedFlags: flags after the command and after the input file are flags like the
// others; "--" ends them.
func TestInterleavedFlags(t *testing.T) {
	input := fixture(t, swe)
	want := ctl(t, nil, "", "--local", "plan", "--context-window", "2500", "--summary-max-tokens", "500", input)
	if want.code != exitOK {
		t.Fatalf("flags first: %+v", want)
	}
	for _, args := range [][]string{
		{"plan", input, "--local", "--context-window", "2500", "--summary-max-tokens", "500"},
		{"--context-window", "2500", "plan", input, "--summary-max-tokens=500", "--local"},
		{"plan", "--local", input, "--context-window", "2500", "--summary-max-tokens", "500"},
	} {
		if got := ctl(t, nil, "", args...); got != want {
			t.Errorf("%q: %+v\nwant as with the flags first: %+v", args, got, want)
		}
	}
	r := ctl(t, nil, "", "--local", "lift", "--", input, "--json")
	if r.code != exitUsage || !strings.Contains(r.stderr, `lift reads one input, got 2`) || !strings.Contains(r.stderr, `"--json"`) {
		t.Errorf("after --, --json is an input: %+v", r)
	}
	if r := ctl(t, nil, "", "--local", "lift", "--", input); r.code != exitOK {
		t.Errorf("lift -- file: %+v", r)
	}
}
