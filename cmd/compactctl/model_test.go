package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/certtest"
)

// TestModel: --model is the lowered body's "model" when neither --base-body nor the input's
// own fields name one; theirs wins, with a warning; a body that names no model (Gemini) gets
// none.
func TestModel(t *testing.T) {
	dir := t.TempDir()
	// The conversation alone: an IR document without the body's other fields.
	lifted := ctl(t, nil, "", "--local", "lift", fixture(t, airline))
	var doc map[string]any
	if err := json.Unmarshal([]byte(lifted.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "restBody")
	bare, _ := json.Marshal(doc)
	ir := filepath.Join(dir, "bare.ir.json")
	certtest.WriteFile(t, ir, bare)
	base := filepath.Join(dir, "base.json")
	certtest.WriteFile(t, base, []byte(`{"model":"gpt-4.1","temperature":0}`))
	noModel := filepath.Join(dir, "nomodel.json")
	certtest.WriteFile(t, noModel, []byte(` { "temperature": 0 } `))

	model := func(t *testing.T, body string) any {
		t.Helper()
		var b map[string]any
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("not a JSON body: %v\n%.300s", err, body)
		}
		return b["model"]
	}
	for _, tt := range []struct {
		name      string
		args      []string
		model     any    // the body's "model"; nil for none
		warning   string // a warning stderr holds, "" for none
		wantError string // exit 4 with this on stderr
	}{
		{"--model sets it", []string{"lower", "--to", "openai-chat", "--model", "gpt-4o", "--strict", ir}, "gpt-4o", "", ""},
		{"without it, strict fails naming the flag", []string{"lower", "--to", "openai-chat", "--strict", ir}, nil, "", `--base-body: lacks "model"`},
		{"into a base body without one", []string{"lower", "--to", "openai-responses", "--model", "o3", "--base-body", noModel, ir}, "o3", "", ""},
		{"the base body's wins", []string{"lower", "--to", "openai-chat", "--model", "gpt-4o", "--base-body", base, ir}, "gpt-4.1", "--model gpt-4o not used: --base-body " + base + ` names the model "gpt-4.1"`, ""},
		{"the input's own wins", []string{"lower", "--to", "openai-chat", "--model", "o3", fixture(t, airline)}, "gpt-4o-mini", `--model o3 not used`, ""},
		{"the same model is no conflict", []string{"lower", "--to", "openai-chat", "--model", "gpt-4.1", "--base-body", base, ir}, "gpt-4.1", "", ""},
		{"compact --to", []string{"compact", "--force", "--context-window", "128000", "--to", "anthropic", "--model", "claude-sonnet-4-5", ir}, "claude-sonnet-4-5", "", ""},
		{"gemini names no model", []string{"lower", "--to", "gemini", "--model", "gemini-2.5-pro", ir}, nil, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ctl(t, nil, "", append([]string{"--local"}, tt.args...)...)
			if tt.wantError != "" {
				if r.code != exitUnfit || !strings.Contains(r.stderr, tt.wantError) {
					t.Errorf("exit %d, stderr %q; want %d with %q", r.code, r.stderr, exitUnfit, tt.wantError)
				}
				return
			}
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := model(t, r.stdout); got != tt.model {
				t.Errorf("the body's model is %v, want %v", got, tt.model)
			}
			if tt.warning != "" && !strings.Contains(r.stderr, "compactctl: warning: "+tt.warning) {
				t.Errorf("stderr %q lacks the warning %q", r.stderr, tt.warning)
			}
			if tt.warning == "" && strings.Contains(r.stderr, "--model") {
				t.Errorf("stderr %q: a warning about --model where none is due", r.stderr)
			}
		})
	}
	// The base body's other members are kept as they were written.
	r := ctl(t, nil, "", "--local", "lower", "--to", "openai-chat", "--model", "gpt-4o", "--base-body", noModel, ir)
	if !strings.HasPrefix(r.stdout, `{"model":"gpt-4o","temperature":0,`) {
		t.Errorf("the body starts %.60q; want --model then the base body's members", r.stdout)
	}
	if r := ctl(t, nil, "", "--local", "lift", "--model", "gpt-4o", fixture(t, airline)); r.code != exitUsage || !strings.Contains(r.stderr, "--model") {
		t.Errorf("--model without --to: %+v; want a usage error naming it", r)
	}
}
