package main

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/internal/certtest"
	"github.com/compactord/compactord/service"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestConfigurationFaults: an address or TLS setting that cannot work is found before any
// call, exits 7 and names the flag to fix; a server that is merely slow stays transient.
func TestConfigurationFaults(t *testing.T) {
	ca := certtest.NewCA(t, "compactord test CA")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	certtest.WriteFile(t, caFile, ca.PEM)
	tlsSrv := startServer(t, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, certtest.Leaf{CommonName: "compactord"}).TLS(t)}})))
	plainSrv := startServer(t)
	input := fixture(t, airline)
	for _, tt := range []struct {
		name string
		args []string
		hint string
	}{
		{"connection refused", []string{"--addr", closedAddr(t)}, "--addr"},
		{"a host that does not resolve", []string{"--addr", "no..such.host:50051"}, "--addr"},
		{"plaintext to a TLS port", []string{"--addr", tlsSrv.addr}, "add --tls"},
		{"TLS to a plaintext port", []string{"--addr", plainSrv.addr, "--tls-ca", caFile}, "drop --tls"},
		{"a name the certificate does not hold", []string{"--addr", tlsSrv.addr, "--tls-ca", caFile, "--tls-server-name", "elsewhere"}, "--tls-server-name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ctl(t, nil, "", append(tt.args, "--timeout", "10s", "lift", input)...)
			if r.code != exitConfig || r.stdout != "" || !strings.HasPrefix(r.stderr, "compactctl: cannot reach the server: ") || !strings.Contains(r.stderr, tt.hint) {
				t.Errorf("exit %d, stderr %q; want %d naming %q", r.code, r.stderr, exitConfig, tt.hint)
			}
			if strings.Contains(r.stderr, "retries") || strings.Contains(r.stderr, "UNAVAILABLE") {
				t.Errorf("a configuration fault was retried or reported as transient: %q", r.stderr)
			}
		})
	}
	for _, srv := range []*server{tlsSrv, plainSrv} {
		srv.mu.Lock()
		if n := len(srv.md); n != 0 {
			t.Errorf("a server received %d calls; want none", n)
		}
		srv.mu.Unlock()
	}

	// A server that accepts and never answers is not a configuration fault: transient.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	if r := ctl(t, nil, "", "--addr", lis.Addr().String(), "--timeout", "1s", "lift", input); r.code != exitUnavailable {
		t.Errorf("a silent server: exit %d, stderr %q; want %d", r.code, r.stderr, exitUnavailable)
	}
}

// TestHealth: health asks the health service without credentials or reflection, also on a
// server that authenticates every other call.
func TestHealth(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	sum := sha256.Sum256([]byte("key-of-acme"))
	certtest.WriteFile(t, keys, []byte("sha256:"+hex.EncodeToString(sum[:])+" runner acme\n"))
	a, err := auth.New(t.Context(), auth.Config{Mode: auth.ModeAPIKey, APIKeysFile: keys}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, s := auth.Interceptors(a)
	srv := startServer(t, grpc.ChainUnaryInterceptor(u), grpc.ChainStreamInterceptor(s))

	if r := ctl(t, nil, "", "--addr", srv.addr, "health"); r.code != exitOK || r.stdout != "SERVING\n" {
		t.Errorf("health: %+v; want SERVING, exit 0", r)
	}
	if r := ctl(t, nil, "", "--addr", srv.addr, "health", "compactor.v1.CompactorService"); r.code != exitOK || r.stdout != "SERVING\n" {
		t.Errorf("health of the service: %+v", r)
	}
	if r := ctl(t, nil, "", "--addr", srv.addr, "lift", fixture(t, airline)); r.code != exitDenied {
		t.Errorf("lift without a key: %+v; want exit %d", r, exitDenied)
	}
	if r := ctl(t, nil, "", "--local", "health"); r.code != exitUsage {
		t.Errorf("--local health: %+v; want a usage error", r)
	}
}

// TestInputLocations: errors in the input name the place in the input file: line and column
// for malformed JSON, the body's own element for a rule the conversation breaks (locally and
// from a server alike), and the IR document's path for an IR document.
func TestInputLocations(t *testing.T) {
	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.json")
	certtest.WriteFile(t, malformed, []byte("{\n  \"messages\": [\n    {\"role\": \"usér\", content: 1}\n  ]\n}\n"))
	orphan := filepath.Join(dir, "orphan.json")
	certtest.WriteFile(t, orphan, []byte(`{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"nobody","content":"r"}]}]}`))
	srv := startServer(t)
	for _, where := range [][]string{{"--local"}, {"--addr", srv.addr}} {
		r := ctl(t, nil, "", append(where, "lift", malformed)...)
		if want := "compactctl: " + malformed + ":3:22: not JSON: invalid character 'c'"; r.code != exitInvalid || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("%v malformed: exit %d, stderr %q; want %d, %q", where, r.code, r.stderr, exitInvalid, want)
		}
		r = ctl(t, nil, "", append(where, "plan", "--context-window", "1000", orphan)...)
		want := "compactctl: INVALID_ARGUMENT: " + orphan + ": messages[2]: "
		if r.code != exitInvalid || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "(lifted as messages[3].parts[0].tool_result.tool_call_id)") {
			t.Errorf("%v orphan tool result: exit %d, stderr %q; want %d, %q…", where, r.code, r.stderr, exitInvalid, want)
		}
	}
	r := ctl(t, nil, "", "--local", "lower", "--to", "anthropic", "testdata/invalid-ir.json")
	if want := "compactctl: INVALID_ARGUMENT: testdata/invalid-ir.json: messages[0].parts: "; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("invalid IR document: stderr %q, want %q…", r.stderr, want)
	}
}

// TestSizeLimit: compactctl reads no more than --max-message-bytes (the server's default
// request limit), locally as remotely, and names the flag; a server with a lower limit than
// compactctl's is explained with compactord's flag.
func TestSizeLimit(t *testing.T) {
	body, err := os.ReadFile(fixture(t, airline))
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.json")
	certtest.WriteFile(t, big, body)
	small := startServer(t)
	for _, where := range [][]string{{"--local"}, {"--addr", small.addr}} {
		r := ctl(t, nil, "", append(where, "--max-message-bytes", "1KiB", "lift", big)...)
		if r.code != exitUnfit || !strings.Contains(r.stderr, "over the 1KiB request limit (--max-message-bytes") {
			t.Errorf("%v file: exit %d, stderr %q; want %d naming --max-message-bytes", where, r.code, r.stderr, exitUnfit)
		}
		r = ctl(t, nil, string(body), append(where, "--max-message-bytes", "1KiB", "lift", "-")...)
		if r.code != exitUnfit || !strings.Contains(r.stderr, "standard input: more than 1.0 KiB") {
			t.Errorf("%v stdin: exit %d, stderr %q; want %d", where, r.code, r.stderr, exitUnfit)
		}
	}
	if r := ctl(t, nil, "", "--local", "lift", big); r.code != exitOK {
		t.Errorf("under the default limit: %+v", r)
	}

	g := service.NewGRPC(service.New(service.Options{}), service.GRPCOptions{MaxMessageBytes: 1 << 10})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Server.Stop)
	r := ctl(t, nil, "", "--addr", lis.Addr().String(), "lift", big)
	if r.code != exitUnfit || !strings.Contains(r.stderr, "RESOURCE_EXHAUSTED") || !strings.Contains(r.stderr, "compactord --max-message-bytes") {
		t.Errorf("a server with a lower limit: exit %d, stderr %q; want %d naming compactord --max-message-bytes", r.code, r.stderr, exitUnfit)
	}
}

// TestHelpAndFlags: -h lists the exit statuses; --from's error lists every accepted value.
func TestHelpAndFlags(t *testing.T) {
	r := ctl(t, nil, "", "-h")
	for _, want := range []string{"Exit status:", "  3  invalid input", "  5  transient", "  7  cannot reach the server", "health", "(default 16MiB)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
	r = ctl(t, nil, "", "--local", "--from", "claude", "lift", fixture(t, airline))
	if r.code != exitUsage || !strings.Contains(r.stderr, "auto") || !strings.Contains(r.stderr, "ir,") || !strings.Contains(r.stderr, "bedrock") {
		t.Errorf("--from claude: %+v; want a usage error listing auto, ir and the providers", r)
	}
}

// TestJSONOutput: plan prints a table and plan --json JSON; --json prints every field, so a
// compaction with nothing to do says "compacted": false.
func TestJSONOutput(t *testing.T) {
	policy := []string{"--context-window", "128000", fixture(t, airline)}
	table := ctl(t, nil, "", append([]string{"--local", "plan"}, policy...)...)
	if !strings.HasPrefix(table.stdout, "action  none\n") {
		t.Errorf("plan: %q; want the table", table.stdout)
	}
	var plan map[string]any
	r := ctl(t, nil, "", append([]string{"--local", "plan", "--json"}, policy...)...)
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil || plan["action"] != "ACTION_NONE" || plan["prunedTokens"] != "0" {
		t.Errorf("plan --json: %v, %q", err, r.stdout)
	}
	var resp map[string]any
	r = ctl(t, nil, "", append([]string{"--local", "compact", "--json"}, policy...)...)
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp["compacted"] != false {
		t.Errorf("compact --json with nothing to do: %v, compacted %v; want false", err, resp["compacted"])
	}
}
