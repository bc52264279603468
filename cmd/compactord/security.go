package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/tlsfiles"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// security is what TLS, authentication, per-tenant limits and load shedding add to the
// server: its interceptors (auth, then tenant limits), credentials, the admission of calls
// and their requests' memory (shedding), and the admission of summarizer calls.
type security struct {
	mode, tls     string
	unary         []grpc.UnaryServerInterceptor
	stream        []grpc.StreamServerInterceptor
	serverOptions []grpc.ServerOption
	calls         service.Admitter
	admit         service.SummaryAdmitter
}

func setupSecurity(ctx context.Context, cfg config, fc fileConfig, rdb redis.UniversalClient, m *metrics.Recorder, logger *slog.Logger) (security, error) {
	sec := security{mode: authMode(cfg, fc), tls: "off"}
	if cfg.TLSCert != "" {
		files, err := tlsfiles.New(tlsfiles.Files{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, ClientCAFile: cfg.TLSClientCA,
			OnReload: func(err error) {
				if err != nil {
					logger.Warn("TLS files changed but could not be loaded; the previous ones stay in use", "err", err)
					return
				}
				logger.Info("TLS files reloaded")
			}})
		if err != nil {
			return sec, fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		sec.tls = "on"
		if cfg.TLSClientCA != "" {
			sec.tls = "mutual"
		}
		sec.serverOptions = append(sec.serverOptions, grpc.Creds(credentials.NewTLS(files.Config())))
	}
	if sec.mode == auth.ModeMTLS && cfg.TLSClientCA == "" {
		return sec, errors.New("--auth=mtls needs --tls-client-ca (and --tls-cert, --tls-key)")
	}
	fc.Auth.Mode = sec.mode
	a, err := auth.New(ctx, fc.Auth, auth.Options{Logger: logger})
	if err != nil {
		return sec, err
	}
	if a == nil {
		logger.Warn("authentication is OFF (--auth=none): any caller can act as any tenant by setting " +
			auth.TenantKey + "; use --auth=mtls, jwt or api-key wherever more than one party can reach the port (SECURITY.md)")
	}
	u, s := auth.Interceptors(a) // with none, they check the tenant the header names
	sec.unary, sec.stream = append(sec.unary, u), append(sec.stream, s)
	shed := limit.NewShedder(limit.ShedOptions{MaxCPU: cfg.MaxInflight, MaxLLM: cfg.MaxInflightLLM,
		MemoryBytes: cfg.memoryBudget(), Metrics: m})
	sec.calls = shed
	adm := limit.Admission{Shedder: shed}
	if fc.Limits.Enabled() {
		adm.Enforcer = limit.New(fc.Limits, limit.Options{Redis: rdb, Metrics: m})
		sec.unary = append(sec.unary, adm.Enforcer.UnaryServerInterceptor())
		if rdb == nil {
			logger.Warn("per-tenant limits are enforced by each replica alone: no Redis is configured (--redis-url)")
		}
	}
	sec.admit = adm
	return sec, nil
}

// authMode is the authentication mode: --auth, else the --config file's auth.mode, else none.
func authMode(cfg config, fc fileConfig) string {
	return cmp.Or(cfg.Auth, fc.Auth.Mode, auth.ModeNone)
}

// warnExposure warns about listeners that reach beyond loopback while anyone reaching them
// can act as any tenant (no authentication), and about credentials that cross the network in
// clear text (API keys or bearer tokens without TLS). On loopback only the machine's own
// processes reach the port, such as a TLS-terminating proxy in front: no warning.
func warnExposure(logger *slog.Logger, sec security, grpcAddr, metricsAddr net.Addr) {
	if sec.mode == auth.ModeNone {
		for _, a := range []net.Addr{grpcAddr, metricsAddr} {
			if a != nil && !loopback(a) {
				logger.Warn("listening on " + a.String() + ", beyond loopback, with authentication OFF: whoever reaches the port acts as any tenant (gRPC) or reads the metrics; give --listen/--metrics-listen a loopback address, or turn --auth on (SECURITY.md)")
			}
		}
		return
	}
	if sec.tls == "off" && (sec.mode == auth.ModeAPIKey || sec.mode == auth.ModeJWT) && !loopback(grpcAddr) {
		logger.Warn("--auth=" + sec.mode + " over plaintext on " + grpcAddr.String() + ": every call's credential crosses the network in clear text, readable and replayable on the way; serve TLS (--tls-cert, --tls-key) or listen on loopback behind a TLS-terminating proxy")
	}
}

// loopback reports whether a listener's address is a loopback one: 127.0.0.1 or ::1, not
// the unspecified address that binds every interface.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
