package main

import (
	"io"
	"testing"
	"time"
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
	if d.Listen != ":50051" || d.MetricsListen != ":9090" || d.RedisURL != "" || d.Summarizer != "extractive" ||
		d.MaxMessageBytes != 16<<20 || d.DrainTimeout != 20*time.Second {
		t.Errorf("defaults differ from docs/ARCHITECTURE.md: %+v", d)
	}
}
