package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// TestStrictKeepsTools is issue 36's case: compact an OpenAI Chat body with three tools into
// Anthropic with --base-body and --strict. The tools are in the body, in Anthropic's form;
// a field of the input that Anthropic has no place for fails --strict, named, and is a
// warning without it.
func TestStrictKeepsTools(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "anthropic.base.json")
	if err := os.WriteFile(base, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--local", "compact", "--context-window", "2500", "--summary-max-tokens", "500", "--to", "anthropic", "--base-body", base, "--strict"}
	r := ctl(t, nil, "", append(args, fixture(t, swe))...)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var p anthropic.MessageNewParams
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range p.Tools {
		names = append(names, *tool.GetName())
	}
	if !slices.Equal(names, []string{"bash", "str_replace_editor", "submit"}) || p.Tools[0].OfTool.InputSchema.Properties == nil {
		t.Errorf("tools %q in %.300s", names, r.stdout)
	}

	body, err := os.ReadFile(fixture(t, swe))
	if err != nil {
		t.Fatal(err)
	}
	seeded := filepath.Join(dir, "seeded.json")
	if err := os.WriteFile(seeded, []byte(strings.Replace(string(body), "{", `{"seed": 7,`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = ctl(t, nil, "", append(args, seeded)...)
	if r.code != exitUnfit || !strings.Contains(r.stderr, "rest_body.seed") || r.stdout != "" {
		t.Errorf("--strict with a field Anthropic has no place for: exit %d, stderr %q", r.code, r.stderr)
	}
	r = ctl(t, nil, "", append(args[:len(args)-1], seeded)...)
	if r.code != exitOK || !strings.Contains(r.stderr, "rest_body.seed: not carried to anthropic") || !strings.Contains(r.stdout, `"name":"submit"`) {
		t.Errorf("without --strict: exit %d, stderr %q", r.code, r.stderr)
	}
}
