package main

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/certtest"
	"github.com/compactord/compactord/internal/redistest"
)

// warned reports whether p logged a warning starting with prefix.
func warned(p *proc, prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.logs, func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return r["level"] == "WARN" && strings.HasPrefix(msg, prefix)
	})
}

// TestBinaryWarnsAboutExposure: serving beyond loopback without authentication warns, and so
// do API keys over plaintext beyond loopback; loopback alone does not.
func TestBinaryWarnsAboutExposure(t *testing.T) {
	const beyond = "listening on "
	if p := startBinary(t, nil, "--metrics-listen", "127.0.0.1:0"); warned(p, beyond) {
		t.Error("warned about exposure on loopback")
	}
	if p := startBinary(t, nil, "--listen", ":0"); !warned(p, beyond) {
		t.Error("no warning when serving every interface without authentication")
	}
	if p := startBinary(t, nil, "--metrics-listen", ":0"); !warned(p, beyond) {
		t.Error("no warning when serving metrics on every interface without authentication")
	}

	dir := t.TempDir()
	keys := filepath.Join(dir, "api-keys")
	certtest.WriteFile(t, keys, []byte(hashedKey("k")+" runner acme\n"))
	config := filepath.Join(dir, "compactord.yaml")
	certtest.WriteFile(t, config, []byte("auth:\n  mode: api-key\n  api_keys_file: "+keys+"\n"))
	const plaintext = "--auth=api-key over plaintext"
	if p := startBinary(t, nil, "--config", config, "--listen", ":0"); !warned(p, plaintext) || warned(p, beyond) {
		t.Error("API keys over plaintext beyond loopback: want the plaintext warning alone")
	}
	if p := startBinary(t, nil, "--config", config); warned(p, plaintext) {
		t.Error("warned about plaintext on loopback (a TLS-terminating proxy's place)")
	}
	ca := certtest.NewCA(t, "ca")
	cert, key := ca.Issue(t, certtest.Leaf{CommonName: "compactord"}).Write(t, dir, "server")
	if p := startBinary(t, nil, "--config", config, "--listen", ":0", "--tls-cert", cert, "--tls-key", key); warned(p, plaintext) {
		t.Error("warned about plaintext with TLS on")
	}
}

// TestBinaryReadyzChecksRedis: with a --redis-url nobody answers, the replica serves (the
// cache never fails a call) but is not ready, says why at start and in /readyz; with a Redis
// that answers, it is ready.
func TestBinaryReadyzChecksRedis(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	p := startBinary(t, nil, "--metrics-listen", "127.0.0.1:0", "--redis-url", "redis://"+closed+"/0")
	metrics := p.logged("metrics")[0]["addr"].(string)
	if code, body := get(t, "http://"+metrics+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "Redis") {
		t.Errorf("/readyz with no Redis answering: %d %q; want 503 naming Redis", code, body)
	}
	if code, _ := get(t, "http://"+metrics+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d; the process is alive", code)
	}
	if !warned(p, "the Redis cache has not answered") {
		t.Error("no start-up warning that Redis does not answer")
	}

	redistest.Need(t)
	n := redistest.Start(t, false)
	q := startBinary(t, nil, "--metrics-listen", "127.0.0.1:0", "--redis-url", fmt.Sprintf("redis://127.0.0.1:%d/0", n.Port))
	metrics = q.logged("metrics")[0]["addr"].(string)
	if code, body := get(t, "http://"+metrics+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with Redis answering: %d %q", code, body)
	}
	// Once Redis has answered, its outage degrades the cache, not readiness.
	n.Kill()
	time.Sleep(100 * time.Millisecond)
	if code, body := get(t, "http://"+metrics+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after Redis went away: %d %q; want 200 (calls go on without the cache)", code, body)
	}
}
