package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/cache"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{
		"COMPACTORD_LISTEN":          "127.0.0.1:7000",
		"COMPACTORD_DRAIN_TIMEOUT":   "5s",
		"COMPACTORD_REDIS_URL":       "redis://cache:6379/0",
		"COMPACTORD_LOG_FORMAT":      "text",
		"COMPACTORD_CACHE_MAX_BYTES": "1MiB",
	}
	c, err := parseConfig([]string{"--listen", ":9999", "--max-message-bytes", "4MiB"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9999" {
		t.Errorf("flag must win over its env twin: listen = %q", c.Listen)
	}
	if c.DrainTimeout != 5*time.Second || c.RedisURL != "redis://cache:6379/0" || c.LogFormat != "text" {
		t.Errorf("env twins not applied: %+v", c)
	}
	if c.MaxMessageBytes != 4<<20 || c.CacheMaxBytes != 1<<20 {
		t.Errorf("sizes: max-message-bytes %d, cache-max-bytes %d", c.MaxMessageBytes, c.CacheMaxBytes)
	}

	d, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d.Listen != "127.0.0.1:50051" || d.MetricsListen != "127.0.0.1:9090" || d.RedisURL != "" || d.Summarizer != "extractive" ||
		d.MaxMessageBytes != 16<<20 || d.DrainTimeout != 20*time.Second {
		t.Errorf("defaults differ from docs/ARCHITECTURE.md: %+v", d)
	}
}

// TestListenDefaults: without authentication both listeners default to loopback; with it,
// to every interface; an address given by flag or environment is kept whatever the mode.
func TestListenDefaults(t *testing.T) {
	for _, tt := range []struct {
		mode            string
		args            []string
		env             map[string]string
		listen, metrics string
	}{
		{auth.ModeNone, nil, nil, "127.0.0.1:50051", "127.0.0.1:9090"},
		{auth.ModeAPIKey, nil, nil, ":50051", ":9090"},
		{auth.ModeMTLS, []string{"--listen", "127.0.0.1:7000"}, nil, "127.0.0.1:7000", ":9090"},
		{auth.ModeNone, []string{"--listen", ":50051"}, map[string]string{"COMPACTORD_METRICS_LISTEN": ":9090"}, ":50051", ":9090"},
		{auth.ModeJWT, []string{"--metrics-listen", ""}, nil, ":50051", ""},
	} {
		c, err := parseConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		c.applyListenDefaults(tt.mode)
		if c.Listen != tt.listen || c.MetricsListen != tt.metrics {
			t.Errorf("--auth=%s %q %v: listen %q, metrics %q; want %q, %q", tt.mode, tt.args, tt.env, c.Listen, c.MetricsListen, tt.listen, tt.metrics)
		}
	}
}

func TestParseConfigRedisTopology(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{name: "sentinel", args: []string{"--redis-sentinel-addrs", "a:26379, b:26379", "--redis-master-name", "mymaster", "--redis-password-file", pw},
			check: func(t *testing.T, c config) {
				tp, ok, err := c.Redis.topology()
				if err != nil || !ok || tp.Mode != cache.ModeSentinel || len(tp.Addrs) != 2 || tp.Addrs[1] != "b:26379" || tp.MasterName != "mymaster" || tp.Password != "s3cret" {
					t.Errorf("topology = %+v, %v, %v", tp, ok, err)
				}
				if cacheKind(c) != "memory+redis-sentinel" {
					t.Errorf("cache kind %q", cacheKind(c))
				}
			}},
		{name: "cluster with the password from the environment", args: []string{"--redis-cluster-addrs", "n1:7000,n2:7000,n3:7000", "--redis-tls"},
			env: map[string]string{"COMPACTORD_REDIS_PASSWORD": "from-env"},
			check: func(t *testing.T, c config) {
				tp, ok, err := c.Redis.topology()
				if err != nil || !ok || tp.Mode != cache.ModeCluster || len(tp.Addrs) != 3 || tp.Password != "from-env" || tp.TLS == nil {
					t.Errorf("topology = %+v, %v, %v", tp, ok, err)
				}
			}},
		{name: "url and cluster", args: []string{"--redis-url", "redis://x:6379", "--redis-cluster-addrs", "n1:7000"}, wantErr: "exclusive"},
		{name: "sentinel without master", args: []string{"--redis-sentinel-addrs", "a:26379"}, wantErr: "--redis-master-name: required"},
		{name: "master without sentinel", args: []string{"--redis-master-name", "m"}, wantErr: "needs --redis-sentinel-addrs"},
		{name: "url with a password file", args: []string{"--redis-url", "redis://x:6379", "--redis-password-file", pw}, wantErr: "carries its own"},
		{name: "missing password file", args: []string{"--redis-cluster-addrs", "n1:7000", "--redis-password-file", filepath.Join(dir, "none")}, wantErr: "--redis-password-file"},
		{name: "bad CA", args: []string{"--redis-cluster-addrs", "n1:7000", "--redis-tls-ca", pw}, wantErr: "no certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := noEnv
			if tc.env != nil {
				getenv = func(k string) string { return tc.env[k] }
			}
			c, err := parseConfig(tc.args, getenv, io.Discard)
			if err == nil && tc.wantErr != "" {
				_, _, err = c.Redis.topology()
			}
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error repeats the password: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestRedisPasswordFileIsReread: with --redis-password-file, the topology's credentials
// give the file's current password, so a rotated secret is used by new connections without
// a restart.
func TestRedisPasswordFileIsReread(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig([]string{"--redis-cluster-addrs", "a:6379", "--redis-username", "cache", "--redis-password-file", pw},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.Redis.reload = time.Nanosecond
	topo, ok, err := c.Redis.topology()
	if err != nil || !ok || topo.Credentials == nil {
		t.Fatalf("topology %+v, %v, %v: want credentials from the file", topo, ok, err)
	}
	if user, pass := topo.Credentials(); user != "cache" || pass != "first" {
		t.Errorf("credentials %q, %q", user, pass)
	}
	if err := os.WriteFile(pw, []byte("second-rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, pass := topo.Credentials(); pass != "second-rotated" {
		t.Errorf("after the file changed: %q, want second-rotated", pass)
	}
}
