package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// testBudget replaces the 50 ms production budget per command in tests that run many
// concurrent commands under the race detector on two cores; TestRedisStalledGivesUpWithinBudget
// checks the production budget.
const testBudget = 2 * time.Second

// redisURL returns REDIS_URL or skips the test loudly.
func redisURL(t *testing.T) string { t.Helper(); return redisURLFor(t) }

func redisURLFor(t testing.TB) string {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		t.Skip("REDIS_URL not set: skipping Redis cache tests — run .ci/run or export REDIS_URL=redis://127.0.0.1:6379/0")
	}
	return u
}

// testPrefix returns a key prefix unique to this test run and deletes its keys afterwards.
func testPrefix(t *testing.T) string { t.Helper(); return testPrefixFor(t, redisURL(t)) }

func testPrefixFor(t testing.TB, u string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := "compactord-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		o, err := redis.ParseURL(u)
		if err != nil {
			return
		}
		rdb := redis.NewClient(o)
		defer rdb.Close()
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, p+"*", 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	return p
}

func newTestRedis(t *testing.T, prefix string, ttl time.Duration, opts ...func(*RedisOptions)) *Redis {
	t.Helper()
	o := RedisOptions{URL: redisURL(t), KeyPrefix: prefix, TTL: ttl, Budget: testBudget}
	for _, f := range opts {
		f(&o)
	}
	r, err := NewRedis(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("REDIS_URL is set but Redis does not answer: %v", err)
	}
	return r
}

func TestRedisStoresJSONWithMetadataAndTTL(t *testing.T) {
	ctx := context.Background()
	p := testPrefix(t)
	r := newTestRedis(t, p, 90*time.Second)
	k := Scope{Tenant: "acme"}.key(hashOf("ttl"))
	if err := r.Set(ctx, k, entry("s")); err != nil {
		t.Fatal(err)
	}
	d, err := r.rdb.PTTL(ctx, r.entryKey(k)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 || d > 90*time.Second {
		t.Errorf("TTL = %v, want in (0, 90s]", d)
	}

	raw, err := r.rdb.Get(ctx, r.entryKey(k)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.entryKey(k), p) {
		t.Errorf("entry key %q lacks the prefix %q", r.entryKey(k), p)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("stored value is not JSON: %v", err)
	}
	for _, f := range []string{"text", "covered_messages", "model", "prompt_version", "summarizer", "input_tokens", "output_tokens", "created"} {
		if _, ok := m[f]; !ok {
			t.Errorf("stored JSON lacks %q: %s", f, raw)
		}
	}

	// An entry as an earlier version stored it reads back whole (TestEntryDecodesEarlierVersions).
	old, err := os.ReadFile("testdata/entry-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rdb.Set(ctx, r.entryKey(k), old, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if e, err := r.Get(ctx, k); err != nil || e.Text != "The user asked to port src/parse.py to Rust." || e.Check.PathsTotal != 5 {
		t.Errorf("an earlier version's entry: Get = %+v, %v", e, err)
	}

	// A corrupt value reads as a miss, not as an outage.
	if err := r.rdb.Set(ctx, r.entryKey(k), "{not json", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Errorf("corrupt entry: Get = %v, want ErrNotFound", err)
	}

	// Negative TTL: no expiry.
	r2 := newTestRedis(t, p, -1)
	k2 := Scope{}.key(hashOf("forever"))
	if err := r2.Set(ctx, k2, entry("s")); err != nil {
		t.Fatal(err)
	}
	if d, err := r2.rdb.PTTL(ctx, r2.entryKey(k2)).Result(); err != nil || d >= 0 {
		t.Errorf("TTL with no expiry = %v, %v; want negative", d, err)
	}
}

func TestRedisUnreachableIsUnavailable(t *testing.T) {
	// A loopback port nothing listens on: connection refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	r, err := NewRedis(RedisOptions{URL: "redis://" + addr + "/0?dial_timeout=200ms&max_retries=-1", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k := Scope{}.key(hashOf("x"))
	checks := map[string]error{}
	_, checks["get"] = r.Get(ctx, k)
	_, _, checks["longest"] = r.Longest(ctx, []Key{k})
	checks["set"] = r.Set(ctx, k, entry("s"))
	_, checks["lock"] = r.Lock(ctx, k, time.Second)
	for op, err := range checks {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", op, err)
		}
	}
	if ctx.Err() != nil {
		t.Error("the calls used up the whole context instead of failing at once")
	}
	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4 (get, longest, set, lock)", len(spans))
	}
	for _, s := range spans {
		if s.Status.Code != codes.Error || len(s.Events) == 0 {
			t.Errorf("span %s: status %v, %d events; want the error recorded", s.Name, s.Status.Code, len(s.Events))
		}
	}
	// Fill degrades to computing without the cache.
	e, st, err := Fill(ctx, r, k, FillOptions{}, func(context.Context) (*Entry, error) { return entry("c"), nil })
	if err != nil || st != StatusUnavailable || e.Text != "c" {
		t.Errorf("Fill = %+v, %v, %v", e, st, err)
	}
}

func TestRedisMalformedURL(t *testing.T) {
	for _, u := range []string{"", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb"} {
		if _, err := NewRedis(RedisOptions{URL: u}); err == nil {
			t.Errorf("NewRedis(%q) succeeded", u)
		}
	}
}

func TestCacheSpans(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			var c Cache
			switch be.name {
			case "memory":
				c = NewMemory(MemoryOptions{TracerProvider: tp})
			case "redis":
				c = newTestRedis(t, testPrefix(t), 0, func(o *RedisOptions) { o.TracerProvider = tp })
			}
			ctx := context.Background()
			k := Scope{Tenant: "acme"}.key(hashOf("span"))
			exp.Reset()
			_, _ = c.Get(ctx, k)
			_ = c.Set(ctx, k, entry("s"))
			_, _ = c.Get(ctx, k)
			_, _, _ = c.Longest(ctx, []Key{k, Scope{}.key(hashOf("none"))})
			l, _ := c.Lock(ctx, k, time.Second)
			_, _ = c.Lock(ctx, k, time.Second)
			spans := exp.GetSpans()
			want := []struct {
				name string
				attr string
				val  any
			}{
				{"cache.get", string(AttrHit), false},
				{"cache.set", string(AttrBackend), be.name},
				{"cache.get", string(AttrHit), true},
				{"cache.longest", string(AttrHitIndex), int64(0)},
				{"cache.lock", string(AttrAcquired), true},
				{"cache.lock", string(AttrAcquired), false},
			}
			if len(spans) != len(want) {
				t.Fatalf("%d spans, want %d", len(spans), len(want))
			}
			for i, w := range want {
				s := spans[i]
				if s.Name != w.name {
					t.Errorf("span %d = %s, want %s", i, s.Name, w.name)
				}
				if s.Status.Code == codes.Error {
					t.Errorf("span %d (%s) has error status: a miss or a held lock is not an error", i, s.Name)
				}
				found := false
				for _, a := range s.Attributes {
					if string(a.Key) == w.attr {
						found = true
						if a.Value.AsInterface() != w.val {
							t.Errorf("span %d %s: %s = %v, want %v", i, s.Name, w.attr, a.Value.AsInterface(), w.val)
						}
					}
				}
				if !found {
					t.Errorf("span %d %s: no attribute %s", i, s.Name, w.attr)
				}
			}
			if l != nil {
				_ = l.Unlock(ctx)
			}
		})
	}
}

func TestRedisURLCarriesTLSAndAuth(t *testing.T) {
	r, err := NewRedis(RedisOptions{URL: "rediss://user:s3cret@cache.example:6380/2"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o := r.rdb.(*redis.Client).Options()
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "cache.example" {
		t.Errorf("rediss:// did not enable TLS for cache.example: %+v", o.TLSConfig)
	}
	if o.Username != "user" || o.Password != "s3cret" || o.DB != 2 || o.Addr != "cache.example:6380" {
		t.Errorf("options = user %q db %d addr %s", o.Username, o.DB, o.Addr)
	}
	if o.DialTimeout != 2*time.Second || o.ReadTimeout != time.Second {
		t.Errorf("default timeouts: dial %v read %v", o.DialTimeout, o.ReadTimeout)
	}
	r2, err := NewRedis(RedisOptions{URL: "redis://127.0.0.1:6379/0?dial_timeout=7s"})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if o := r2.rdb.(*redis.Client).Options(); o.DialTimeout != 7*time.Second || o.TLSConfig != nil {
		t.Errorf("URL dial_timeout not honoured or TLS on redis://: %v %v", o.DialTimeout, o.TLSConfig)
	}
}

func TestRedisLockWithoutTTLStillExpires(t *testing.T) {
	ctx := context.Background()
	r := newTestRedis(t, testPrefix(t), 0)
	k := Scope{}.key(hashOf("no ttl"))
	l, err := r.Lock(ctx, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	d, err := r.rdb.PTTL(ctx, r.lockKey(k)).Result()
	if err != nil || d <= 0 || d > DefaultLockTTL {
		t.Errorf("lock PTTL = %v, %v; want in (0, %v]", d, err, DefaultLockTTL)
	}
}

func TestRedisEndedContextIsNotAnOutage(t *testing.T) {
	r := newTestRedis(t, testPrefix(t), 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := Scope{}.key(hashOf("ctx"))
	checks := map[string]error{}
	_, checks["get"] = r.Get(ctx, k)
	_, _, checks["longest"] = r.Longest(ctx, []Key{k})
	checks["set"] = r.Set(ctx, k, entry("s"))
	_, checks["lock"] = r.Lock(ctx, k, time.Second)
	for op, err := range checks {
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v; want context.Canceled, not ErrUnavailable", op, err)
		}
	}
}
