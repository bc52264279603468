package service_test

import (
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/service"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BenchmarkRPC measures whole unary calls over an in-memory connection: the health check
// (the load test's baseline) against Plan and Lower of a 20-message corpus conversation.
func BenchmarkRPC(b *testing.B) {
	conn := startBufconn(b, service.New(service.Options{}))
	client := compactorv1.NewCompactorServiceClient(conn)
	msgs := liftCorpus(b, client, corpus.LoadTestConversation)[:20]
	health := healthpb.NewHealthClient(conn)
	b.Run("health", func(b *testing.B) {
		for b.Loop() {
			if _, err := health.Check(b.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plan-20", func(b *testing.B) {
		req := &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 200_000}}
		for b.Loop() {
			if _, err := client.Plan(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lower-anthropic-20", func(b *testing.B) {
		req := &compactorv1.LowerRequest{Messages: msgs, Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES}
		for b.Loop() {
			if _, err := client.Lower(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompactHit measures a Compact whose summary is already cached (in memory), the
// load test's compact-hit scenario without Redis.
func BenchmarkCompactHit(b *testing.B) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(b, service.New(service.Options{})))
	msgs := liftCorpus(b, client, corpus.LoadTestConversation)[:20]
	req := &compactorv1.CompactRequest{Messages: msgs, Force: true,
		Policy: &compactorv1.Policy{ContextWindow: 200_000, KeepRecentTokens: 2000}}
	if _, err := client.Compact(b.Context(), req); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		resp, err := client.Compact(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT {
			b.Fatalf("cache status %v", resp.GetCacheStatus())
		}
	}
}
