package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/internal/certtest"
	"github.com/compactord/compactord/service"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// server is compactord's gRPC stack with an Authenticator in front, on a loopback listener;
// it records the tenant of every call that reached the service.
type server struct {
	addr    string
	mu      sync.Mutex
	tenants []string
}

func serve(t *testing.T, a auth.Authenticator, opts ...grpc.ServerOption) *server {
	t.Helper()
	s := &server{}
	unary, stream := auth.Interceptors(a)
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.mu.Lock()
		s.tenants = append(s.tenants, auth.Tenant(ctx))
		s.mu.Unlock()
		return h(ctx, req)
	}
	g := service.NewGRPC(service.New(service.Options{}), service.GRPCOptions{
		UnaryInterceptors:  []grpc.UnaryServerInterceptor{unary, record},
		StreamInterceptors: []grpc.StreamServerInterceptor{stream},
		ServerOptions:      opts,
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Server.Stop)
	s.addr = lis.Addr().String()
	return s
}

// seen returns how many calls reached the service, and the tenant of the last.
func (s *server) seen() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tenants) == 0 {
		return 0, ""
	}
	return len(s.tenants), s.tenants[len(s.tenants)-1]
}

// call makes one Lift call with md and returns its error and the tenant the service saw.
func (s *server) call(t *testing.T, creds credentials.TransportCredentials, md ...string) (string, error) {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
	defer cancel()
	before, _ := s.seen()
	_, err = compactorv1.NewCompactorServiceClient(conn).Lift(ctx, &compactorv1.LiftRequest{
		Body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`})
	after, tenant := s.seen()
	if err != nil {
		if after != before {
			t.Errorf("a refused call reached the service")
		}
		return "", err
	}
	// Health needs no credentials whatever the mode.
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without credentials: %v", err)
	}
	return tenant, nil
}

func wantCode(t *testing.T, name string, err error, want codes.Code, secrets ...string) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: %v, want %v", name, err, want)
	}
	for _, s := range secrets {
		if s != "" && err != nil && strings.Contains(err.Error(), s) {
			t.Errorf("%s: the error repeats the credential", name)
		}
	}
}

// jwks serves a JWK Set that a test can change, counting fetches.
type jwks struct {
	mu      sync.Mutex
	body    []byte
	fetches atomic.Int32
}

func (j *jwks) set(keys ...map[string]string) {
	b, _ := json.Marshal(map[string]any{"keys": keys})
	j.mu.Lock()
	j.body = b
	j.mu.Unlock()
}

func (j *jwks) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	j.fetches.Add(1)
	j.mu.Lock()
	defer j.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(j.body)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]string {
	b, err := k.Bytes() // 0x04 || X || Y
	if err != nil {
		panic(err)
	}
	return map[string]string{"kty": "EC", "kid": kid, "alg": "ES256", "use": "sig", "crv": "P-256",
		"x": b64(b[1:33]), "y": b64(b[33:65])}
}

func sign(t *testing.T, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys := &jwks{}
	keys.set(rsaJWK("k1", &rsaKey.PublicKey))
	hs := httptest.NewServer(keys)
	defer hs.Close()

	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeJWT, Gateways: []string{"gateway-svc"},
		JWT: auth.JWTConfig{JWKSURL: hs.URL, Issuer: "https://issuer.test", Audience: "compactord"}}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, a)
	now := time.Now()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "https://issuer.test", "aud": "compactord", "sub": "agent-7", "tenant": "acme",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(nil))
	pubDER := rsaKey.PublicKey.N.Bytes()
	tests := []struct {
		name   string
		md     []string
		code   codes.Code
		tenant string
	}{
		{"valid", []string{"authorization", "Bearer " + good}, codes.OK, "acme"},
		{"valid, asking for its own tenant", []string{"authorization", "Bearer " + good, auth.TenantKey, "acme"}, codes.OK, "acme"},
		{"spoofed tenant header", []string{"authorization", "Bearer " + good, auth.TenantKey, "globex"}, codes.PermissionDenied, ""},
		{"no credentials, tenant header only", []string{auth.TenantKey, "acme"}, codes.Unauthenticated, ""},
		{"not bearer", []string{"authorization", "Basic " + good}, codes.Unauthenticated, ""},
		{"expired beyond the leeway", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) {
			c["exp"] = now.Add(-2 * time.Minute).Unix()
		}))}, codes.Unauthenticated, ""},
		{"expired within the leeway", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) {
			c["exp"] = now.Add(-10 * time.Second).Unix()
		}))}, codes.OK, "acme"},
		{"no expiry", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) { delete(c, "exp") }))}, codes.Unauthenticated, ""},
		{"wrong audience", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) { c["aud"] = "other-service" }))}, codes.Unauthenticated, ""},
		{"wrong issuer", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }))}, codes.Unauthenticated, ""},
		{"signed by another key", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", otherKey, claims(nil))}, codes.Unauthenticated, ""},
		{"HS256 keyed with the public key", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodHS256, "k1", pubDER, claims(nil))}, codes.Unauthenticated, ""},
		{"alg none", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodNone, "k1", jwt.UnsafeAllowNoneSignatureType, claims(nil))}, codes.Unauthenticated, ""},
		{"no tenant claim", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) { delete(c, "tenant") }))}, codes.PermissionDenied, ""},
		{"gateway acting for a tenant", []string{"authorization", "Bearer " + sign(t, jwt.SigningMethodRS256, "k1", rsaKey, claims(func(c jwt.MapClaims) {
			c["sub"] = "gateway-svc"
			delete(c, "tenant")
		})), auth.TenantKey, "globex"}, codes.OK, "globex"},
	}
	for _, tt := range tests {
		got, err := srv.call(t, nil, tt.md...)
		token := ""
		if len(tt.md) > 1 {
			token = strings.TrimPrefix(strings.TrimPrefix(tt.md[1], "Bearer "), "Basic ")
		}
		wantCode(t, tt.name, err, tt.code, token)
		if err == nil && got != tt.tenant {
			t.Errorf("%s: tenant %q, want %q", tt.name, got, tt.tenant)
		}
	}

	// Key rotation: the issuer publishes a new key; a token naming it makes compactord fetch
	// the set again instead of refusing it.
	keys.set(rsaJWK("k1", &rsaKey.PublicKey), ecJWK("k2", &ecKey.PublicKey))
	before := keys.fetches.Load()
	rotated := sign(t, jwt.SigningMethodES256, "k2", ecKey, claims(nil))
	if got, err := srv.call(t, nil, "authorization", "Bearer "+rotated); err != nil || got != "acme" {
		t.Errorf("a token signed with the rotated-in key: %v, tenant %q", err, got)
	}
	if keys.fetches.Load() == before {
		t.Error("the JWKS was not fetched again for an unknown key id")
	}
}

func TestJWTConfigErrors(t *testing.T) {
	for _, c := range []auth.JWTConfig{
		{Issuer: "i", Audience: "a"},
		{JWKSURL: "http://127.0.0.1:1/jwks", JWKSFile: "/x", Issuer: "i", Audience: "a"},
		{JWKSFile: "/x", Audience: "a"},
		{JWKSFile: "/x", Issuer: "i", Audience: "a", Algorithms: []string{"none"}},
		{JWKSFile: "/nonexistent/jwks.json", Issuer: "i", Audience: "a"},
	} {
		if _, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeJWT, JWT: c}, auth.Options{}); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := auth.New(context.Background(), auth.Config{Mode: "oauth"}, auth.Options{}); err == nil {
		t.Error("unknown mode: no error")
	}
}

// TestJWKSFile: keys from a file, re-read when it changes.
func TestJWKSFile(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	file := filepath.Join(t.TempDir(), "jwks.json")
	write := func(k map[string]string) {
		b, _ := json.Marshal(map[string]any{"keys": []any{k}})
		certtest.WriteFile(t, file, b)
	}
	write(ecJWK("a", &k1.PublicKey))
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeJWT,
		JWT: auth.JWTConfig{JWKSFile: file, Issuer: "i", Audience: "a", Algorithms: []string{"ES256"}}}, auth.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, a)
	tok := func(kid string, k *ecdsa.PrivateKey) string {
		return "Bearer " + sign(t, jwt.SigningMethodES256, kid, k, jwt.MapClaims{"iss": "i", "aud": "a", "tenant": "t1",
			"iat": now().Unix(), "exp": now().Add(time.Hour).Unix()})
	}
	if _, err := srv.call(t, nil, "authorization", tok("a", k1)); err != nil {
		t.Fatal(err)
	}
	write(ecJWK("b", &k2.PublicKey))
	os.Chtimes(file, time.Now().Add(time.Second), time.Now().Add(time.Second))
	clock.Add(int64(10 * time.Second))
	if _, err := srv.call(t, nil, "authorization", tok("b", k2)); err != nil {
		t.Errorf("after the JWKS file changed, a token of the new key: %v", err)
	}
	_, err = srv.call(t, nil, "authorization", tok("a", k1))
	wantCode(t, "a token of the removed key", err, codes.Unauthenticated)
}

func keyLine(key, name, tenant string, gateway bool) string {
	sum := sha256.Sum256([]byte(key))
	line := fmt.Sprintf("sha256:%s %s %s", hex.EncodeToString(sum[:]), name, tenant)
	if gateway {
		line += " gateway"
	}
	return line + "\n"
}

func TestAPIKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	certtest.WriteFile(t, file, []byte("# runners\n"+keyLine("key-acme", "runner", "acme", false)+keyLine("key-gw", "edge", "-", true)))
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeAPIKey, APIKeysFile: file},
		auth.Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, a)
	if got, err := srv.call(t, nil, "x-api-key", "key-acme"); err != nil || got != "acme" {
		t.Errorf("valid key: %v, tenant %q", err, got)
	}
	_, err = srv.call(t, nil, "x-api-key", "key-acme", auth.TenantKey, "globex")
	wantCode(t, "spoofed tenant", err, codes.PermissionDenied)
	_, err = srv.call(t, nil, "x-api-key", "key-acmf")
	wantCode(t, "unknown key", err, codes.Unauthenticated, "key-acmf")
	_, err = srv.call(t, nil)
	wantCode(t, "no key", err, codes.Unauthenticated)
	if got, err := srv.call(t, nil, "x-api-key", "key-gw", auth.TenantKey, "globex"); err != nil || got != "globex" {
		t.Errorf("gateway key: %v, tenant %q", err, got)
	}
	_, err = srv.call(t, nil, "x-api-key", "key-gw")
	wantCode(t, "gateway key naming no tenant", err, codes.PermissionDenied)

	// Revoke a key and add one: the file is re-read when it changes.
	certtest.WriteFile(t, file, []byte(keyLine("key-new", "runner2", "acme", false)+keyLine("key-gw", "edge", "-", true)))
	os.Chtimes(file, time.Now().Add(time.Second), time.Now().Add(time.Second))
	clock.Add(int64(10 * time.Second))
	_, err = srv.call(t, nil, "x-api-key", "key-acme")
	wantCode(t, "revoked key", err, codes.Unauthenticated)
	if got, err := srv.call(t, nil, "x-api-key", "key-new"); err != nil || got != "acme" {
		t.Errorf("added key: %v, tenant %q", err, got)
	}
	// A broken file keeps the keys in use.
	certtest.WriteFile(t, file, []byte("sha256:zz broken\n"))
	clock.Add(int64(10 * time.Second))
	if _, err := srv.call(t, nil, "x-api-key", "key-new"); err != nil {
		t.Errorf("after a broken write: %v", err)
	}
}

func TestParseAPIKeys(t *testing.T) {
	for _, bad := range []string{"", "# only comments\n", "sha256:abcd runner acme\n", "plain-key runner acme\n",
		keyLine("k", "n", "-", false), strings.TrimSuffix(keyLine("k", "n", "t", false), "\n") + " admin\n"} {
		if _, err := auth.ParseAPIKeys([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "sha256:") && strings.Contains(bad, "sha256:abcd") && strings.Contains(err.Error(), "abcd") {
			t.Errorf("the error repeats the file's content: %v", err)
		}
	}
}

func TestMTLS(t *testing.T) {
	ca := certtest.NewCA(t, "mesh CA")
	serverCert := ca.Issue(t, certtest.Leaf{CommonName: "compactord"}).TLS(t)
	creds := grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}))
	client := func(l certtest.Leaf) credentials.TransportCredentials {
		l.Client = true
		return credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
			Certificates: []tls.Certificate{ca.Issue(t, l).TLS(t)}})
	}
	spiffe := "spiffe://mesh.test/ns/agents/sa/runner"

	mapped, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeMTLS,
		MTLS: auth.MTLSConfig{Tenants: map[string]string{spiffe: "acme"}}}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, mapped, creds)
	if got, err := srv.call(t, client(certtest.Leaf{CommonName: "ignored", URIs: []string{spiffe}})); err != nil || got != "acme" {
		t.Errorf("SPIFFE ID mapped to acme: %v, tenant %q", err, got)
	}
	_, err = srv.call(t, client(certtest.Leaf{URIs: []string{spiffe}}), auth.TenantKey, "globex")
	wantCode(t, "spoofed tenant", err, codes.PermissionDenied)
	_, err = srv.call(t, client(certtest.Leaf{CommonName: "stranger"}))
	wantCode(t, "an identity the map does not list", err, codes.PermissionDenied)

	plain, _ := auth.New(context.Background(), auth.Config{Mode: auth.ModeMTLS}, auth.Options{})
	srv = serve(t, plain, creds)
	if got, err := srv.call(t, client(certtest.Leaf{CommonName: "team-blue"})); err != nil || got != "team-blue" {
		t.Errorf("common name as tenant: %v, tenant %q", err, got)
	}
	// Without TLS at all, the mode refuses.
	srv = serve(t, plain)
	_, err = srv.call(t, nil, auth.TenantKey, "team-blue")
	wantCode(t, "plaintext", err, codes.Unauthenticated)
}

func TestValidTenant(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"acme", true},
		{"spiffe://cluster.local/ns/agents/sa/runner", true},
		{"tenant_42.eu-west@org+x=y", true},
		{strings.Repeat("a", auth.MaxTenantBytes), true},
		{strings.Repeat("a", auth.MaxTenantBytes+1), false},
		{"two words", false},
		{"tab\there", false},
		{"nul\x00", false},
		{"é", false},
	} {
		if err := auth.ValidTenant(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidTenant(%.40q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestTenantHeaderChecked: a tenant name beyond MaxTenantBytes, or not visible ASCII, is
// refused with INVALID_ARGUMENT naming the header, with authentication off and from a
// gateway alike, before any call reaches the service.
func TestTenantHeaderChecked(t *testing.T) {
	long := strings.Repeat("t", 1<<10) // past MaxTenantBytes, within the transport's header bound
	none := serve(t, nil)
	if got, err := none.call(t, nil, auth.TenantKey, "acme"); err != nil || got != "acme" {
		t.Errorf("a valid tenant: %v, tenant %q", err, got)
	}
	for _, bad := range []string{long, "acme corp"} {
		_, err := none.call(t, nil, auth.TenantKey, bad)
		wantCode(t, "a bad tenant header", err, codes.InvalidArgument)
		if field := badRequestField(err); field != auth.TenantKey {
			t.Errorf("BadRequest field %q, want %s", field, auth.TenantKey)
		}
		if len(status.Convert(err).Message()) > 512 {
			t.Errorf("a %d-byte message", len(status.Convert(err).Message()))
		}
	}
	file := filepath.Join(t.TempDir(), "keys")
	certtest.WriteFile(t, file, []byte(keyLine("key-gw", "edge", "-", true)))
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeAPIKey, APIKeysFile: file}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = serve(t, a).call(t, nil, "x-api-key", "key-gw", auth.TenantKey, long)
	wantCode(t, "a gateway naming a bad tenant", err, codes.InvalidArgument)
}

// badRequestField returns the first field a BadRequest detail of err names.
func badRequestField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}
