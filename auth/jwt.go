package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// JWTConfig configures bearer-token authentication.
type JWTConfig struct {
	// JWKSURL is fetched at start and refreshed in the background (and, at most every 30 s,
	// when a token names an unknown key id); JWKSFile is read instead, and re-read when it
	// changes. Exactly one is required.
	JWKSURL  string `yaml:"jwks_url"`
	JWKSFile string `yaml:"jwks_file"`
	// Issuer and Audience must match the token's iss and aud. Required.
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// Algorithms are the accepted signing algorithms; default RS256 and ES256.
	Algorithms []string `yaml:"algorithms"`
	// TenantClaim names the claim holding the tenant; default "tenant".
	TenantClaim string `yaml:"tenant_claim"`
	// Leeway is the clock skew allowed on exp, nbf and iat; default 30s.
	Leeway time.Duration `yaml:"leeway"`
	// Refresh is the JWKS URL's refresh interval; default 5m.
	Refresh time.Duration `yaml:"refresh"`
}

type jwtAuth struct {
	keys   func() jwt.Keyfunc
	parser *jwt.Parser
	claim  string
}

func newJWT(ctx context.Context, c JWTConfig, o Options) (*jwtAuth, error) {
	switch {
	case (c.JWKSURL == "") == (c.JWKSFile == ""):
		return nil, errors.New("auth: jwt mode needs exactly one of jwt.jwks_url and jwt.jwks_file")
	case c.Issuer == "" || c.Audience == "":
		return nil, errors.New("auth: jwt mode needs jwt.issuer and jwt.audience")
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = []string{"RS256", "ES256"}
	}
	for _, a := range c.Algorithms {
		if strings.EqualFold(a, "none") {
			return nil, errors.New(`auth: jwt.algorithms: "none" is never accepted`)
		}
	}
	if c.TenantClaim == "" {
		c.TenantClaim = "tenant"
	}
	if c.Leeway == 0 {
		c.Leeway = 30 * time.Second
	}
	if c.Refresh == 0 {
		c.Refresh = 5 * time.Minute
	}
	a := &jwtAuth{claim: c.TenantClaim, parser: jwt.NewParser(
		jwt.WithValidMethods(c.Algorithms), jwt.WithIssuer(c.Issuer), jwt.WithAudience(c.Audience),
		jwt.WithLeeway(c.Leeway), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(o.Now))}
	if c.JWKSFile != "" {
		w, err := watchFile(c.JWKSFile, o.Now, func(b []byte) (keyfunc.Keyfunc, error) {
			return keyfunc.NewJWKSetJSON(json.RawMessage(b))
		})
		if err != nil {
			return nil, fmt.Errorf("auth: jwt.jwks_file: %w", err)
		}
		a.keys = func() jwt.Keyfunc { return w.Get().Keyfunc }
		return a, nil
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	logger := o.Logger
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{c.JWKSURL}, keyfunc.Override{
		Client:            client,
		RefreshInterval:   c.Refresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(30*time.Second), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				logger.WarnContext(ctx, "refreshing the JWKS failed; the keys fetched before stay in use", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: jwt.jwks_url: %w", err)
	}
	a.keys = func() jwt.Keyfunc { return kf.Keyfunc }
	return a, nil
}

func (a *jwtAuth) Authenticate(ctx context.Context) (Identity, error) {
	v := header(ctx, AuthorizationKey)
	if v == "" {
		return Identity{}, errNoCredentials(AuthorizationKey + " is missing")
	}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return Identity{}, status.Error(codes.Unauthenticated, AuthorizationKey+" must be \"Bearer <token>\"")
	}
	claims := jwt.MapClaims{}
	if _, err := a.parser.ParseWithClaims(token, claims, a.keys()); err != nil {
		return Identity{}, unauthenticated(err)
	}
	tenant, _ := claims[a.claim].(string)
	sub, _ := claims.GetSubject()
	if sub == "" {
		sub = tenant
	}
	return Identity{Method: ModeJWT, Subject: sub, Tenant: tenant}, nil
}

// unauthenticated is the UNAUTHENTICATED answer for an invalid credential; err's text (from
// the verifier: "token is expired", "token has invalid audience") never holds the credential.
func unauthenticated(err error) error {
	return status.Error(codes.Unauthenticated, "invalid credentials: "+err.Error())
}
