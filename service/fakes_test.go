package service_test

import (
	"net/url"
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

// proxiedRedis returns the URL of REDIS_URL's Redis behind a loopback proxy closed with the
// test (skipping like redisURL): Stop takes the Redis away from the servers under test, Start
// gives it back.
func proxiedRedis(t *testing.T) (string, *tcpproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tcpproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	u.Host = p.Addr()
	return u.String(), p
}
