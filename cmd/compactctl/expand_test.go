package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// TestExpandAndDiff: compact a corpus fixture against a server, and its --diff names what
// became of every message; expand of the compacted conversation prints the messages its
// summary covers, and expand --hash the whole conversation the compaction received.
func TestExpandAndDiff(t *testing.T) {
	srv := startServer(t)
	env := map[string]string{"COMPACTORD_ADDR": srv.addr}
	policy := []string{"--context-window", "2500", "--summary-max-tokens", "500"}
	lifted := ctl(t, env, "", "lift", fixture(t, swe))
	if lifted.code != 0 {
		t.Fatalf("lift: %+v", lifted)
	}
	var in compactorv1.LiftResponse
	if err := protojson.Unmarshal([]byte(lifted.stdout), &in); err != nil {
		t.Fatal(err)
	}

	diff := ctl(t, env, "", append(append([]string{"compact", "--diff"}, policy...), fixture(t, swe))...)
	lines := strings.Split(strings.TrimSpace(diff.stdout), "\n")
	if diff.code != 0 || len(lines) != len(in.Messages)+1 || !strings.Contains(diff.stdout, "summarized") ||
		!strings.HasPrefix(lines[len(lines)-1], "source ") {
		t.Fatalf("compact --diff: %+v", diff)
	}
	hash := strings.Fields(lines[len(lines)-1])[1]

	out := ctl(t, env, "", append(append([]string{"compact"}, policy...), fixture(t, swe))...)
	compacted := filepath.Join(t.TempDir(), "compacted.json")
	if err := os.WriteFile(compacted, []byte(out.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	covered := ctl(t, env, "", "expand", compacted)
	var got compactorv1.LiftResponse
	if err := protojson.Unmarshal([]byte(covered.stdout), &got); covered.code != 0 || err != nil || len(got.Messages) == 0 {
		t.Fatalf("expand of the compacted conversation: %+v, %v", covered, err)
	}
	whole := ctl(t, env, "", "expand", "--hash", hash)
	got.Reset()
	if err := protojson.Unmarshal([]byte(whole.stdout), &got); whole.code != 0 || err != nil {
		t.Fatalf("expand --hash: %+v, %v", whole, err)
	}
	if len(got.Messages) != len(in.Messages) {
		t.Fatalf("expand --hash: %d messages, want %d", len(got.Messages), len(in.Messages))
	}
	for i := range in.Messages {
		if !proto.Equal(got.Messages[i], in.Messages[i]) {
			t.Fatalf("expand --hash: message %d differs from the input's", i)
		}
	}
	if r := ctl(t, env, "", "expand", "--hash", strings.Repeat("0", 64)); r.code != exitFailure || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("expand of an unknown hash: %+v", r)
	}
	if r := ctl(t, env, "", "lift", "--diff", fixture(t, swe)); r.code != exitUsage {
		t.Errorf("--diff on lift: %+v", r)
	}
}

// TestRecall: recall answers the model's recall_context call on a compacted conversation as
// a host would: a citation with the originals' text, a query with the matching ones; a wrong
// call is bad input, and the flags belong to recall alone.
func TestRecall(t *testing.T) {
	srv := startServer(t)
	env := map[string]string{"COMPACTORD_ADDR": srv.addr}
	out := ctl(t, env, "", "compact", "--context-window", "2500", "--summary-max-tokens", "500", fixture(t, swe))
	compacted := filepath.Join(t.TempDir(), "compacted.json")
	if err := os.WriteFile(compacted, []byte(out.stdout), 0o600); out.code != 0 || err != nil {
		t.Fatalf("compact: %+v, %v", out, err)
	}
	cited := ctl(t, env, "", "recall", "--citation", "m2", compacted)
	if cited.code != 0 || !strings.Contains(cited.stdout, " m2 ") || strings.Contains(cited.stdout, " m3 ") {
		t.Fatalf("recall --citation m2: %+v", cited)
	}
	found := ctl(t, env, "", "recall", "--query", "parse_quantity", "--max-tokens", "200", compacted)
	if found.code != 0 || !strings.Contains(strings.ToLower(found.stdout), "parse_quantity") || len(found.stdout) > 4*(200+30) {
		t.Fatalf("recall --query: %+v", found)
	}
	for _, args := range [][]string{{"recall", compacted}, {"expand", "--query", "x", compacted}, {"recall", "--citation", "m1", "--max-tokens", "-1", compacted}} {
		if r := ctl(t, env, "", args...); r.code != exitUsage {
			t.Errorf("%v: %+v, want a usage error", args, r)
		}
	}
	if r := ctl(t, env, "", "recall", "--citation", "the deploy step", compacted); r.code == 0 || r.code == exitUsage || !strings.Contains(r.stderr, "not a citation") {
		t.Errorf("a wrong citation: %+v", r)
	}
}
