package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/certtest"
)

// TestFlagNamesInMessages: errors and warnings name the flags the user typed (--base-body,
// --keep-recent-tokens), not the API fields they set (base_body, policy.keep_recent_tokens);
// a policy field no flag set is named by its place in the --policy file.
func TestFlagNamesInMessages(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.json")
	certtest.WriteFile(t, policy, []byte(`{"contextWindow": "3000", "reserveOutputTokens": "5000"}`))
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"a policy flag", []string{"plan", "--context-window", "3000", "--keep-recent-tokens", "5000"},
			[]string{"compactctl: INVALID_ARGUMENT: --keep-recent-tokens: must not exceed"}},
		{"a policy flag named in another's description", []string{"plan", "--context-window", "3000", "--trigger-tokens", "5000"},
			[]string{"--trigger-tokens: must not exceed the usable window (--context-window − reserve_output_tokens = 2700)"}},
		{"a field of the policy file", []string{"plan", "--policy", policy},
			[]string{policy + ": reserve_output_tokens: must be less than context_window"}},
		{"a lowering warning", []string{"compact", "--to", "anthropic", "--context-window", "2500"},
			[]string{`compactctl: warning: --base-body: lacks "model" and "max_tokens", which anthropic requires: pass the target's --base-body`}},
		{"a strict lowering", []string{"lower", "--to", "anthropic", "--strict"},
			[]string{"compactctl: FAILED_PRECONDITION: strict lowering to anthropic would drop or change:\n", `  --base-body: lacks "model" and "max_tokens"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ctl(t, nil, "", append(append([]string{"--local"}, tt.args...), fixture(t, swe))...)
			for _, want := range tt.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if m := apiField.FindString(r.stderr); m != "" && !strings.Contains(strings.Join(tt.args, " "), "--policy") {
				t.Errorf("stderr names the API field %q where a flag sets it:\n%s", m, r.stderr)
			}
			checkPrefixes(t, r.stderr)
		})
	}
}

// apiField matches the API fields compactctl's flags set, as the API spells them.
var apiField = regexp.MustCompile(`\b(base_body|context_window|trigger_tokens|keep_recent_tokens|summary_max_tokens|policy\.([a-z]+_[a-z_]+|tokenizer))\b`)

// checkPrefixes fails t unless every line of stderr carries at most one "compactctl:" prefix
// and no command name after it ("compactctl: lower: warning: ..."): one prefix per line.
func checkPrefixes(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Count(line, "compactctl:") > 1 || chained.MatchString(line) {
			t.Errorf("a line with chained prefixes: %q", line)
		}
	}
}

// chained matches a line whose prefix names a command before what it says.
var chained = regexp.MustCompile(`^compactctl: (lift|plan|compact|lower|health): (warning|error)`)
