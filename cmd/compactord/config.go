package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// config is the server's configuration: flags, each with a COMPACTORD_* environment twin
// that applies when the flag is not given on the command line.
type config struct {
	Listen          string
	MetricsListen   string
	RedisURL        string
	Summarizer      string
	ConfigFile      string
	MaxMessageBytes byteSize
	DrainTimeout    time.Duration
	MaxConnAge      time.Duration
	CacheMaxBytes   byteSize
	CacheTTL        time.Duration
	TokenMemoBytes  byteSize
	MaxSummaryRatio float64
	LockTTL         time.Duration
	LogLevel        string
	LogFormat       string
}

// envName is the environment twin of a flag: --max-message-bytes ↔ COMPACTORD_MAX_MESSAGE_BYTES.
func envName(flagName string) string {
	return "COMPACTORD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig reads the configuration from args and the environment. It returns flag.ErrHelp
// after printing the usage when asked for help.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	c := config{MaxMessageBytes: 16 << 20, CacheMaxBytes: 64 << 20, TokenMemoBytes: 64 << 20}
	fs := flag.NewFlagSet("compactord", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.Listen, "listen", ":50051", "gRPC listen address")
	fs.StringVar(&c.MetricsListen, "metrics-listen", ":9090", "Prometheus /metrics listen address (empty disables)")
	fs.StringVar(&c.RedisURL, "redis-url", "", "redis:// or rediss:// URL of the shared summary cache (empty: in-memory cache)")
	fs.StringVar(&c.Summarizer, "summarizer", "extractive", "default summarizer name")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file with named summarizers")
	fs.Var(&c.MaxMessageBytes, "max-message-bytes", "largest request accepted (bytes; KiB/MiB/GiB suffixes allowed)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 20*time.Second, "how long SIGTERM waits for in-flight calls")
	fs.DurationVar(&c.MaxConnAge, "max-connection-age", 5*time.Minute, "close client connections after this long so clients rebalance over new replicas (0: never)")
	fs.Var(&c.CacheMaxBytes, "cache-max-bytes", "size bound of the in-memory summary cache (in front of Redis with --redis-url)")
	fs.DurationVar(&c.CacheTTL, "cache-ttl", 7*24*time.Hour, "how long cached summaries live")
	fs.Var(&c.TokenMemoBytes, "token-memo-bytes", "size bound of the token-count memo")
	fs.Float64Var(&c.MaxSummaryRatio, "max-summary-ratio", 0.5, "a summary may have at most this share of the tokens it replaces (summaries are asked for and cut to that budget; a range too short for any summary answers compacted=false)")
	fs.DurationVar(&c.LockTTL, "lock-ttl", 5*time.Minute, "how long one replica may hold a summary's lock before others take over (above the summarizers' timeout × attempts)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or text")
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
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.check()
}

func (c config) check() error {
	switch {
	case c.Listen == "":
		return errors.New("--listen: an address is required")
	case c.MaxMessageBytes <= 0:
		return errors.New("--max-message-bytes: must be positive")
	case c.DrainTimeout <= 0:
		return errors.New("--drain-timeout: must be positive")
	case c.MaxConnAge < 0:
		return errors.New("--max-connection-age: must not be negative")
	case c.CacheMaxBytes <= 0:
		return errors.New("--cache-max-bytes: must be positive")
	case c.CacheTTL <= 0:
		return errors.New("--cache-ttl: must be positive")
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

// byteSize is a flag value in bytes that accepts KiB, MiB and GiB suffixes.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a size in bytes (e.g. 16777216 or 16MiB)", s)
	}
	*b = byteSize(n * mult)
	return nil
}
