package service_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/cputime"

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
// load test's compact-hit scenario without Redis: without keeping its source, keeping it in
// memory (the default), and, with REDIS_URL, in Redis beside a Redis cache. It reports CPU
// time per call (cputime) and the source's bytes per token the compaction took out.
func BenchmarkCompactHit(b *testing.B) {
	type setup struct {
		name string
		opt  func(b *testing.B) service.Options
	}
	setups := []setup{
		{"sources-off", func(*testing.B) service.Options { return service.Options{DiscardSources: true} }},
		{"sources-memory", func(*testing.B) service.Options { return service.Options{} }},
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		setups = append(setups,
			setup{"redis-sources-off", func(b *testing.B) service.Options {
				return service.Options{Cache: benchRedis(b, u), DiscardSources: true}
			}},
			setup{"redis-sources-redis", func(b *testing.B) service.Options {
				r := benchRedis(b, u)
				return service.Options{Cache: r, Sources: cache.NewRedisSources(r, time.Hour, 1<<30)}
			}})
	}
	for _, st := range setups {
		b.Run(st.name, func(b *testing.B) {
			client := compactorv1.NewCompactorServiceClient(startBufconn(b, service.New(st.opt(b))))
			msgs := liftCorpus(b, client, corpus.LoadTestConversation)[:20]
			req := &compactorv1.CompactRequest{Messages: msgs, Force: true,
				Policy: &compactorv1.Policy{ContextWindow: 200_000, KeepRecentTokens: 2000}}
			first, err := client.Compact(b.Context(), req)
			if err != nil {
				b.Fatal(err)
			}
			cputime.Loop(b, func() {
				resp, err := client.Compact(b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_HIT {
					b.Fatalf("cache status %v", resp.GetCacheStatus())
				}
			})
			if first.GetSourceHash() != "" {
				size := 0
				for _, m := range msgs {
					size += m.SizeVT() + 4
				}
				// The tokens the compaction took out: the messages it summarized, and what
				// pruning and cutting removed from the rest.
				plan, compacted := first.GetPlan(), first.GetPlan().GetPrunedTokens()
				for i, d := range plan.GetDispositions() {
					if d == compactorv1.Disposition_DISPOSITION_SUMMARIZE {
						compacted += plan.GetMessageTokens()[i]
					}
				}
				b.ReportMetric(float64(size)/float64(compacted), "source-B/compacted-token")
			}
		})
	}
}

// benchRedis is a Redis cache at u under a key prefix of its own.
func benchRedis(b *testing.B, u string) *cache.Redis {
	r, err := cache.NewRedis(cache.RedisOptions{URL: u, TTL: time.Hour, Budget: time.Second,
		KeyPrefix: fmt.Sprintf("compactord-bench:%d:", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}
