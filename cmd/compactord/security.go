package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/tlsfiles"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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

func setupSecurity(ctx context.Context, cfg config, fc fileConfig, rdb redis.UniversalClient, m *metrics.Metrics, logger *slog.Logger) (security, error) {
	sec := security{mode: cmp.Or(cfg.Auth, fc.Auth.Mode, auth.ModeNone), tls: "off"}
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

// healthz is the liveness probe: the process answers HTTP.
func healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
}

// readyz is the readiness probe: 200 while the gRPC health service says SERVING, 503 once
// it does not (draining after SIGTERM). Kubelet's gRPC probes cannot speak TLS; these can
// be probed whatever the gRPC listener's TLS.
func readyz(h healthpb.HealthServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := h.Check(r.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
}
