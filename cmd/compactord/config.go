package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/bytesize"
	"github.com/compactord/compactord/internal/filewatch"
	"github.com/compactord/compactord/service"
)

// config is the server's configuration: flags, each with a COMPACTORD_* environment twin
// that applies when the flag is not given on the command line.
type config struct {
	// Listen and MetricsListen are the gRPC and Prometheus addresses. Unless given (flag or
	// environment), they are loopback-only while authentication is off and every interface
	// with it (applyListenDefaults).
	Listen        string
	MetricsListen string
	listenGiven   bool
	metricsGiven  bool
	// Version asks for the version line instead of serving.
	Version         bool
	RedisURL        string
	Summarizer      string
	ConfigFile      string
	MaxMessageBytes bytesize.Size
	DrainTimeout    time.Duration
	MaxConnAge      time.Duration
	CacheMaxBytes   bytesize.Size
	CacheTTL        time.Duration
	SourceTTL       time.Duration
	SourceBudget    bytesize.Size
	SourceMaxBytes  bytesize.Size
	TokenMemoBytes  bytesize.Size
	MaxSummaryRatio float64
	LockTTL         time.Duration
	LogLevel        string
	LogFormat       string
	Redis           redisConfig
	// TLS on the gRPC listener, and authentication (see package auth).
	TLSCert, TLSKey, TLSClientCA string
	Auth                         string
	Reflection                   bool
	// Server-wide bounds on work in flight (package limit); 0 is unbounded.
	MaxInflight, MaxInflightLLM int
	// MemoryBudget bounds the memory of requests being decoded and held; 0 derives it from
	// the Go memory limit (see memoryBudget).
	MemoryBudget bytesize.Size
}

// redisConfig is how to reach a Redis that is not a single node given by --redis-url: a
// Sentinel-managed master or a Cluster, with auth and TLS. Passwords come from files or the
// environment (COMPACTORD_REDIS_PASSWORD, COMPACTORD_REDIS_SENTINEL_PASSWORD), never argv.
type redisConfig struct {
	SentinelAddrs        string
	MasterName           string
	ClusterAddrs         string
	Username             string
	PasswordFile         string
	SentinelPasswordFile string
	TLS                  bool
	TLSCA                string
	TLSServerName        string
	// Budget bounds every cache command (cache.RedisOptions.Budget).
	Budget time.Duration
	// Password and SentinelPassword are read from the files or the environment by parseConfig.
	Password, SentinelPassword string
	// reload is how often --redis-password-file is stat'ed for a rotated password;
	// 0 means secretReloadInterval.
	reload time.Duration
}

// secretReloadInterval is how often a password file is stat'ed, on use, for a new password
// (as the API-key file and the TLS files are).
const secretReloadInterval = 5 * time.Second

// envName is the environment twin of a flag: --max-message-bytes ↔ COMPACTORD_MAX_MESSAGE_BYTES.
func envName(flagName string) string {
	return "COMPACTORD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig reads the configuration from args and the environment. It returns flag.ErrHelp
// after printing the usage when asked for help.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	c := config{MaxMessageBytes: service.DefaultMaxMessageBytes, CacheMaxBytes: 64 << 20, TokenMemoBytes: 64 << 20, SourceBudget: cache.DefaultSourceBudget, SourceMaxBytes: cache.DefaultSourceMaxBytes}
	fs := flag.NewFlagSet("compactord", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.Listen, "listen", loopbackListen, "gRPC listen address; the default is loopback-only while --auth=none, "+allListen+" with authentication (serving every interface without it takes an explicit address, and warns)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", loopbackMetrics, "Prometheus /metrics, /healthz and /readyz listen address (empty disables); loopback-only while --auth=none, "+allMetrics+" with authentication")
	fs.BoolVar(&c.Version, "version", false, "print the version (module version, VCS revision, Go version) and exit")
	fs.StringVar(&c.RedisURL, "redis-url", "", "redis:// or rediss:// URL of the shared summary cache (empty: in-memory cache)")
	fs.StringVar(&c.Summarizer, "summarizer", "extractive", "default summarizer name")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file: named LLM summarizers, auth and per-tenant limits (docs/ARCHITECTURE.md \"Configuration\", SECURITY.md)")
	fs.Var(&c.MaxMessageBytes, "max-message-bytes", "largest request accepted (bytes; KiB/MiB/GiB suffixes allowed)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", service.DrainTimeout, "how long SIGTERM waits for in-flight calls")
	fs.DurationVar(&c.MaxConnAge, "max-connection-age", 5*time.Minute, "close client connections after this long so clients rebalance over new replicas (0: never)")
	fs.Var(&c.CacheMaxBytes, "cache-max-bytes", "size bound of the in-memory summary cache (in front of Redis with --redis-url)")
	fs.DurationVar(&c.CacheTTL, "cache-ttl", 7*24*time.Hour, "how long cached summaries live")
	fs.DurationVar(&c.SourceTTL, "source-ttl", cache.DefaultSourceTTL, "how long a compaction's source (the conversation it received, for Expand) is kept; 0 keeps none")
	fs.Var(&c.SourceBudget, "source-budget", "bytes of sources one tenant may hold at once (in Redis with --redis-url, else in memory); a compaction past it is RESOURCE_EXHAUSTED")
	fs.Var(&c.SourceMaxBytes, "source-max-bytes", "size bound of the in-memory source store (without --redis-url), all tenants together: past it the oldest sources are evicted")
	fs.Var(&c.TokenMemoBytes, "token-memo-bytes", "size bound of the token-count memo")
	fs.Float64Var(&c.MaxSummaryRatio, "max-summary-ratio", 0.5, "a summary may have at most this share of the tokens it replaces (summaries are asked for and cut to that budget; a range too short for any summary answers compacted=false)")
	fs.DurationVar(&c.LockTTL, "lock-ttl", 5*time.Minute, "how long one replica may hold a summary's lock before others take over (above the summarizers' timeout × attempts)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or text")
	fs.StringVar(&c.Redis.SentinelAddrs, "redis-sentinel-addrs", "", "comma-separated Sentinel addresses (host:port): the shared cache is the master Sentinel names --redis-master-name")
	fs.StringVar(&c.Redis.MasterName, "redis-master-name", "", "the master's name in Sentinel (with --redis-sentinel-addrs)")
	fs.StringVar(&c.Redis.ClusterAddrs, "redis-cluster-addrs", "", "comma-separated seed nodes (host:port) of a Redis Cluster holding the shared cache")
	fs.StringVar(&c.Redis.Username, "redis-username", "", "ACL user for Sentinel- or Cluster-mode Redis (with --redis-url, put it in the URL)")
	fs.StringVar(&c.Redis.PasswordFile, "redis-password-file", "", "file holding the Redis password (or set COMPACTORD_REDIS_PASSWORD); Sentinel and Cluster modes")
	fs.StringVar(&c.Redis.SentinelPasswordFile, "redis-sentinel-password-file", "", "file holding the Sentinels' password (or set COMPACTORD_REDIS_SENTINEL_PASSWORD)")
	fs.BoolVar(&c.Redis.TLS, "redis-tls", false, "connect to Sentinel- or Cluster-mode Redis over TLS (with --redis-url, use rediss://)")
	fs.StringVar(&c.Redis.TLSCA, "redis-tls-ca", "", "PEM file of the CAs that sign the Redis servers' certificates (default: the system roots)")
	fs.StringVar(&c.Redis.TLSServerName, "redis-tls-server-name", "", "server name to verify in the Redis certificates (default: the dialed host)")
	fs.DurationVar(&c.Redis.Budget, "redis-budget", cache.DefaultRedisBudget, "longest a cache command may take before the call goes on without the cache; 5 failures in a row open a breaker that skips Redis for 1s")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate chain of the gRPC listener (with --tls-key; re-read when the files change)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", "", "PEM CAs that sign client certificates: clients must present one (mutual TLS)")
	fs.StringVar(&c.Auth, "auth", "", "authentication: none, mtls, jwt or api-key (default: the --config file's auth.mode, else none)")
	fs.BoolVar(&c.Reflection, "reflection", true, "serve gRPC server reflection (with --auth, it needs credentials like any call)")
	fs.IntVar(&c.MaxInflight, "max-inflight", 64, "CompactorService calls in flight beyond which new ones are refused at once with UNAVAILABLE and RetryInfo (0: unbounded; docs/PERFORMANCE.md measures what bound keeps latency)")
	fs.IntVar(&c.MaxInflightLLM, "max-inflight-llm", 64, "summarizer calls to a model in flight beyond which new ones are refused with UNAVAILABLE (0: unbounded)")
	fs.Var(&c.MemoryBudget, "memory-budget", "bytes of requests being decoded and held beyond which new ones are refused with RESOURCE_EXHAUSTED (default: a quarter of GOMEMLIMIT, else 256MiB)")
	fs.Usage = func() {
		fmt.Fprintf(usage, "Usage: compactord [flags]\n\nEvery flag has an environment twin: --listen ↔ %s.\n\n", envName("listen"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			given[f.Name] = true
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	c.listenGiven, c.metricsGiven = given["listen"], given["metrics-listen"]
	if err := c.Redis.readSecrets(getenv); err != nil {
		return c, err
	}
	return c, c.check()
}

// readSecrets fills the passwords from their files, else the environment.
func (r *redisConfig) readSecrets(getenv func(string) string) error {
	for _, s := range []struct {
		file, env, flag string
		dst             *string
	}{
		{r.PasswordFile, "COMPACTORD_REDIS_PASSWORD", "--redis-password-file", &r.Password},
		{r.SentinelPasswordFile, "COMPACTORD_REDIS_SENTINEL_PASSWORD", "--redis-sentinel-password-file", &r.SentinelPassword},
	} {
		*s.dst = getenv(s.env)
		if s.file == "" {
			continue
		}
		b, err := os.ReadFile(s.file)
		if err != nil {
			return fmt.Errorf("%s: %w", s.flag, err) // the error names the file, never its content
		}
		*s.dst = strings.TrimRight(string(b), "\r\n")
	}
	return nil
}

// check validates the Redis topology flags against --redis-url.
func (r redisConfig) check(url string) error {
	n := 0
	for _, v := range []string{url, r.SentinelAddrs, r.ClusterAddrs} {
		if v != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("--redis-url, --redis-sentinel-addrs and --redis-cluster-addrs are exclusive: give one")
	case r.SentinelAddrs != "" && r.MasterName == "":
		return errors.New("--redis-master-name: required with --redis-sentinel-addrs")
	case r.MasterName != "" && r.SentinelAddrs == "":
		return errors.New("--redis-master-name: needs --redis-sentinel-addrs")
	case url != "" && (r.Username != "" || r.Password != "" || r.TLS || r.TLSCA != ""):
		return errors.New("--redis-url carries its own user, password and TLS (rediss://): drop --redis-username, --redis-password-file, COMPACTORD_REDIS_PASSWORD and --redis-tls*")
	}
	return nil
}

// topology returns the Sentinel or Cluster topology the flags describe, or ok false when
// they describe none.
func (r redisConfig) topology() (t cache.Topology, ok bool, err error) {
	switch {
	case r.SentinelAddrs != "":
		t = cache.Topology{Mode: cache.ModeSentinel, Addrs: splitAddrs(r.SentinelAddrs), MasterName: r.MasterName}
	case r.ClusterAddrs != "":
		t = cache.Topology{Mode: cache.ModeCluster, Addrs: splitAddrs(r.ClusterAddrs)}
	default:
		return t, false, nil
	}
	t.Username, t.Password, t.SentinelPassword = r.Username, r.Password, r.SentinelPassword
	if r.PasswordFile != "" {
		// New connections authenticate with the file's current password. (The Sentinels'
		// password is read once: go-redis takes no provider for it.)
		path, user := r.PasswordFile, r.Username
		interval := cmp.Or(r.reload, secretReloadInterval)
		pw, err := filewatch.New([]string{path}, filewatch.Options{Interval: interval}, func() (string, error) {
			b, err := os.ReadFile(path)
			return strings.TrimRight(string(b), "\r\n"), err
		})
		if err != nil {
			return t, false, fmt.Errorf("--redis-password-file: %w", err)
		}
		t.Credentials = func() (string, string) { return user, pw.Get() }
	}
	if r.TLS || r.TLSCA != "" {
		if t.TLS, err = cache.TLSConfig(r.TLSCA, r.TLSServerName); err != nil {
			return t, false, fmt.Errorf("--redis-tls-ca: %w", err)
		}
	}
	return t, true, nil
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (c config) check() error {
	if err := c.Redis.check(c.RedisURL); err != nil {
		return err
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	case c.MaxInflight < 0 || c.MaxInflightLLM < 0:
		return errors.New("--max-inflight and --max-inflight-llm must not be negative")
	case c.Listen == "":
		return errors.New("--listen: an address is required")
	case c.MaxMessageBytes <= 0:
		return errors.New("--max-message-bytes: must be positive")
	case c.memoryBudget() < int64(c.MaxMessageBytes):
		return fmt.Errorf("--memory-budget: %d bytes (set, or a quarter of GOMEMLIMIT) cannot take one request of --max-message-bytes (%d): raise it or lower --max-message-bytes", c.memoryBudget(), c.MaxMessageBytes)
	case c.DrainTimeout <= 0:
		return errors.New("--drain-timeout: must be positive")
	case c.MaxConnAge < 0:
		return errors.New("--max-connection-age: must not be negative")
	case c.CacheMaxBytes <= 0:
		return errors.New("--cache-max-bytes: must be positive")
	case c.CacheTTL <= 0:
		return errors.New("--cache-ttl: must be positive")
	case c.SourceTTL < 0:
		return errors.New("--source-ttl: must not be negative (0 keeps no sources)")
	case c.SourceMaxBytes <= 0:
		return errors.New("--source-max-bytes: must be positive")
	case c.SourceBudget <= 0:
		return errors.New("--source-budget: must be positive")
	case c.LockTTL <= 0:
		return errors.New("--lock-ttl: must be positive")
	case c.TokenMemoBytes <= 0:
		return errors.New("--token-memo-bytes: must be positive")
	case !(c.MaxSummaryRatio > 0 && c.MaxSummaryRatio <= 1):
		return errors.New("--max-summary-ratio: must be in (0, 1]")
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return fmt.Errorf("--log-format: %q is not json or text", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level: %q is not debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// The listen addresses' defaults: loopback-only while authentication is off, every interface
// with it.
const (
	loopbackListen  = "127.0.0.1:50051"
	loopbackMetrics = "127.0.0.1:9090"
	allListen       = ":50051"
	allMetrics      = ":9090"
)

// applyListenDefaults sets the addresses not given to the defaults of authMode: with
// authentication on, every interface; with it off, the flags' loopback defaults stay.
func (c *config) applyListenDefaults(authMode string) {
	if authMode == auth.ModeNone {
		return
	}
	if !c.listenGiven {
		c.Listen = allListen
	}
	if !c.metricsGiven {
		c.MetricsListen = allMetrics
	}
}

// defaultMemoryBudget is the memory budget of requests without --memory-budget or a Go
// memory limit (GOMEMLIMIT).
const defaultMemoryBudget = 256 << 20

// memoryBudget is --memory-budget, else a quarter of the Go memory limit (GOMEMLIMIT: the
// rest is for the stores, the tokenizer tables, the work of the calls and the collector's
// headroom; k8s/base/deployment.yaml sets 400MiB for a 512Mi container, hence 100 MiB),
// else defaultMemoryBudget.
func (c config) memoryBudget() int64 {
	return memoryBudgetFor(int64(c.MemoryBudget), debug.SetMemoryLimit(-1))
}

// memoryBudgetFor is the memory budget of --memory-budget set (0: not set) under the Go
// memory limit goMemLimit (math.MaxInt64: none).
func memoryBudgetFor(set, goMemLimit int64) int64 {
	switch {
	case set > 0:
		return set
	case goMemLimit != math.MaxInt64:
		return goMemLimit / 4
	}
	return defaultMemoryBudget
}
