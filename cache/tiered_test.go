package cache

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countingCache counts the calls that reach the shared cache.
type countingCache struct {
	Cache
	longest, get atomic.Int32
}

func (c *countingCache) Longest(ctx context.Context, keys []Key) (int, *Entry, error) {
	c.longest.Add(1)
	return c.Cache.Longest(ctx, keys)
}

func (c *countingCache) Get(ctx context.Context, key Key) (*Entry, error) {
	c.get.Add(1)
	return c.Cache.Get(ctx, key)
}

func TestTieredServesRepeatHitsFromMemory(t *testing.T) {
	ctx := context.Background()
	shared := &countingCache{Cache: newTestRedis(t, testPrefix(t), time.Minute)}
	writer := NewTiered(NewMemory(MemoryOptions{}), shared) // the replica that computed it
	reader := NewTiered(NewMemory(MemoryOptions{}), shared) // another replica
	s := Scope{Tenant: "acme", Summarizer: "x"}
	keys := s.Keys([][32]byte{hashOf("p1"), hashOf("p2"), hashOf("p3")})
	if err := writer.Set(ctx, keys[2], entry("summary of p3")); err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		idx, e, err := reader.Longest(ctx, keys)
		if err != nil || idx != 2 || e.Text != "summary of p3" {
			t.Fatalf("lookup %d: %d, %v, %v", i, idx, e, err)
		}
	}
	if n := shared.longest.Load(); n != 1 {
		t.Errorf("%d lookups reached Redis, want only the first", n)
	}
	if _, _, err := writer.Longest(ctx, keys); err != nil || shared.longest.Load() != 1 {
		t.Errorf("the writer's own entry was not served locally: %v, %d Redis lookups", err, shared.longest.Load())
	}

	// An earlier prefix found in Redis is kept locally too, under its own key.
	if err := writer.Set(ctx, keys[0], entry("summary of p1")); err != nil {
		t.Fatal(err)
	}
	other := NewTiered(NewMemory(MemoryOptions{}), shared)
	if idx, _, err := other.Longest(ctx, keys[:2]); err != nil || idx != 0 {
		t.Fatalf("anchor lookup: %d, %v", idx, err)
	}
	if e, err := other.Get(ctx, keys[0]); err != nil || e.Text != "summary of p1" || shared.get.Load() != 0 {
		t.Errorf("anchor not kept locally: %v, %v, %d Redis gets", e, err, shared.get.Load())
	}
	// Other tenants do not see it.
	if _, _, err := reader.Longest(ctx, Scope{Tenant: "other", Summarizer: "x"}.Keys([][32]byte{hashOf("p3")})); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's lookup: %v, want ErrNotFound", err)
	}
}

func TestTieredKeepsServingLocalHitsWhenTheSharedCacheIsDown(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "redis://" + lis.Addr().String() + "/0"
	lis.Close() // nothing listens there any more
	shared, err := NewRedis(RedisOptions{URL: dead + "?dial_timeout=200ms"})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	local := NewMemory(MemoryOptions{})
	s := Scope{Tenant: "acme"}
	held, missing := s.key(hashOf("held")), s.key(hashOf("missing"))
	if err := local.Set(ctx, held, entry("kept")); err != nil {
		t.Fatal(err)
	}
	tc := NewTiered(local, shared)
	if _, e, err := tc.Longest(ctx, []Key{held}); err != nil || e.Text != "kept" {
		t.Errorf("local hit with Redis down: %v, %v", e, err)
	}
	if _, _, err := tc.Longest(ctx, []Key{missing}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("local miss with Redis down: %v, want ErrUnavailable", err)
	}
	if err := tc.Set(ctx, missing, entry("new")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Set with Redis down: %v, want ErrUnavailable", err)
	}
}
