// Package auth authenticates gRPC callers and decides the tenant each call acts for.
//
// A call's identity comes from one of three modes, chosen by configuration: the client
// certificate of a mutual-TLS connection (its SPIFFE URI SAN, else its common name), a bearer
// JWT verified against a JWKS, or a static API key from a file of hashed keys. The tenant is
// the identity's; the x-compactor-tenant header may only repeat it, unless the identity is a
// gateway allowed to act for any tenant. Without credentials a call fails UNAUTHENTICATED;
// a valid identity asking for another tenant fails PERMISSION_DENIED. Mode "none" trusts the
// header, for local development only.
//
// The interceptors come from go-grpc-middleware (auth, selector); tokens are verified by
// golang-jwt with keys from keyfunc/jwkset. Credentials never reach logs or errors.
package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/internal/grpcerr"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys of the credentials and of the tenant a call asks for.
const (
	TenantKey        = "x-compactor-tenant"
	AuthorizationKey = "authorization"
	APIKeyKey        = "x-api-key"
)

// Modes of authentication.
const (
	ModeNone   = "none"
	ModeMTLS   = "mtls"
	ModeJWT    = "jwt"
	ModeAPIKey = "api-key"
)

// Identity is an authenticated caller.
type Identity struct {
	// Method is the mode that authenticated it.
	Method string
	// Subject names it: a SPIFFE ID or common name, a JWT's sub, an API key's name. Safe to
	// log: never a credential.
	Subject string
	// Tenant is the tenant it belongs to; empty for a gateway that has none of its own.
	Tenant string
	// Gateway identities may act for any tenant, named by the x-compactor-tenant header.
	Gateway bool
}

// Authenticator reads the identity of a call's caller. It returns a status error:
// UNAUTHENTICATED for missing or invalid credentials, PERMISSION_DENIED for a valid
// identity that may not call.
type Authenticator interface {
	Authenticate(ctx context.Context) (Identity, error)
}

// Config is the auth section of the --config file.
type Config struct {
	// Mode is none, mtls, jwt or api-key; the --auth flag overrides it.
	Mode string `yaml:"mode"`
	// Gateways are the subjects that may act for any tenant.
	Gateways []string   `yaml:"gateways"`
	MTLS     MTLSConfig `yaml:"mtls"`
	JWT      JWTConfig  `yaml:"jwt"`
	// APIKeysFile is the file of hashed API keys (see LoadAPIKeys), re-read when it changes.
	APIKeysFile string `yaml:"api_keys_file"`
}

// Options are what an Authenticator needs from the process.
type Options struct {
	// Logger receives key-refresh failures (never a credential); nil discards them.
	Logger *slog.Logger
	// HTTPClient fetches a JWKS URL; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns the Authenticator of cfg.Mode, or nil for ModeNone. ctx bounds background
// work (JWKS refresh).
func New(ctx context.Context, cfg Config, o Options) (Authenticator, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var (
		a   Authenticator
		err error
	)
	switch cfg.Mode {
	case ModeNone, "":
		return nil, nil
	case ModeMTLS:
		a = newMTLS(cfg.MTLS)
	case ModeJWT:
		a, err = newJWT(ctx, cfg.JWT, o)
	case ModeAPIKey:
		a, err = newAPIKeys(cfg.APIKeysFile, o.Now)
	default:
		return nil, fmt.Errorf("auth: unknown mode %q (want none, mtls, jwt or api-key)", cfg.Mode)
	}
	if err != nil {
		return nil, err
	}
	if len(cfg.Gateways) > 0 {
		a = gateways{a, cfg.Gateways}
	}
	return a, nil
}

// gateways marks the configured subjects as gateways.
type gateways struct {
	Authenticator
	subjects []string
}

func (g gateways) Authenticate(ctx context.Context) (Identity, error) {
	id, err := g.Authenticator.Authenticate(ctx)
	if err == nil && slices.Contains(g.subjects, id.Subject) {
		id.Gateway = true
	}
	return id, err
}

type ctxKey struct{}

// Call is what authentication decided for a call: who called, and for which tenant.
type Call struct {
	Identity Identity
	Tenant   string
}

// FromContext returns the authenticated call, if the call was authenticated.
func FromContext(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(ctxKey{}).(Call)
	return c, ok
}

// Tenant returns the tenant a call acts for: the authenticated one, else (with no
// authentication) the x-compactor-tenant header, else "".
func Tenant(ctx context.Context) string {
	if c, ok := FromContext(ctx); ok {
		return c.Tenant
	}
	return header(ctx, TenantKey)
}

func header(ctx context.Context, key string) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(key); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// MaxTenantBytes bounds the length of a tenant's name.
const MaxTenantBytes = 256

// ValidTenant checks a tenant's name: at most MaxTenantBytes bytes of visible ASCII
// (letters, digits and punctuation; no space, no control character). "" is the anonymous
// tenant of unauthenticated calls. Names are part of cache keys, limits and log lines: they
// stay short and printable.
func ValidTenant(name string) error {
	if len(name) > MaxTenantBytes {
		return fmt.Errorf("a tenant name has at most %d bytes, not %d", MaxTenantBytes, len(name))
	}
	for i := range len(name) {
		if c := name[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("a tenant name is visible ASCII (letters, digits, punctuation); byte %d is %#x", i, c)
		}
	}
	return nil
}

// badTenant is the INVALID_ARGUMENT answer to a call acting for a tenant whose name
// ValidTenant refuses: a BadRequest naming the tenant header.
func badTenant(err error) error {
	return grpcerr.WithDetails(status.New(codes.InvalidArgument, TenantKey+": "+err.Error()),
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: TenantKey, Description: err.Error()}}})
}

// authorize decides the tenant of an authenticated call.
func authorize(ctx context.Context, id Identity) (string, error) {
	asked := header(ctx, TenantKey)
	switch {
	case asked == "" || asked == id.Tenant:
		if id.Tenant == "" {
			return "", status.Errorf(codes.PermissionDenied, "%s %s has no tenant of its own: name one in %s", id.Method, clip.Quote(id.Subject), TenantKey)
		}
		if err := ValidTenant(id.Tenant); err != nil {
			return "", status.Errorf(codes.PermissionDenied, "%s %s: its tenant cannot be used: %v", id.Method, clip.Quote(id.Subject), err)
		}
		return id.Tenant, nil
	case id.Gateway:
		if err := ValidTenant(asked); err != nil {
			return "", badTenant(err)
		}
		return asked, nil
	}
	return "", status.Errorf(codes.PermissionDenied, "%s %s may not act for tenant %s", id.Method, clip.Quote(id.Subject), clip.Quote(asked))
}

// Interceptors authenticate every call but the health service's (kubelets and load
// balancers probe it without credentials) and put the Call in its context. With a nil
// Authenticator (mode none) they only check the tenant the header names (ValidTenant).
func Interceptors(a Authenticator) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	if a == nil {
		check := func(ctx context.Context) (context.Context, error) {
			if err := ValidTenant(header(ctx, TenantKey)); err != nil {
				return nil, badTenant(err)
			}
			return ctx, nil
		}
		return selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(check), notHealth),
			selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(check), notHealth)
	}
	fn := func(ctx context.Context) (context.Context, error) {
		id, err := a.Authenticate(ctx)
		if err != nil {
			if _, ok := status.FromError(err); !ok {
				err = status.Error(codes.Unauthenticated, err.Error())
			}
			return nil, err
		}
		t, err := authorize(ctx, id)
		if err != nil {
			return nil, err
		}
		return context.WithValue(ctx, ctxKey{}, Call{Identity: id, Tenant: t}), nil
	}
	return selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(fn), notHealth),
		selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(fn), notHealth)
}

// errNoCredentials is the UNAUTHENTICATED answer to a call without credentials.
func errNoCredentials(what string) error {
	return status.Errorf(codes.Unauthenticated, "no credentials: %s", what)
}
