package service_test

import (
	"os"
	"testing"

	"github.com/compactord/compactord/internal/tcpproxy"
)

// redisURL returns REDIS_URL or skips the test loudly.
func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		t.Skip("REDIS_URL not set: SKIPPING Redis-backed Compact tests — run .ci/run or export REDIS_URL=redis://127.0.0.1:6379/0")
	}
	return u
}

// newTCPProxy forwards a loopback port to target, closed with the test: Stop takes a real
// Redis away from the servers under test, Start gives it back.
func newTCPProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}
