package main

import (
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go"

	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/certtest"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/golden"
	"github.com/compactord/compactord/service"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// result is what one compactctl run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// ctl runs compactctl's main with args, stdin and an environment of env only.
func ctl(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] },
		strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func fixture(t *testing.T, name string) string {
	return corpus.Named(t, name).Path
}

const (
	swe     = "fixture-swe-units.openai.json"
	airline = "fixture-airline-change.openai.json"
	rust    = "fixture-rust-wordfreq.anthropic.json"
)

// TestGolden runs each command in-process (--local) on the corpus fixtures and compares
// standard output, standard error and the exit status with testdata/<name>.golden.
func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"lift-swe", []string{"lift", fixture(t, swe)}},
		{"plan-explain-swe", []string{"plan", "--explain", "--context-window", "2500", "--summary-max-tokens", "500", fixture(t, swe)}},
		{"plan-explain-rust-prune", []string{"plan", "--explain", "--trigger-tokens", "1200", "--context-window", "200000", fixture(t, rust)}},
		{"plan-explain-airline-none", []string{"plan", "--explain", "--context-window", "128000", fixture(t, airline)}},
		{"plan-json-airline", []string{"plan", "--json", "--context-window", "128000", fixture(t, airline)}},
		{"compact-swe-to-anthropic", []string{"compact", "--to", "anthropic", "--context-window", "2500", "--summary-max-tokens", "500", fixture(t, swe)}},
		{"compact-rust-to-openai-responses", []string{"compact", "--to", "openai-responses", "--context-window", "1500", "--summary-max-tokens", "200", fixture(t, rust)}},
		{"compact-rust-force-unpaid", []string{"compact", "--force", "--to", "anthropic", "--context-window", "200000", fixture(t, rust)}},
		{"compact-airline-not-needed", []string{"compact", "--context-window", "128000", "--to", "openai-chat", fixture(t, airline)}},
		{"lower-rust-to-gemini", []string{"lower", "--to", "gemini", fixture(t, rust)}},
		{"lower-airline-to-bedrock", []string{"lower", "--from", "openai-chat", "--to", "bedrock", fixture(t, airline)}},
		{"plan-irreducible", []string{"plan", "--context-window", "300", fixture(t, swe)}},
		{"lift-unknown-format", []string{"lift", "testdata/unknown-format.json"}},
		{"lift-not-json", []string{"lift", "testdata/not-json.txt"}},
		{"lift-invalid-ir", []string{"lower", "--to", "anthropic", "--from", "ir", "testdata/invalid-ir.json"}},
		{"plan-no-window", []string{"plan", fixture(t, swe)}},
		{"lower-no-to", []string{"lower", fixture(t, swe)}},
		{"unknown-command", []string{"summarise", fixture(t, swe)}},
		{"unknown-provider", []string{"lower", "--to", "claude", fixture(t, swe)}},
		{"two-inputs", []string{"lift", fixture(t, swe), fixture(t, rust)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ctl(t, nil, "", append([]string{"--local"}, tt.args...)...)
			// Paths differ between machines; the fixtures' names do not.
			stderr := strings.ReplaceAll(r.stderr, filepath.Dir(fixture(t, swe))+"/", "")
			checkPrefixes(t, r.stderr)
			got := "exit " + strconv.Itoa(r.code) + "\n--- stderr\n" + stderr + "--- stdout\n" + r.stdout
			golden.Check(t, filepath.Join("testdata", tt.name+".golden"), got, *update)
		})
	}
}

// TestPipeline chains commands through standard input as a shell pipeline would: lift, then
// compact the IR document, then lower it; the result equals compacting the body at once.
func TestPipeline(t *testing.T) {
	body, err := os.ReadFile(fixture(t, swe))
	if err != nil {
		t.Fatal(err)
	}
	policy := []string{"--context-window", "2500", "--summary-max-tokens", "500"}
	ir := ctl(t, nil, string(body), "--local", "lift")
	compacted := ctl(t, nil, ir.stdout, append([]string{"--local", "compact"}, policy...)...)
	lowered := ctl(t, nil, compacted.stdout, "--local", "lower", "--to", "openai-chat", "-")
	direct := ctl(t, nil, string(body), append([]string{"--local", "compact", "--to", "openai-chat"}, policy...)...)
	for _, r := range []result{ir, compacted, lowered, direct} {
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	if lowered.stdout != direct.stdout {
		t.Errorf("lift | compact | lower differs from compact --to:\n%s\n---\n%s", lowered.stdout, direct.stdout)
	}
	if !strings.Contains(direct.stdout, `"model":"gpt-4o"`) || !strings.Contains(direct.stdout, "<summary>") {
		t.Errorf("the compacted OpenAI body lost the input's model or has no summary:\n%.400s", direct.stdout)
	}
}

// server is compactord's gRPC stack on a loopback listener, recording the metadata of every
// call it receives.
type server struct {
	addr string
	mu   sync.Mutex
	md   []metadata.MD
}

func startServer(t *testing.T, opts ...grpc.ServerOption) *server {
	t.Helper()
	s := &server{}
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		s.mu.Lock()
		s.md = append(s.md, md)
		s.mu.Unlock()
		return h(ctx, req)
	}
	g := service.NewGRPC(service.New(service.Options{}), service.GRPCOptions{
		UnaryInterceptors: []grpc.UnaryServerInterceptor{record}, ServerOptions: opts})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(func() { g.Server.Stop() })
	s.addr = lis.Addr().String()
	return s
}

// TestRemoteMatchesLocal: over gRPC, every command prints what it prints in-process, and
// every call carries the tenant and the credentials from files or the environment.
func TestRemoteMatchesLocal(t *testing.T) {
	srv := startServer(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	certtest.WriteFile(t, tokenFile, []byte("tok-123\n"))
	env := map[string]string{"COMPACTORD_ADDR": srv.addr, "COMPACTORD_API_KEY": "key-456"}
	for _, args := range [][]string{
		{"lift", fixture(t, rust)},
		{"plan", "--explain", "--context-window", "2500", "--summary-max-tokens", "500", fixture(t, swe)},
		{"compact", "--to", "gemini", "--context-window", "2500", "--summary-max-tokens", "500", fixture(t, swe)},
		{"lower", "--to", "openai-responses", fixture(t, airline)},
		{"plan", "--context-window", "2500", fixture(t, swe)},
	} {
		local := ctl(t, nil, "", append([]string{"--local"}, args...)...)
		remote := ctl(t, env, "", append([]string{"--tenant", "acme", "--token-file", tokenFile}, args...)...)
		if remote != local {
			t.Errorf("%v: remote run differs from --local:\nremote %+v\nlocal  %+v", args, remote, local)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.md) == 0 {
		t.Fatal("the server received no calls")
	}
	for _, md := range srv.md {
		for key, want := range map[string]string{service.TenantMetadataKey: "acme", "authorization": "Bearer tok-123", "x-api-key": "key-456"} {
			if got := md.Get(key); len(got) != 1 || got[0] != want {
				t.Errorf("metadata %s = %q, want %q", key, got, want)
			}
		}
	}
}

// TestTLS makes real handshakes: server authentication with --tls-ca, then mutual TLS with a
// client certificate, and a refused handshake when the CA is not the server's.
func TestTLS(t *testing.T) {
	ca := certtest.NewCA(t, "compactord test CA")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	certtest.WriteFile(t, caFile, ca.PEM)
	srv := startServer(t, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, certtest.Leaf{CommonName: "compactord"}).TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	})))
	clientCert, clientKey := ca.Issue(t, certtest.Leaf{CommonName: "agent", Client: true}).Write(t, dir, "client")
	input := fixture(t, airline)

	ok := ctl(t, nil, "", "--addr", srv.addr, "--tls-ca", caFile, "--tls-cert", clientCert, "--tls-key", clientKey, "lift", input)
	if want := ctl(t, nil, "", "--local", "lift", input); ok != want {
		t.Errorf("over mTLS: %+v, want %+v", ok, want)
	}
	// Without a client certificate the server refuses the handshake: a configuration fault,
	// with the flags to fix.
	noCert := ctl(t, nil, "", "--addr", srv.addr, "--tls-ca", caFile, "--timeout", "2s", "lift", input)
	if noCert.code != exitConfig || noCert.stdout != "" || !strings.Contains(noCert.stderr, "--tls-cert") {
		t.Errorf("without a client certificate: exit %d, stderr %q; want %d naming --tls-cert", noCert.code, noCert.stderr, exitConfig)
	}
	other := certtest.NewCA(t, "someone else")
	otherFile := filepath.Join(dir, "other.pem")
	certtest.WriteFile(t, otherFile, other.PEM)
	wrongCA := ctl(t, nil, "", "--addr", srv.addr, "--tls-ca", otherFile, "--tls-cert", clientCert, "--tls-key", clientKey, "--timeout", "2s", "lift", input)
	if wrongCA.code != exitConfig || !strings.Contains(wrongCA.stderr, "certificate") || !strings.Contains(wrongCA.stderr, "--tls-ca") {
		t.Errorf("with the wrong CA: exit %d, stderr %q; want %d naming the certificate and --tls-ca", wrongCA.code, wrongCA.stderr, exitConfig)
	}
}

// TestUsageErrors: flags that cannot work are refused before anything is dialled or read.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--tls-cert", "x.pem", "lift"},
		{"--local", "--addr", "localhost:1", "lift"},
		{"--timeout", "0s", "lift"},
		{"--explain", "compact"},
		{"--json", "--to", "anthropic", "compact"},
		{"--from", "ir", "lift"},
		{"--token-file", "/nonexistent/token", "lift", "x.json"},
		{"--policy", "/nonexistent/policy.json", "--local", "plan", fixture(t, swe)},
		{"--base-body", "/nonexistent/base.json", "--to", "anthropic", "--local", "--context-window", "100000", "compact", fixture(t, swe)},
		{},
	} {
		r := ctl(t, nil, "", args...)
		if r.code != exitUsage || r.stdout != "" || r.stderr == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d with a message", args, r.code, r.stdout, r.stderr, exitUsage)
		}
	}
}

// TestPolicyFile: --policy supplies the Policy; a flag overrides the field it names.
func TestPolicyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.json")
	certtest.WriteFile(t, file, []byte(`{"contextWindow": "2500", "summaryMaxTokens": "500", "keepRecentTurns": 2}`))
	fromFile := ctl(t, nil, "", "--local", "plan", "--explain", "--policy", file, fixture(t, swe))
	fromFlags := ctl(t, nil, "", "--local", "plan", "--explain", "--context-window", "2500", "--summary-max-tokens", "500", fixture(t, swe))
	if fromFile != fromFlags || fromFile.code != 0 {
		t.Errorf("--policy file: %+v\nflags: %+v", fromFile, fromFlags)
	}
	overridden := ctl(t, nil, "", "--local", "plan", "--explain", "--policy", file, "--context-window", "128000", fixture(t, swe))
	if !strings.HasPrefix(overridden.stdout, "action  none") {
		t.Errorf("--context-window did not override the file's:\n%s", overridden.stdout)
	}
	certtest.WriteFile(t, file, []byte(`{"contextWindow": "many"}`))
	if r := ctl(t, nil, "", "--local", "plan", "--policy", file, fixture(t, swe)); r.code != exitUsage || !strings.Contains(r.stderr, "--policy") {
		t.Errorf("a malformed policy file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestREADMEExample runs the README's compactctl example (testdata/readme-example.sh, which
// the README quotes verbatim) with sh and a compactctl binary built from this package.
func TestREADMEExample(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh: " + err.Error())
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "compactctl"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script, err := filepath.Abs("testdata/readme-example.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The script names the fixture relative to the repository root; it writes its outputs
	// into the directory it runs in.
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot(t), "internal"), filepath.Join(work, "internal")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-e", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README example failed: %v\n%s", err, out)
	}
	for _, want := range []string{"action  summarize", "FAILED_PRECONDITION", "it fits a context window of", "exit 4"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README example's output lacks %q:\n%s", want, out)
		}
	}
	checkAnthropicBody(t, filepath.Join(work, "compacted.anthropic.json"))
	// The input's tools too, in each body's form (issue 36).
	for file, wants := range map[string][]string{
		"compacted.anthropic.json": {"<summary>", `"name":"str_replace_editor"`},
		"conversation.ir.json":     {"ROLE_USER", `"inputSchemaJson"`},
		"gemini.json":              {`"contents"`, `"functionDeclarations":[{"name":"bash"`},
	} {
		b, err := os.ReadFile(filepath.Join(work, file))
		for _, want := range wants {
			if err != nil || !strings.Contains(string(b), want) {
				t.Errorf("%s: %v; want it to hold %q", file, err, want)
			}
		}
	}
}

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// checkAnthropicBody checks that the file is a body anthropic-sdk-go's MessageNewParams takes
// whole: model and max_tokens set, and every message and system member surviving a decode and
// re-encode by the SDK (a member it does not know would vanish).
func checkAnthropicBody(t *testing.T, path string) {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p anthropic.MessageNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s: not a MessageNewParams: %v", path, err)
	}
	if p.Model == "" || p.MaxTokens == 0 || len(p.Messages) == 0 {
		t.Fatalf("%s: model %q, max_tokens %d, %d messages: not a body Anthropic accepts", path, p.Model, p.MaxTokens, len(p.Messages))
	}
	again, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var ours, theirs struct{ Messages any }
	if json.Unmarshal(body, &ours) != nil || json.Unmarshal(again, &theirs) != nil {
		t.Fatal("re-decode failed")
	}
	// The SDK may reshape shorthand (a string content as one text block), never lose a value.
	have := map[string]bool{}
	leaves(theirs.Messages, func(s string) { have[s] = true })
	leaves(ours.Messages, func(s string) {
		if !have[s] {
			t.Errorf("%s: %.80q is lost when the SDK reads the body", path, s)
		}
	})
}

// leaves calls f with every string in v.
func leaves(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			leaves(e, f)
		}
	case map[string]any:
		for k, e := range v {
			f(k)
			leaves(e, f)
		}
	}
}
