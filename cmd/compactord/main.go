// Command compactord serves compactor.v1.CompactorService over gRPC.
//
// With no flags it runs on its embedded defaults: gRPC on :50051, an in-memory summary
// cache, the extractive summarizer, no API keys and no Redis. See --help for the flags and
// their COMPACTORD_* environment twins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compactord:", err)
		os.Exit(1)
	}
}

// run serves until ctx is cancelled (SIGTERM or interrupt), then drains: health turns
// NOT_SERVING, in-flight calls finish within --drain-timeout, the preparations of summaries
// still running are cancelled and waited for, pending spans are flushed.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	b := readBuild()
	if cfg.Version {
		_, err := fmt.Fprintln(stdout, b)
		return err
	}
	logger := newLogger(cfg, stderr)

	tp, shutdownTracing, err := setupTracing(ctx, getenv, stdout, b.version)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(fctx); err != nil {
			logger.Warn("flushing traces", "err", err)
		}
	}()

	var m *metrics.Recorder // nil records nothing
	if cfg.MetricsListen != "" {
		m = metrics.New(prometheus.NewRegistry())
	}
	// Load the default tokenizer's tables now rather than inside the first request.
	if err := engine.Preload("o200k_base"); err != nil {
		return err
	}
	fc, err := readConfigFile(cfg.ConfigFile)
	if err != nil {
		return err
	}
	cfg.applyListenDefaults(authMode(cfg, fc))
	summarizers, err := loadSummarizers(cfg, &fc.Config, tp, logger)
	if err != nil {
		return err
	}
	m.InitializeSummarizers(summarizers.Names()...)
	sc, err := openCache(cfg, tp, logger)
	if err != nil {
		return err
	}
	defer sc.close()
	sec, err := setupSecurity(ctx, cfg, fc, sc.redis, m, logger)
	if err != nil {
		return err
	}
	counter := engine.NewCounter(int(cfg.TokenMemoBytes))
	m.TrackStore("summary-cache", int64(cfg.CacheMaxBytes), func() (int, int64) { return sc.local.Len(), sc.local.Bytes() })
	m.TrackStore("token-memo", int64(cfg.TokenMemoBytes), counter.MemoStats)
	srv := service.New(service.Options{
		Counter:         counter,
		Summarizers:     summarizers,
		Cache:           sc.store,
		Fill:            cache.FillOptions{LockTTL: cfg.LockTTL},
		MaxSummaryRatio: cfg.MaxSummaryRatio,
		Metrics:         m,
		Admit:           sec.admit,
		Logger:          logger,
		Sources:         sc.sources(cfg),
		DiscardSources:  cfg.SourceTTL == 0,
		MaxMessageBytes: int(cfg.MaxMessageBytes),
	})
	g := service.NewGRPC(srv, service.GRPCOptions{
		Logger:             logger,
		TracerProvider:     tp,
		Metrics:            m,
		MaxMessageBytes:    int(cfg.MaxMessageBytes),
		MaxConnectionAge:   cfg.MaxConnAge,
		UnaryInterceptors:  sec.unary,
		Admit:              sec.calls,
		StreamInterceptors: sec.stream,
		ServerOptions:      sec.serverOptions,
		NoReflection:       !cfg.Reflection,
	})

	ready := &readiness{health: g.Health, redis: sc.redis}
	if err := ready.redisReady(ctx); err != nil {
		logger.Warn(err.Error() + "; /readyz answers 503 until it does, calls go on without the shared cache")
	}

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	errc := make(chan error, 2)
	var metricsAddr net.Addr
	if cfg.MetricsListen != "" {
		mlis, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			lis.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		mux.Handle("GET /healthz", healthz())
		mux.Handle("GET /readyz", ready)
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics: %w", err)
			}
		}()
		defer hs.Close()
		metricsAddr = mlis.Addr()
		logger.Info("metrics", "addr", mlis.Addr().String())
	}
	warnExposure(logger, sec, lis.Addr(), metricsAddr)
	logger.Info("serving", "addr", lis.Addr().String(), "version", b.version, "revision", b.revision,
		"summarizer", summarizers.Default(), "cache", cacheKind(cfg), "tls", sec.tls, "auth", sec.mode)
	go func() { errc <- g.Serve(lis) }()

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("draining", "timeout", cfg.DrainTimeout.String())
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if g.Shutdown(dctx) {
		logger.Info("stopped")
	} else {
		logger.Warn("drain timeout: cancelled the calls still in flight")
	}
	// Preparations of summaries outlive their calls: cancelled now, waited for briefly.
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer pcancel()
	if err := srv.Shutdown(pctx); err != nil {
		logger.Warn(err.Error())
	}
	return nil
}

// loadSummarizers builds the named summarizers of --config (if any) plus the built-in
// extractive one, with the default from the file or --summarizer.
func loadSummarizers(cfg config, sc *summarize.Config, tp trace.TracerProvider, logger *slog.Logger) (*summarize.Registry, error) {
	r, err := summarize.NewRegistry(sc, cfg.Summarizer, summarize.Options{TracerProvider: tp, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("summarizers: %w", err)
	}
	return r, nil
}

// summaryCache is the summary cache the server uses, and what main needs of it besides.
type summaryCache struct {
	// store is what the server reads and writes: Redis behind the in-memory tier, or the
	// in-memory one alone.
	store cache.Cache
	// local is the in-memory tier, whose size the metrics report.
	local *cache.Memory
	// redis is the shared Redis client (the per-tenant limits count there too), or nil.
	redis redis.UniversalClient
	// shared is the Redis cache, or nil.
	shared *cache.Redis
	// close releases the Redis connections.
	close func()
}

// openCache opens the summary cache the flags describe: the Redis of --redis-url (or a
// Sentinel or Cluster topology) behind an in-memory one, or the in-memory one alone.
func openCache(cfg config, tp trace.TracerProvider, logger *slog.Logger) (summaryCache, error) {
	local := cache.NewMemory(cache.MemoryOptions{MaxBytes: int64(cfg.CacheMaxBytes), TTL: cfg.CacheTTL, TracerProvider: tp})
	topo, isTopo, err := cfg.Redis.topology()
	if err != nil {
		return summaryCache{}, err
	}
	var r *cache.Redis
	switch {
	case isTopo:
		rdb, err := topo.Client()
		if err != nil {
			return summaryCache{}, err
		}
		cache.LogRedisTo(logger)
		r = cache.NewRedisClient(rdb, cache.RedisOptions{TTL: cfg.CacheTTL, TracerProvider: tp, Budget: cfg.Redis.Budget, OnBreaker: breakerLog(logger)})
	case cfg.RedisURL != "":
		r, err = cache.NewRedis(cache.RedisOptions{URL: cfg.RedisURL, TTL: cfg.CacheTTL, TracerProvider: tp, Budget: cfg.Redis.Budget, OnBreaker: breakerLog(logger)})
		cache.LogRedisTo(logger)
		if err != nil {
			return summaryCache{}, fmt.Errorf("--redis-url: %w", err) // the error never repeats the URL's password
		}
	default:
		return summaryCache{store: local, local: local, close: func() {}}, nil
	}
	// Summaries this replica has seen are served from memory, without a round trip to Redis.
	return summaryCache{store: cache.NewTiered(local, r), local: local, redis: r.Client(), shared: r, close: func() { _ = r.Close() }}, nil
}

// sources is where compactions' sources are kept: beside the shared cache in Redis, or in
// memory without one (nil, which the server takes as that, with --source-ttl 0).
func (sc summaryCache) sources(cfg config) cache.Sources {
	if cfg.SourceTTL == 0 {
		return nil
	}
	if sc.shared != nil {
		return cache.NewRedisSources(sc.shared, cfg.SourceTTL, int64(cfg.SourceBudget))
	}
	return cache.NewMemorySources(cache.MemorySourcesOptions{TTL: cfg.SourceTTL, Budget: int64(cfg.SourceBudget), MaxBytes: int64(cfg.SourceMaxBytes)})
}

// breakerLog logs the state changes of the breaker around Redis.
func breakerLog(logger *slog.Logger) func(from, to string) {
	return func(from, to string) {
		logger.Warn("redis circuit breaker", "from", from, "to", to)
	}
}

func cacheKind(cfg config) string {
	switch {
	case cfg.Redis.SentinelAddrs != "":
		return "memory+redis-sentinel"
	case cfg.Redis.ClusterAddrs != "":
		return "memory+redis-cluster"
	case cfg.RedisURL != "":
		return "memory+redis"
	}
	return "memory"
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel)) // checked by config.check
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
