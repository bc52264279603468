package auth

import (
	"context"
	"crypto/x509"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// MTLSConfig maps client certificates to tenants.
type MTLSConfig struct {
	// Tenants maps a certificate's subject (its SPIFFE URI SAN, e.g.
	// "spiffe://example.org/ns/agents/sa/runner", else its common name) to a tenant. When
	// empty, the subject is the tenant; when not, a subject it does not list has none.
	Tenants map[string]string `yaml:"tenants"`
}

// mtls authenticates the client certificate the TLS handshake verified (the listener must
// require and verify client certificates: --tls-client-ca).
type mtls struct{ tenants map[string]string }

func newMTLS(c MTLSConfig) mtls { return mtls{c.Tenants} }

func (m mtls) Authenticate(ctx context.Context) (Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, errNoCredentials("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Identity{}, errNoCredentials("no verified client certificate")
	}
	subject := Subject(info.State.VerifiedChains[0][0])
	if subject == "" {
		return Identity{}, status.Error(codes.Unauthenticated, "the client certificate names no SPIFFE ID and no common name")
	}
	id := Identity{Method: ModeMTLS, Subject: subject, Tenant: subject}
	if len(m.tenants) > 0 {
		id.Tenant = m.tenants[subject]
	}
	return id, nil
}

// Subject is the identity a certificate names: its first spiffe:// URI SAN, else its common
// name.
func Subject(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if u.Scheme == "spiffe" {
			return u.String()
		}
	}
	return c.Subject.CommonName
}
