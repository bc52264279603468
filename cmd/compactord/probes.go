package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthz is the liveness probe: the process answers HTTP.
func healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
}

// readiness is the readiness probe (/readyz). A replica is ready while its gRPC health
// service says SERVING (it is not draining after SIGTERM) and, with a Redis cache, once Redis
// has answered since start: a wrong --redis-url keeps a new replica out of the endpoints (and
// a rollout from going on) instead of surfacing at the first call. Once Redis has answered,
// a Redis outage no longer makes the replica unready: Compact goes on without the shared
// cache (docs/ARCHITECTURE.md), and failing every replica's probe would turn a cache outage
// into a service outage. Kubelet's gRPC probes cannot speak TLS; this HTTP one can be
// probed whatever the gRPC listener's TLS.
type readiness struct {
	health healthpb.HealthServer
	redis  redis.UniversalClient // nil: no Redis cache
	// answered is set by the first PING Redis answered.
	answered atomic.Bool
}

// redisProbeTimeout bounds one readiness PING.
const redisProbeTimeout = 2 * time.Second

// redisReady reports whether the cache's Redis has answered since start, asking it again
// until it has; err says why not.
func (r *readiness) redisReady(ctx context.Context) error {
	if r.redis == nil || r.answered.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
	defer cancel()
	if err := r.redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the Redis cache has not answered since start: %w", err)
	}
	r.answered.Store(true)
	return nil
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	res, err := r.health.Check(req.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		http.Error(w, "not ready: not serving (draining)", http.StatusServiceUnavailable)
		return
	}
	if err := r.redisReady(req.Context()); err != nil {
		// The error names an address, never the URL's password (go-redis dial errors).
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}
