package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/bytesize"
	"github.com/compactord/compactord/service"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// backend is what the commands call: a server over gRPC, or the service in-process.
type backend interface {
	Plan(context.Context, *compactorv1.PlanRequest) (*compactorv1.PlanResponse, error)
	Compact(context.Context, *compactorv1.CompactRequest) (*compactorv1.CompactResponse, error)
	Lower(context.Context, *compactorv1.LowerRequest) (*compactorv1.LowerResponse, error)
	Lift(context.Context, *compactorv1.LiftRequest) (*compactorv1.LiftResponse, error)
	Expand(context.Context, *compactorv1.ExpandRequest) (*compactorv1.ExpandResponse, error)
}

// connFlags say where the backend is and how to reach it.
type connFlags struct {
	addr          string
	local         bool
	timeout       time.Duration
	tenant        string
	tokenFile     string
	apiKeyFile    string
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	// maxMessageBytes bounds the input, as compactord's --max-message-bytes bounds a request.
	maxMessageBytes bytesize.Size
}

func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "", "the server's address (default $COMPACTORD_ADDR, else localhost:50051)")
	fs.BoolVar(&f.local, "local", false, "run the engine and the extractive summarizer in-process; no server")
	fs.DurationVar(&f.timeout, "timeout", defaultTimeout, "deadline of the whole command (its calls together)")
	fs.StringVar(&f.tenant, "tenant", "", "the tenant to act for (x-compactor-tenant; default $COMPACTORD_TENANT)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding a bearer token (JWT); without it, the token itself from $COMPACTORD_TOKEN")
	fs.StringVar(&f.apiKeyFile, "api-key-file", "", "file holding an API key; without it, the key itself from $COMPACTORD_API_KEY")
	fs.BoolVar(&f.tls, "tls", false, "connect over TLS (implied by --tls-ca and --tls-cert)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CAs that sign the server's certificate (default: the system roots)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate, for mTLS (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "name to verify in the server's certificate (default: the address's host)")
	f.maxMessageBytes = service.DefaultMaxMessageBytes
	fs.Var(&f.maxMessageBytes, "max-message-bytes", "largest input read, as the server's request limit (compactord --max-message-bytes, same default); raise both together")
}

func (f *connFlags) check() error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if f.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	if f.maxMessageBytes <= 0 {
		return errors.New("--max-message-bytes must be positive")
	}
	if f.local && (f.addr != "" || f.tls || f.tlsCA != "" || f.tlsCert != "") {
		return errors.New("--local runs no server: drop --addr and the TLS flags")
	}
	return nil
}

// connect sets c.backend and c.close. Remotely it also connects, so that a fault in the
// address or TLS is reported as such (a configError) before any call, never retried.
func (c *command) connect(ctx context.Context) error {
	f := &c.conn
	if f.local {
		c.backend, c.close = service.New(service.Options{}), func() {}
		return nil
	}
	creds, err := f.credentials()
	if err != nil {
		return usageError{err}
	}
	md, err := c.callMetadata()
	if err != nil {
		return usageError{err}
	}
	addr := cmp.Or(f.addr, c.getenv("COMPACTORD_ADDR"), "localhost:50051")
	p := &probe{}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(probedCreds{TransportCredentials: creds, p: p}),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(max(minRecvBytes, 2*int(f.maxMessageBytes)))),
	}
	target := addr
	if !strings.Contains(addr, ":///") && !strings.HasPrefix(addr, "unix:") {
		// host:port, resolved by the probe's dialer, so a DNS failure is seen as one.
		target = "passthrough:///" + addr
		opts = append(opts, grpc.WithContextDialer(p.dial))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return usageError{fmt.Errorf("--addr %q: %w", addr, err)}
	}
	if err := awaitConnection(ctx, conn, p, f, addr); err != nil {
		conn.Close()
		return err
	}
	c.backend = remote{client: compactorv1.NewCompactorServiceClient(conn), md: md}
	c.health = healthpb.NewHealthClient(conn)
	c.close = func() { conn.Close() }
	return nil
}

// minRecvBytes is the smallest bound on a response: a lowered or compacted conversation
// is about as large as the request, which --max-message-bytes bounds.
const minRecvBytes = 64 << 20

// serviceConfig retries UNAVAILABLE (with the server's backoff hints honoured by gRPC's own
// retry throttling) a few times within each call's deadline.
const serviceConfig = `{"methodConfig": [{
  "name": [{"service": "compactor.v1.CompactorService"}],
  "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.2s", "maxBackoff": "3s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// usesTLS reports whether the connection is over TLS (--tls, or implied by a TLS file).
func (f *connFlags) usesTLS() bool { return f.tls || f.tlsCA != "" || f.tlsCert != "" }

func (f *connFlags) credentials() (credentials.TransportCredentials, error) {
	if !f.usesTLS() {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.tlsServerName}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.tlsCA)
		}
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// callMetadata is the metadata every call carries: tenant and credentials.
func (c *command) callMetadata() (metadata.MD, error) {
	md := metadata.MD{}
	if t := cmp.Or(c.conn.tenant, c.getenv("COMPACTORD_TENANT")); t != "" {
		md.Set(service.TenantMetadataKey, t)
	}
	token, err := secret(c.conn.tokenFile, c.getenv("COMPACTORD_TOKEN"), "--token-file")
	if err != nil {
		return nil, err
	}
	if token != "" {
		md.Set("authorization", "Bearer "+token)
	}
	key, err := secret(c.conn.apiKeyFile, c.getenv("COMPACTORD_API_KEY"), "--api-key-file")
	if err != nil {
		return nil, err
	}
	if key != "" {
		md.Set("x-api-key", key)
	}
	return md, nil
}

// secret is the trimmed content of file, else env. Its value is never printed.
func secret(file, env, flagName string) (string, error) {
	if file == "" {
		return strings.TrimSpace(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// remote is a backend over a gRPC connection; every call carries md.
type remote struct {
	client compactorv1.CompactorServiceClient
	md     metadata.MD
}

func (r remote) ctx(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, r.md)
}

func (r remote) Plan(ctx context.Context, req *compactorv1.PlanRequest) (*compactorv1.PlanResponse, error) {
	return r.client.Plan(r.ctx(ctx), req)
}

func (r remote) Compact(ctx context.Context, req *compactorv1.CompactRequest) (*compactorv1.CompactResponse, error) {
	return r.client.Compact(r.ctx(ctx), req)
}

func (r remote) Lower(ctx context.Context, req *compactorv1.LowerRequest) (*compactorv1.LowerResponse, error) {
	return r.client.Lower(r.ctx(ctx), req)
}

func (r remote) Lift(ctx context.Context, req *compactorv1.LiftRequest) (*compactorv1.LiftResponse, error) {
	return r.client.Lift(r.ctx(ctx), req)
}

func (r remote) Expand(ctx context.Context, req *compactorv1.ExpandRequest) (*compactorv1.ExpandResponse, error) {
	return r.client.Expand(r.ctx(ctx), req)
}
