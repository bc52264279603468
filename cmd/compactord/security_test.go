package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/certtest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func hashedKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func planRequest() *compactorv1.PlanRequest {
	return &compactorv1.PlanRequest{
		Messages: []*compactorv1.Message{{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "confidential request text"}}}}}},
		Policy: &compactorv1.Policy{ContextWindow: 8000},
	}
}

// TestBinaryTLSAPIKeysAndLimits runs the binary as an operator would in a shared cluster:
// TLS from files, API keys, per-tenant limits, probes on the metrics port. It checks
// handshakes, credentials, a spoofed tenant, a tripped limit, certificate rotation under an
// open connection, and that neither keys nor conversation text reach the logs.
func TestBinaryTLSAPIKeysAndLimits(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "compactord test CA")
	certFile, keyFile := ca.Issue(t, certtest.Leaf{CommonName: "first"}).Write(t, dir, "server")
	keysFile := filepath.Join(dir, "api-keys")
	certtest.WriteFile(t, keysFile, []byte(hashedKey("key-of-acme")+" runner acme\n"+hashedKey("key-of-globex")+" batch globex\n"))
	config := filepath.Join(dir, "compactord.yaml")
	certtest.WriteFile(t, config, []byte(fmt.Sprintf(`auth:
  mode: api-key
  api_keys_file: %s
limits:
  default:
    calls_per_second: 100
  tenants:
    globex:
      calls_per_second: 1
      burst: 1
`, keysFile)))
	p := startBinary(t, nil, "--config", config, "--tls-cert", certFile, "--tls-key", keyFile, "--metrics-listen", "127.0.0.1:0")
	metricsAddr := p.logged("metrics")[0]["addr"].(string)

	tlsCreds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(tlsCreds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := compactorv1.NewCompactorServiceClient(conn)
	withKey := func(key string, kv ...string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), append([]string{"x-api-key", key}, kv...)...)
	}

	if _, err := client.Plan(withKey("key-of-acme"), planRequest()); err != nil {
		t.Fatalf("Plan with acme's key over TLS: %v", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without credentials: %v", err)
	}
	_, err = client.Plan(metadata.AppendToOutgoingContext(t.Context(), "x-compactor-tenant", "acme"), planRequest())
	wantStatus(t, "the tenant header alone", err, codes.Unauthenticated)
	_, err = client.Plan(withKey("key-of-acme", "x-compactor-tenant", "globex"), planRequest())
	wantStatus(t, "acme's key asking for globex", err, codes.PermissionDenied)
	_, err = client.Plan(withKey("not-a-key"), planRequest())
	wantStatus(t, "an unknown key", err, codes.Unauthenticated)

	// globex may make one call per second.
	if _, err := client.Plan(withKey("key-of-globex"), planRequest()); err != nil {
		t.Fatal(err)
	}
	_, err = client.Plan(withKey("key-of-globex"), planRequest())
	wantStatus(t, "globex's second call in a second", err, codes.ResourceExhausted)
	var named bool
	for _, d := range status.Convert(err).Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && strings.HasPrefix(q.Violations[0].Description, "calls_per_second") {
			named = true
		}
	}
	if !named {
		t.Errorf("the refusal does not name calls_per_second in a QuotaFailure: %v", status.Convert(err).Details())
	}

	// Plaintext to a TLS port fails.
	plain, _ := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer plain.Close()
	if _, err := healthpb.NewHealthClient(plain).Check(t.Context(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a plaintext client was served on the TLS port")
	}

	// Probes on the metrics port, and the refusal counted under globex's own label.
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, "http://"+metricsAddr+path); code != http.StatusOK {
			t.Errorf("%s: %d", path, code)
		}
	}
	_, body := get(t, "http://"+metricsAddr+"/metrics")
	if !strings.Contains(body, `compactord_limit_refusals_total{limit="calls_per_second",tenant="globex"} 1`) {
		t.Errorf("metrics lack the refusal of globex:\n%s", grepLines(body, "compactord_limit"))
	}

	// Rotate the certificate: new connections get it, the open one keeps working.
	next := ca.Issue(t, certtest.Leaf{CommonName: "second"})
	certtest.WriteFile(t, keyFile, next.KeyPEM)
	certtest.WriteFile(t, certFile, next.CertPEM)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := tls.Dial("tcp", p.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
		if err == nil {
			cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName
			c.Close()
			if cn == "second" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not served within 15 s (last error %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := client.Plan(withKey("key-of-acme"), planRequest()); err != nil {
		t.Errorf("the connection opened before the rotation: %v", err)
	}
	if len(p.logged("TLS files reloaded")) == 0 {
		t.Error("no log line for the reload")
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.logs {
		b, _ := json.Marshal(r)
		for _, secret := range []string{"key-of-acme", "key-of-globex", "not-a-key", "confidential request text"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%q in the log: %s", secret, b)
			}
		}
	}
}

func wantStatus(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBinaryWarnsWithoutAuth: the zero-config default serves without authentication and
// says so at start.
func TestBinaryWarnsWithoutAuth(t *testing.T) {
	p := startBinary(t, nil)
	p.mu.Lock()
	recs := slices.Clone(p.logs)
	p.mu.Unlock()
	found := false
	for _, r := range recs {
		if msg, _ := r["msg"].(string); strings.HasPrefix(msg, "authentication is OFF") && r["level"] == "WARN" {
			found = true
		}
	}
	if !found {
		t.Error("no warning that authentication is off")
	}
	if s := p.logged("serving"); len(s) != 1 || s[0]["auth"] != "none" || s[0]["tls"] != "off" {
		t.Errorf("serving line: %v", s)
	}
}

func TestBinaryRejectsBadSecurityConfig(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	certFile, keyFile := ca.Issue(t, certtest.Leaf{CommonName: "s"}).Write(t, dir, "s")
	badConfig := filepath.Join(dir, "bad.yaml")
	certtest.WriteFile(t, badConfig, []byte("auth:\n  mode: api-key\n  api_key_file: /typo\n"))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certFile}, "--tls-key"},
		{[]string{"--tls-client-ca", certFile}, "--tls-client-ca"},
		{[]string{"--auth", "mtls", "--tls-cert", certFile, "--tls-key", keyFile}, "--tls-client-ca"},
		{[]string{"--auth", "api-key"}, "api_keys_file"},
		{[]string{"--auth", "oauth"}, "unknown mode"},
		{[]string{"--config", badConfig}, "api_key_file"},
		{[]string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", keyFile}, "none.crt"},
	} {
		cmd := exec.Command(binary(t), append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", ""}, tt.args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%q: %v, output %q; want a failure naming %q", tt.args, err, out, tt.want)
		}
	}
	_ = os.Remove(badConfig)
}
